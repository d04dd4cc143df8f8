"""The store of finished streams of benches/bench_tabular.py: what a rerun may reuse."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
bt = pytest.importorskip("bench_tabular")


def result(job: bt.Job, first: float = 0.5) -> bt.Result:
    row = [first, 0.1, 2.0, 3.0, 0.4, 0.9]
    return bt.Result(
        job, 8, 400, [1, 2, 8], [row, row, row], [row, row, row], 1.5, 1.25, 1e-15,
        revision="abc1234", machine="cpu, 2 cores", computed="2026-11-25 12:00 UTC",
    )  # fmt: skip


def test_store_round_trip(tmp_path: Path) -> None:
    job = bt.Job("ordered", 50, 1.0, "proposed", "simple", 0, max_steps=8)
    res = result(job)
    bt.save_stored(tmp_path, res)
    assert [p.name for p in tmp_path.iterdir()] == [f"{job.key}.json.gz"]
    back = bt.load_stored(tmp_path, job)
    assert back is not None and back.cached
    assert replace(back, cached=False) == res
    # Another job's file, a damaged file and a missing one are not reused.
    assert bt.load_stored(tmp_path, replace(job, run=1)) is None
    (tmp_path / f"{job.key}.json.gz").write_bytes(b"not gzip")
    assert bt.load_stored(tmp_path, job) is None


def test_reuse_needs_the_same_first_metrics() -> None:
    job = bt.Job("randomized", 200, 2.0, "baseline", "simple", 1)
    stored = result(job)
    probe = replace(stored, eval_t=[1, 2], values=stored.values[:2])
    assert bt.reproduces(stored, probe)
    assert not bt.reproduces(stored, replace(probe, values=[[0.5000001, *probe.values[0][1:]]] * 2))
    assert not bt.reproduces(stored, replace(probe, eval_t=[], values=[]))


def test_a_probe_reproduces_a_stored_stream(tmp_path: Path) -> None:
    # A real (short) stream: its first steps, recomputed, give the stored metrics exactly.
    job = bt.Job("ordered", 200, 1.0, "proposed", "simple", 0, max_steps=4)
    full = bt.run_job(job)
    bt.save_stored(tmp_path, full)
    stored = bt.load_stored(tmp_path, job)
    assert stored is not None
    assert bt.reproduces(stored, bt.run_job(job, stop=2))


def test_restrict_to_settings_methods_and_runs() -> None:
    grid = bt.GRIDS["default"]
    sub = bt.restrict(grid, [("ordered", 50, 2.0)], 3, [bt.POOLED])
    assert {(j.order, j.batch, j.epsilon, j.method) for j in sub.jobs} == {
        ("ordered", 50, 2.0, bt.POOLED)
    }
    assert sorted(j.run for j in sub.jobs) == [0, 1, 2]
    assert "--methods" in sub.subset and "--runs" in sub.subset and "--only" in sub.subset
    assert bt.restrict(grid, None, None, None) is grid
    with pytest.raises(ValueError, match="not in the default grid"):
        bt.restrict(grid, None, None, ["no-such-method"])
    with pytest.raises(ValueError, match="not in the default grid"):
        bt.restrict(grid, [("ordered", 50, 0.5)], None, None)
