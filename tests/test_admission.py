"""Host-memory admission (pyto/emulator/admission.py, pyto_kernels.bmm.footprint): a launch predicted beyond the
memory available is refused with a CapacityError naming the estimate, the memory available and what to do, before
it is traced (BMM: from its plan) or after its first blocks (any kernel); runs that fit go on; the CLI's refusal
exits 1; broadcast views stay views; the estimate is within 2x of a measured peak."""
import os
import subprocess
import sys
import textwrap
import tracemalloc

import ml_dtypes
import numpy as np
import pytest

import pyto
import pyto.language as pl
from pyto.emulator import admission
from pyto_kernels.bmm import api, bmm, plan, run_plan
from pyto_kernels.bmm.api import check
from pyto_kernels.bmm.footprint import host_bytes, instructions

ROWS = 16
TRACED: list = []          # (block index) of every trace of copy_rows


@pl.jit
def copy_rows(x: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32], out: pl.Tensor[[pl.DYNAMIC, 64], pl.DT_FP32]):
    """out = x, ROWS rows at a time through UB, the row tiles dealt round robin to the AIVs (an AIV-only kernel)."""
    TRACED.append(pl.get_block_idx())
    t = pl.alloc(pl.UB, [ROWS, 64], pl.DT_FP32, buffers=2)
    with pl.section_vector():
        for r in pl.range(pl.get_block_idx() * ROWS, x.shape[0], pl.get_block_num() * ROWS):
            v = t.next()
            pl.load(v, x, [r, 0])
            pl.store(out, v, [r, 0])


def _rows(n: int) -> np.ndarray:
    return np.arange(n * 64, dtype=np.float32).reshape(n, 64)


# ---- refusals and admissions -------------------------------------------------------------------------
def test_a_run_far_beyond_the_limit_is_refused_before_it_is_traced(monkeypatch):
    monkeypatch.setenv(admission.ENV, "1M")
    x, out = _rows(64 * ROWS * 32), np.zeros((64 * ROWS * 32, 64), np.float32)
    TRACED.clear()
    with pytest.raises(pyto.CapacityError) as e:
        pyto.run(copy_rows, x, out, blocks=64)
    msg = str(e.value)
    assert "would hold about" in msg and "instructions x" in msg and "of host memory" in msg, msg
    assert "more than the 1.0 MiB available (PYTO_HOST_MEMORY_LIMIT=1M)" in msg, msg
    assert "mode='timing'" in msg and "run_options(check=False)" in msg and "smaller problem" in msg, msg
    assert e.value.buffer == "host memory" and e.value.asked > e.value.capacity == 2**20
    assert len(TRACED) <= 5, TRACED         # the AIC probe and the first two blocks' AIVs of 32 blocks (64 AIVs)
    assert not out.any()                    # all or nothing


def test_a_run_that_fits_is_admitted(monkeypatch):
    monkeypatch.setenv(admission.ENV, "1G")
    x, out = _rows(2048), np.zeros((2048, 64), np.float32)
    pyto.run(copy_rows, x, out, blocks=64)
    assert np.array_equal(out, x)
    monkeypatch.setenv(admission.ENV, "off")          # the check skipped
    out[:] = 0
    copy_rows[None, 8](x, out)                        # a @pl.jit launch
    assert np.array_equal(out, x)


def test_jit_launch_timing_mode_and_compile_go_through_the_check(monkeypatch):
    monkeypatch.setenv(admission.ENV, "64K")
    x, out = _rows(8192), np.zeros((8192, 64), np.float32)
    with pytest.raises(pyto.CapacityError, match="kernel 'copy_rows' on 4 block.*full mode"):
        copy_rows[None, 8](x, out)
    specs = (pyto.spec(x.shape, "fp32"), pyto.spec(out.shape, "fp32"))
    with pytest.raises(pyto.CapacityError, match="timing mode, race checks on.*smaller problem"):
        pyto.run(copy_rows, *specs, blocks=8, mode="timing")
    with pytest.raises(pyto.CapacityError, match="timing mode, race checks on"):
        pyto.compile(copy_rows, *specs, blocks=8)
    monkeypatch.setenv(admission.ENV, "1G")
    compiled = pyto.compile(copy_rows, x, out, blocks=8)
    monkeypatch.setenv(admission.ENV, "64K")          # the data pass, bound on the first call, is checked too
    with pytest.raises(pyto.CapacityError, match="its compiled data pass"):
        compiled(x, out)


