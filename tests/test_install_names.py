"""Install names: the repository's kernels/ and chips/ install as pyto_kernels and pyto_chips, so a user's own
`kernels` or `chips` package (a kernel author's project very likely has one) neither shadows pyto's nor is
shadowed by it."""
import subprocess
import sys
import textwrap

import pytest
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_a_users_own_kernels_and_chips_packages_do_not_collide_with_pytos(tmp_path):
    """From a directory holding its own `kernels` and `chips` packages, pyto loads its chip tables and BMM
    kernels and runs a BMM, the `pyto plan` command works, and `import kernels` / `import chips` are the user's."""
    for name in ("kernels", "chips"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"OWNER = 'user {name}'\n")
    script = textwrap.dedent("""
        import numpy as np
        import kernels, chips
        import pyto
        from pyto_kernels.bmm import bmm
        from pyto_kernels.bmm.api import check
        assert kernels.OWNER == "user kernels" and chips.OWNER == "user chips", (kernels.OWNER, chips.OWNER)
        assert pyto.load_chip("ascend950pr").name == "ascend950pr"
        a = np.random.default_rng(0).standard_normal((2, 32, 48)).astype(np.float16)
        b = np.random.default_rng(1).standard_normal((2, 48, 64)).astype(np.float16)
        c = bmm(a, b)
        assert check(c, a, b) == "", check(c, a, b)
        print("ok")
    """)
    run = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]
    cli = subprocess.run([sys.executable, "-m", "pyto", "plan", "4", "256", "256", "256"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0 and "BMM plan" in cli.stdout, cli.stderr[-3000:]


def test_every_package_folder_is_installed_under_its_mapped_name():
    """pyproject lists packages by hand (a folder maps to another name, which setuptools' find cannot do): every
    folder with an __init__.py must be in the list, under its installed name."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping = cfg["package-dir"]
    folder_to_name = {folder: name for name, folder in mapping.items()}
    found = set()
    for init in ROOT.glob("*/**/__init__.py"):
        rel = init.parent.relative_to(ROOT).parts
        if rel[0] not in ("pyto", *folder_to_name) or "__pycache__" in rel:
            continue
        found.add(".".join((folder_to_name.get(rel[0], rel[0]),) + rel[1:]))
    assert found == set(cfg["packages"]), (sorted(found), sorted(cfg["packages"]))
    assert set(mapping) == {"pyto_kernels", "pyto_chips"}


def test_a_kernel_beside_pytos_folder_is_the_authors_code(tmp_path):
    """A file in a folder whose name starts like pyto's own (site-packages/pyto_kernels beside site-packages/pyto)
    is kernel code: its lines name tiles and errors, not pyto's internals."""
    import linecache

    import numpy as np

    import pyto
    import pyto.language as pl
    from pyto.language import trace

    fake = trace._PKG_DIR.rstrip("/\\") + "_kernels_probe/probe.py"
    source = ("def probe(x):\n"
              "    t_probe = pl.alloc(pl.UB, [16, 16], pl.DT_FP32)\n"
              "    with pl.section_vector():\n"
              "        pl.load(t_probe, x, [0, 0])\n"
              "        pl.store(x, t_probe, [1, 0])\n")
    linecache.cache[fake] = (len(source), None, source.splitlines(True), fake)
    scope = {"pl": pl}
    exec(compile(source, fake, "exec"), scope)
    try:
        with pytest.raises(pyto.OutOfBoundsError) as e:
            pyto.run(pl.kernel(scope["probe"]), np.zeros((16, 16), np.float32))
    finally:
        linecache.cache.pop(fake, None)
    assert "probe.py:5" in str(e.value) and "t_probe" in str(e.value), str(e.value)
