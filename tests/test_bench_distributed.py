"""benches/bench_distributed.py --part streams, run through its command line on tiny batches
(issue 30): every capability's cluster result is checked equal to one process's by the
script itself, and its section lists the rates, where the counting time goes, the client's
memory and the extrapolation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benches" / "bench_distributed.py"


def test_quick_streams_part_writes_its_section(tmp_path: Path) -> None:
    pytest.importorskip("dask.distributed")
    results = tmp_path / "RESULTS.md"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--part", "streams", "--results", str(results)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    summary = results.read_text()
    assert "## Distributed tabular stream and online synthesizer" in summary
    assert "QUICK SMOKE RUN" in summary and "Distributed PrivHP" not in summary
    # RESULTS.md keeps the rates; the rest goes to the details file next to it
    assert "### Counting throughput" in summary and "### Setup" not in summary
    text = (tmp_path / "out" / "bench_distributed_streams.md").read_text()
    assert "### Setup" in text and "### Counting throughput" in text
    for capability in ("table (8 columns", "online, epochs (default)", "online, for_memory"):
        rows = [line for line in text.splitlines() if line.startswith(f"| {capability}")]
        # rates x2, where the time goes (1 and 2 workers), client x2, extrapolation
        assert len(rows) == 2 + 2 + 2 + 1, capability
    assert "Where the counting time goes on the cluster (200,000 rows" in text
    assert "Extrapolation to 10^9 rows per release" in text
    # the table's scaling by partition size: one row per partition size of the quick run
    assert "The table's scaling by partition size (200,000 rows" in text
    assert "| 50,000 | 4 |" in text and "| 100,000 | 2 |" in text
    # ... and the first one again on clusters with Dask's default worker settings
    assert "| 50,000, Dask's default worker settings | 4 |" in text
    assert "per round: median" in text


def test_release_rss_measures_both_releases_and_checks_them_equal() -> None:
    """``--release-rss N``: the client's peak RSS across a table step and an online release,
    each drawn by the workers and on the client; the script checks each pair equal."""
    pytest.importorskip("dask.distributed")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--release-rss", "30000", "--no-write"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "30,000-row Dask batch" in done.stdout
    for label in (
        "table: drawn and written (Parquet) by the workers",
        "table: on the client",
        "online (d = 2): `release_dask`, written (npy) by the workers",
        "online (d = 2): `release` on the client",
    ):
        assert f"| {label} |" in done.stdout