def test_timing_mode_counts_the_trace_only_where_it_is_kept(monkeypatch):
    """pyto.run in timing mode drops each block's trace once it is encoded (the checked pass keeps integer rows);
    pyto.compile keeps it for the data pass a call runs: their estimates per instruction say so."""
    monkeypatch.setenv(admission.ENV, "16K")
    specs = (pyto.spec((8192, 64), "fp32"), pyto.spec((8192, 64), "fp32"))
    per = admission.PER_INSTRUCTION
    with pytest.raises(pyto.CapacityError) as run:
        pyto.run(copy_rows, *specs, blocks=8, mode="timing")
    with pytest.raises(pyto.CapacityError) as compiled:
        pyto.compile(copy_rows, *specs, blocks=8)
    assert f"instructions x {per['encoded'] + per['rows']:,} B (timing mode, race checks on)" in str(run.value)
    assert f"instructions x {per['trace']:,} B (timing mode, race checks on)" in str(compiled.value)


def test_bmm_full_and_timing_mode_are_checked_from_the_plan(monkeypatch):
    """bmm() and run_plan check the plan's count (footprint.py) before any operand is made or traced."""
    monkeypatch.setenv(admission.ENV, "4M")
    a = np.ones((32, 256, 256), ml_dtypes.bfloat16)
    big = pyto.spec((64, 1024, 1024), "bf16")
    monkeypatch.setattr(api, "operands", lambda *args, **kw: pytest.fail("operands made before the check"))
    with pytest.raises(pyto.CapacityError, match=r"bmm B 32 M 256 N 256 K 256 bf16 \(\w+, full mode\).*available"):
        bmm(a, a)
    with pytest.raises(pyto.CapacityError, match=r"\(\w+, timing mode\).*race checks on"):
        bmm(big, big)
    with pyto.run_options(check=False), pytest.raises(pyto.CapacityError, match="timing mode, checks off"):
        run_plan(plan(big.shape, big.shape, "bf16"), big, big)


