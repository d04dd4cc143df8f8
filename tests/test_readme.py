"""The README's examples run as written, each on its own (in a scratch directory): the
Python blocks, and the ``sh`` blocks (``dpstream`` as ``python -m dpstream.cli``, from a
copy of the shipped data at the paths the README uses)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import dpstream
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
SHELL = re.findall(r"```sh\n(.*?)```", README.read_text(), re.S)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 2 and len(SHELL) >= 1


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(BLOCKS[index], str(README), "exec"), namespace)  # alone, as a newcomer would


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(SHELL)))
def test_readme_commands_run(index: int, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "python" / "dpstream" / "data", tmp_path / "python/dpstream/data")
    commands = SHELL[index].replace("\\\n", " ").splitlines()
    for line in (c.split("#")[0].strip() for c in commands):
        if not line:
            continue
        argv = shlex.split(line)
        assert argv[0] == "dpstream", line
        done = subprocess.run(
            [sys.executable, "-m", "dpstream.cli", *argv[1:], "--quiet"],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(Path(dpstream.__file__).parents[1])},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
