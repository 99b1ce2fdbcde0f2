"""Check one jit kernel: make its inputs, run it on the emulator, and gather the verdict, the time and the address
maps (pyto.check; `pyto check` calls it per kernel of a file)."""
from __future__ import annotations

import contextlib
import io
import os
import time
import traceback
from typing import Optional

from ..errors import CapacityError, InputError, KernelError, PytoError
from ..ir import Buf
from ..language.trace import captured_launches
from . import sparse
from .inputs import make_args
from .result import FAILED, INTERNAL, NEEDS_INPUT, OK, BufferMap, CheckResult, TileRange


def check(kernel, *, block_dim: int = 1, seed: int = 0, timing: bool = False, chip: Optional[str] = None,
          trace: Optional[str] = None, file: Optional[str] = None, **values) -> CheckResult:
    """Check `kernel` (a @pl.jit kernel) on the emulator and return what was found; it raises nothing a kernel
    can cause. `values`: per parameter name, a shape for a tensor whose annotation leaves dims open (or a
    pl.Ptr's element count), a scalar's value, tiling data (a dataclass instance or a {field: value} dict).
    Inputs are random of the annotated dtypes (from `seed`); `timing`: shapes only (pyto.spec inputs, no
    data). `chip`: a pyto chip name (default: the kernel's arch). `trace`: a path to write the launch's
    Perfetto trace to (.json or .json.gz). `block_dim` as in kernel[None, block_dim](...)."""
    from ..language.jit import JitKernel
    if not isinstance(kernel, JitKernel):
        raise KernelError(f"pyto.check takes a @pl.jit kernel, got {kernel!r}")
    code = kernel.fn.__code__
    result = CheckResult(kernel.name, file or code.co_filename, code.co_firstlineno, "ok", OK,
                         mode="timing" if timing else "full", chip=chip or kernel.chip, block_dim=block_dim)
    t0 = time.perf_counter()
    error = None
    with captured_launches() as launches:
        try:
            args, result.inputs = make_args(kernel, values, seed=seed, timing=timing)
            with contextlib.redirect_stdout(io.StringIO()):     # pl.printf lines: in the result, not on stdout
                rep = _launch(kernel, args, result, block_dim, seed)
        except InputError as e:
            result.verdict, result.kind, result.message = "InputError", NEEDS_INPUT, str(e)
        except MemoryError:
            result.verdict, result.kind = "InputError", NEEDS_INPUT
            result.message = (f"the inputs ({_sizes(result.inputs)}) do not fit in this machine's memory: give "
                              f"smaller shapes (--shape), or check the shapes alone (--timing)")
        except PytoError as e:
            result.verdict, result.kind, result.message = type(e).__name__, FAILED, str(e)
            error = e
        except Exception as e:              # not a PytoError: pyto itself failed
            result.verdict, result.kind = type(e).__name__, INTERNAL
            result.message = (f"pyto failed (please report, with this traceback): {type(e).__name__}: {e}\n"
                              + "".join(traceback.format_exc(limit=-8)))
        else:
            _timing(result, rep)
            if trace:
                os.makedirs(os.path.dirname(os.path.abspath(trace)), exist_ok=True)
                rep.save_trace(trace)
                result.trace = trace
    if launches:
        result.buffers = buffer_maps(launches[-1])
        if isinstance(error, CapacityError):
            _add_refused(result.buffers, error, launches[-1])
    result.seconds = time.perf_counter() - t0
    return result


def _launch(kernel, args: list, result: CheckResult, block_dim: int, seed: int):
    """Run the kernel on `args`; a full-mode launch with a uint8 GM input compiles first, so that the inputs
    feeding a sparse MMAD's index get valid index bytes before its data pass (checker/sparse.py)."""
    from ..emulator.run import compile as compile_launch, run
    if result.mode != "full" or not sparse.may_take_index(kernel):
        return run(kernel, *args, blocks=block_dim, chip=result.chip, mode=result.mode)
    compiled = compile_launch(kernel, *args, blocks=block_dim, chip=result.chip)
    arrays, _ = kernel.bind(tuple(args), {})
    sparse.draw_index_inputs(compiled, arrays, seed, result.inputs)
    return compiled(*arrays)


def _sizes(inputs: dict) -> str:
    return ", ".join(f"{k} {v['shape']} {v['dtype']}" for k, v in inputs.items() if "shape" in v) or "as given"


def _timing(result: CheckResult, rep) -> None:
    result.report = rep
    result.cycles, result.time_us, result.instructions = rep.cycles, rep.time_us, rep.instructions
    result.bottleneck, result.bound = rep.bottleneck, rep.bound
    result.pipe_cycles = dict(rep.pipe_cycles)
    result.printed = list(rep.printed)


_ORDER = [Buf.L1, Buf.L0A, Buf.L0B, Buf.L0C, Buf.BT, Buf.FB, Buf.UB, Buf.L0A_MX, Buf.L0B_MX, Buf.L0B_SP]


def buffer_maps(launch) -> list:
    """Each buffer's map in `launch`, in the chip's order (L1, L0A, L0B, L0C, BT, FB, UB, then the MX scale buffers): the fullest block's."""
    by_buf: dict = {}
    for (block, buf), space in launch.spaces().items():
        by_buf.setdefault(buf, []).append((block, space))
    maps = []
    for buf in _ORDER:
        spaces = by_buf.get(buf)
        if not spaces:
            continue
        block, space = max(spaces, key=lambda bs: (bs[1].in_use(), -bs[0]))
        table = space.table()
        same = all(s.table() == table for _, s in spaces)
        tiles = [TileRange(lo, hi, what, _line(r.loc)) for (lo, hi, what, _), r in zip(table, space.reserved)]
        maps.append(BufferMap(buf.name, space.capacity, space.in_use(), block, tiles, same, len(spaces),
                              launch.blocks))
    return maps


def _line(loc) -> str:
    return f"{os.path.basename(loc.file)}:{loc.line}"


def _add_refused(maps: list, e: CapacityError, launch) -> None:
    """A CapacityError's range, shown in its buffer's map where the kernel asked for it."""
    if e.at is None or not e.buffer:
        return
    m = next((m for m in maps if m.buffer == e.buffer), None)
    if m is None:
        m = BufferMap(e.buffer, e.capacity, 0, 0, [], True, 1, launch.blocks)
        maps.append(m)
        order = [b.name for b in _ORDER]
        maps.sort(key=lambda b: order.index(b.buffer) if b.buffer in order else len(order))
    m.tiles.append(TileRange(e.at, e.at + e.asked, e.what, e.loc.split(" ", 1)[0], refused=True))
