"""README's examples run as written: every ```python block, in order, in one namespace (as a reader pastes them)."""
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_readme_has_examples():
    assert len(BLOCKS) >= 6


def test_readme_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "readme_examples.py"       # a real file: kernels' source lines are read back for messages
    path.write_text("\n\n".join(BLOCKS), encoding="utf-8")
    code = compile(path.read_text(encoding="utf-8"), str(path), "exec")
    namespace = {"__name__": "readme_examples"}
    try:
        exec(code, namespace)
    except Exception as e:   # name the block that failed
        pytest.fail(f"README example raised {type(e).__name__}: {e}")
