"""The Rust-only fixed-memory online program (rust/core/examples/continual_edge.rs): a stream,
R releases and a memory report without Python, and a checkpoint that Python loads."""

from __future__ import annotations

import subprocess
from pathlib import Path

import dpstream
import pytest
from conftest import example_binary


@pytest.fixture(scope="module")
def edge_binary() -> Path:
    return example_binary("continual_edge")


def test_stream_releases_and_a_checkpoint_python_loads(edge_binary: Path, tmp_path: Path) -> None:
    out = tmp_path / "state.dpst"
    args = ["--epsilon", "1", "--dim", "2", "--memory-bytes", "262144", "--points", "20000"]
    args += ["--releases", "10", "--seed", "5", "--out", str(out)]
    done = subprocess.run(
        [str(edge_binary), *args], capture_output=True, text=True, timeout=300, check=True
    )
    lines = done.stdout.splitlines()
    reserved = int(lines[1].split()[1])
    assert 0 < reserved <= 262144, lines[1]
    rows = [line.split() for line in lines if line.strip()[:1].isdigit()]
    assert [int(r[0]) for r in rows] == [1, 2, 4, 8, 10]
    assert {int(r[3]) for r in rows} == {reserved}  # memory flat over the stream
    assert "NOT PRIVATE" in done.stdout
    s = dpstream.load(out, allow_seeded=True)
    assert s.method == "privhp" and s.t == 20000 and s.epochs == 10 and s.max_releases == 10
    assert s.memory_bytes() == reserved
    assert s.release(100).shape == (100, 2)


def test_bad_arguments_exit_with_status_2(edge_binary: Path) -> None:
    done = subprocess.run(
        [str(edge_binary), "--releases", "0"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "--releases" in done.stderr