def test_the_cli_refuses_with_exit_1_and_says_why():
    env = dict(os.environ, **{admission.ENV: "1G"})
    run = subprocess.run([sys.executable, "-m", "pyto", "bmm", "32", "8192", "8192", "8192", "--timing", "-q"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 1, (run.stdout, run.stderr)
    assert "CapacityError" in run.stderr and "32,047,104 instructions" in run.stderr, run.stderr
    # (the race checks hold a few bytes an instruction: dropping them is not offered as a way to fit)
    assert "PYTO_HOST_MEMORY_LIMIT=1G" in run.stderr and "smaller problem" in run.stderr, run.stderr
    assert "--no-race-check" not in run.stderr, run.stderr
    env[admission.ENV] = "20M"          # full mode: refused before the random inputs are made
    run = subprocess.run([sys.executable, "-m", "pyto", "bmm", "4", "512", "512", "512", "-q"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 1, (run.stdout, run.stderr)
    assert "full mode" in run.stderr and "the caller's inputs" in run.stderr and "--timing" in run.stderr


# ---- what is available ----------------------------------------------------------------------------------
def test_the_limit_override_reads_sizes_and_off(monkeypatch):
    for text, want in (("8G", 8 * 2**30), ("512m", 512 * 2**20), ("1.5GiB", 3 * 2**29), ("4096", 4096)):
        monkeypatch.setenv(admission.ENV, text)
        assert admission.limit()[0] == want
    monkeypatch.setenv(admission.ENV, "off")
    assert admission.limit()[0] is None
    monkeypatch.setenv(admission.ENV, "lots")
    with pytest.raises(pyto.KernelError, match="PYTO_HOST_MEMORY_LIMIT='lots'"):
        admission.limit()


def test_available_memory_is_the_smallest_of_meminfo_cgroup_and_rlimit(monkeypatch):
    files = {"/proc/meminfo": "MemTotal: 100 kB\nMemAvailable:    8388608 kB\n",          # 8 GiB
             "/proc/self/cgroup": "4:memory:/job\n0::/job\n",
             "/sys/fs/cgroup/job/memory.max": "max\n", "/sys/fs/cgroup/job/memory.current": "1\n",
             "/sys/fs/cgroup/memory/job/memory.limit_in_bytes": str(6 * 2**30),
             "/sys/fs/cgroup/memory/job/memory.usage_in_bytes": str(3 * 2**30),
             "/sys/fs/cgroup/memory/job/memory.stat": f"cache 5\ntotal_inactive_file {2**30}\n",
             "/proc/self/status": "VmSize:  1048576 kB\n"}
    monkeypatch.setattr(admission, "_read", files.get)
    monkeypatch.setattr(admission.resource, "getrlimit", lambda _: (admission.resource.RLIM_INFINITY,) * 2)
    have, source = admission.available()         # cgroup v1: 6 GiB limit less 2 GiB used (3 less 1 of cache)
    assert have == 4 * 2**30 and "cgroup" in source, source
    monkeypatch.setattr(admission.resource, "getrlimit", lambda _: (3 * 2**30, 3 * 2**30))
    have, source = admission.available()         # RLIMIT_AS 3 GiB less 1 GiB of address space
    assert have == 2 * 2**30 and "RLIMIT_AS" in source, source
    files["/sys/fs/cgroup/job/memory.max"] = str(2**30)         # a cgroup v2 limit of 1 GiB, 1 B in use
    assert admission.available() == (2**30 - 1, admission.available()[1])
    monkeypatch.setattr(admission, "_read", lambda path: None)      # not Linux: physical memory, or no check
    monkeypatch.setattr(admission.resource, "getrlimit", lambda _: (admission.resource.RLIM_INFINITY,) * 2)
    monkeypatch.setattr(admission.os, "sysconf", lambda name: {"SC_PAGE_SIZE": 4096, "SC_AVPHYS_PAGES": 1024}[name])
    assert admission.available() == (4 * 2**20, "free physical memory")
    def no_sysconf(name):
        raise ValueError(name)

    monkeypatch.setattr(admission.os, "sysconf", no_sysconf)
    assert admission.available()[0] is None


# ---- the estimate --------------------------------------------------------------------------------------
SHAPES = [((8, 256, 512), (8, 512, 256), "bf16", (8, 1, 256), {}),
          ((8, 512, 256), (8, 512, 256), "fp16", (256,), dict(transpose_a=True)),
          ((4, 512, 300), (512, 300), "bf16", (1, 512), dict(transpose_b=True)),
          ((16, 256, 512), (512, 256), "bf16", None, {}),
          ((100, 300), (32, 300, 200), "bf16", None, {}),
          ((1024, 2048), (8, 2048, 256), "bf16", None, {}),
          ((1, 64, 30000), (1, 30000, 32), "bf16", (32,), {}),
          ((1, 64, 30000), (1, 30000, 32), "fp32", (32,), dict(reduce="atomic")),
          ((256, 48, 512), (256, 512, 48), "bf16", (256, 1, 48), {}),
          ((64, 200, 256), (64, 256, 300), "bf16", None, {}),
          ((32, 64, 2048), (32, 2048, 256), "bf16", None, {}),
          ((256, 32, 1), (256, 1, 32), "fp16", (32,), {}),
          ((64, 256, 0), (64, 0, 256), "bf16", (64, 1, 256), {}),
          ((64, 64, 256), (64, 256, 64), "int8", (64,), {}),
          ((2, 1, 256, 1024), (1, 2, 1024, 16), "bf16", None, {})]


@pytest.mark.parametrize("a_shape, b_shape, dtype, bias, kw", SHAPES)
def test_the_plan_counts_the_instructions_its_kernel_traces(a_shape, b_shape, dtype, bias, kw):
    p = plan(a_shape, b_shape, dtype, bias=bias or False, **kw)
    a, b = pyto.spec(a_shape, dtype), pyto.spec(b_shape, dtype)
    bias = pyto.spec(bias, "int32" if dtype == "int8" else dtype) if bias else None
    with pyto.run_options(check=False):
        _, rep = run_plan(p, a, b, bias)
    assert abs(instructions(p, a, b, bias) / rep.instructions - 1) <= 0.1, (p.branch, rep.instructions)


@pytest.mark.parametrize("b_shape, dtype, bias, gaps", [
    ((96, 40, 36), "fp16", (96, 1, 36), True),      # N = 36 < N̄ = 48: a zero fill per bias row
    ((96, 40, 48), "int8", (1, 48), True),          # int8's N̄ is 32-aligned: 64 > 48
    ((96, 40, 48), "fp16", (1, 48), False)])        # N = N̄: no gaps, no fill
def test_merge_batch_counts_its_bias_row_exactly(b_shape, dtype, bias, gaps):
    """MergeBatch builds a group's bias row from each batch's row, zero-filling the columns between batches first
    (one pl.expands, only where there are such columns): the plan's count is the traced one."""
    a_shape = (96, 24, 40)
    p = plan(a_shape, b_shape, dtype, bias=True, branch="merge_batch")
    a, b = pyto.spec(a_shape, dtype), pyto.spec(b_shape, dtype)
    bias = pyto.spec(bias, "int32" if dtype == "int8" else dtype)
    assert p.tiling.b > 1 and (p.tiling.n_pad > b_shape[-1]) == gaps
    with pyto.run_options(check=False):
        _, rep = run_plan(p, a, b, bias)
    assert instructions(p, a, b, bias) == rep.instructions


_MEASURE = textwrap.dedent("""
    import sys
    import pyto
    from pyto.emulator import admission
    from pyto_kernels.bmm import plan, run_plan
    from pyto_kernels.bmm.api import random_inputs
    from pyto_kernels.bmm.footprint import host_bytes

    def status(key):
        return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(key))

    mode, shape = sys.argv[1], tuple(int(x) for x in sys.argv[2:6])
    B, M, N, K = shape
    gate = []        # the launch's own estimates (admission.Gate), block by block
    admit = admission.admit
    def spy(fp, what, advice, held=0, limit_now=None):
        if what.startswith("kernel") and "block(s)" in what:
            gate.append(fp.total)
        return admit(fp, what, advice, held, limit_now)
    admission.admit = spy
    def operands(B, M, N, K):
        if mode == "full":
            return random_inputs((B, M, K), (B, K, N), "bf16")[:2]
        return pyto.spec((B, M, K), "bf16"), pyto.spec((B, K, N), "bf16")
    run_plan(plan((2, 128, 256), (2, 256, 128), "bf16"), *operands(2, 128, 128, 256))     # numba, imports
    p = plan((B, M, K), (B, K, N), "bf16")
    a, b = operands(B, M, N, K)
    gate.clear()
    base = status("VmRSS")
    open("/proc/self/clear_refs", "w").write("5")       # VmHWM from here
    run_plan(p, a, b)
    peak = status("VmHWM") - base
    print(peak, host_bytes(p, a, b, mode=mode).total, gate[0])
""")


@pytest.mark.skipif(not os.access("/proc/self/clear_refs", os.W_OK), reason="needs Linux's /proc/self/clear_refs")
@pytest.mark.parametrize("mode, shape", [("timing", (32, 1024, 1024, 1024)), ("full", (8, 1024, 1024, 512))])
def test_the_estimate_is_within_2x_of_the_measured_peak(mode, shape):
    """A fresh process's peak resident set over its resident set before the run (VmHWM after clear_refs) against
    the plan's estimate and the launch's own (the first blocks'), with race checks (timing) / full mode."""
    run = subprocess.run([sys.executable, "-c", _MEASURE, mode, *map(str, shape)], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, **{admission.ENV: "off"}))
    assert run.returncode == 0, run.stderr
    peak, from_plan, from_blocks = map(int, run.stdout.split())
    for est in (from_plan, from_blocks):
        assert 0.5 <= est / peak <= 2, (peak, from_plan, from_blocks)


# ---- broadcast views ------------------------------------------------------------------------------------
def _bf16(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(ml_dtypes.bfloat16)



def _traced_peak(fn, *args):
    """fn(*args) and the peak of Python-allocated memory (numpy's arrays included) during the call."""
    tracemalloc.start()
    try:
        return fn(*args), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

def test_a_broadcast_operand_runs_under_a_limit_its_copy_would_break(monkeypatch):
    """A = np.broadcast_to of a [1, M, K] to [B, M, K]: staged once and read through the view (its copy, staged
    and widened, would take ~190 MiB); the contiguous copy of it is refused under the same limit."""
    B, M, K, N = 64, 512, 1024, 16
    a = np.broadcast_to(_bf16((1, M, K)), (B, M, K))
    b = _bf16((K, N), 1)
    p = plan(a.shape, b.shape, "bf16")
    as_view = host_bytes(p, a, b).total
    as_copy = host_bytes(p, pyto.spec(a.shape, "bf16"), pyto.spec(b.shape, "bf16")).total
    assert as_copy - as_view > 2 * a.size * 2
    monkeypatch.setenv(admission.ENV, str((as_view + as_copy) // 2))
    c, peak = _traced_peak(bmm, a, b)
    assert peak < a.size * a.itemsize / 2, peak          # not even the operand's bf16 bytes once
    assert check(c, a, b) == ""
    with pytest.raises(pyto.CapacityError, match="host memory"):
        bmm(np.ascontiguousarray(a), b)


def test_numpy_matmul_broadcasting_and_mixed_stride_0_batches_are_read_through_views():
    """A batch-1 A against a batch-B B (numpy.matmul's own broadcast) is never expanded; a view whose batch axes do
    not merge (stride 0 beside a strided one) is indexed per batch (memory._Batched), with the right result."""
    B, M, K, N = 256, 256, 512, 16
    a1, b = _bf16((M, K)), _bf16((B, K, N), 1)
    c, peak = _traced_peak(bmm, a1, b)
    assert peak < B * M * K * 2 / 2, peak
    assert check(c, a1, b) == ""
    x = _bf16((3, 1, 64, 128), 2)
    a = np.broadcast_to(x, (3, 4, 64, 128))               # axis 1 stride 0 next to a strided axis 0
    b = _bf16((3, 4, 128, 48), 3)
    c = bmm(a, b)
    assert check(c, a, b) == ""


def test_a_compiled_kernel_keeps_the_broadcast_pattern_of_its_first_call():
    x = np.broadcast_to(np.arange(64, dtype=np.float32), (512, 64))     # every row the same: stride-0 rows
    out = np.zeros((512, 64), np.float32)
    compiled = pyto.compile(copy_rows, x, out, blocks=4)
    compiled(x, out)
    assert np.array_equal(out, x)
    y = np.broadcast_to(np.arange(64, 128, dtype=np.float32), (512, 64))
    compiled(y, out)
    assert np.array_equal(out, y)
    with pytest.raises(pyto.ShapeError, match="staged as a broadcast view"):
        compiled(np.ascontiguousarray(y), out)


def test_a_launch_reads_the_memory_it_may_take_once_in_a_while_not_per_block(monkeypatch):
    """Gate._budget: /proc and the cgroup files are read again only after LIMIT_REFRESH_S, so a launch of many
    small blocks does not read them per block; a limit that changes is seen once the window has passed."""
    from pyto_kernels.examples.matmul_pingpong import matmul_pingpong
    reads = []
    real = admission.limit
    monkeypatch.setattr(admission, "limit", lambda: reads.append(1) or real())
    s = pyto.spec((32 * 64, 64), "fp16")
    pyto.run(matmul_pingpong, s, pyto.spec((64, 64), "fp16"), s, mode="timing", blocks=32, TM=64, TN=64, TK=64)
    assert 0 < len(reads) < 31            # 31 block checks (from the second block on), far fewer reads
    gate = admission.Gate("k", [], (), None, full=False, check=True)
    monkeypatch.setenv(admission.ENV, "1G")
    assert gate._budget(5) == ((1 << 30, f"{admission.ENV}=1G"), 5)
    monkeypatch.setenv(admission.ENV, "1K")
    assert gate._budget(7) == ((1 << 30, f"{admission.ENV}=1G"), 5)      # within the window: as read, held then
    monkeypatch.setattr(admission, "LIMIT_REFRESH_S", -1.0)
    assert gate._budget(9) == ((1 << 10, f"{admission.ENV}=1K"), 9)      # past it: read again
