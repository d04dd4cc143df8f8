"""benches/bench_tabular.py, run through its command line on tiny inputs: the store of finished
streams (what a rerun may reuse) and the split of its section between RESULTS.md and
benches/out."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

from conftest import run_bench

TITLE = "## Tabular stream on Adult: the paper's tables"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_bench("bench_tabular.py", *args)


def tiny(tmp: Path) -> list[str]:
    return [
        "--quick", "--steps", "2", "--only", "randomized:200:1",
        "--methods", "baseline,default", "--workers", "1",
        "--store", str(tmp / "store"), "--results", str(tmp / "RESULTS.md"),
        "--figure-dir", str(tmp / "out" / "figures"),
    ]  # fmt: skip


def test_a_run_stores_its_streams_and_a_rerun_reuses_only_what_it_reproduces(
    tmp_path: Path,
) -> None:
    (tmp_path / "RESULTS.md").write_text("# results\n\n## Another section\n\nkept\n")
    first = run(*tiny(tmp_path))
    assert first.returncode == 0, first.stderr
    stored = sorted(p.name for p in (tmp_path / "store").iterdir())
    assert stored == [
        "randomized_bs200_eps1p0_baseline_simple_run0_steps2.json.gz",
        "randomized_bs200_eps1p0_default_simple_run0_steps2.json.gz",
    ]
    text = (tmp_path / "RESULTS.md").read_text()
    assert "## Another section\n\nkept" in text and TITLE in text
    # RESULTS.md: the summaries and the side by side; the long tables go next to the data.
    assert "### Side by side" in text and "| Adult-randomized-bs-200 | 1 |" in text
    assert "### Tables 1–2" not in text and "### Time per stream" not in text
    assert "### Details" in text and "--steps" in text
    details = (tmp_path / "out" / "bench_tabular.md").read_text()
    assert details.startswith(TITLE) and "### Tables 1–2" in details
    assert "### Time per stream" in details and "### Side by side" in details
    # The final figures: one row per setting and method, with the revision that computed it.
    csv = (tmp_path / "tabular_final.csv").read_text().splitlines()
    assert csv[0].startswith("dataset,epsilon,method,counter,runs,steps,AvgWE,MaxWE")
    assert [row.split(",")[:6] for row in csv[1:]] == [
        ["Adult-randomized-bs-200", "1", m, "simple", "1", "2"] for m in ("baseline", "default")
    ]

    again = run(*tiny(tmp_path))
    assert again.returncode == 0, again.stderr
    assert "2 streams reused" in again.stderr
    assert "2 of them reused from the store" in (tmp_path / "RESULTS.md").read_text()

    # A stored stream whose first metrics the code does not reproduce is recomputed; a
    # damaged file is not read at all.
    path = tmp_path / "store" / stored[0]
    data = json.loads(gzip.decompress(path.read_bytes()))
    data["values"][0][0] *= 1.000001
    path.write_bytes(gzip.compress(json.dumps(data).encode()))
    (tmp_path / "store" / stored[1]).write_bytes(b"not gzip")
    third = run(*tiny(tmp_path))
    assert third.returncode == 0, third.stderr
    assert "0 streams reused" in third.stderr and "1 not reproduced: recomputed" in third.stderr
    fourth = run(*tiny(tmp_path))  # both were written again: reused
    assert "2 streams reused" in fourth.stderr


def test_bad_arguments_and_an_empty_store_are_refused(tmp_path: Path) -> None:
    bad = run("--quick", "--methods", "no-such-method", "--no-write")
    assert bad.returncode == 2 and "not in the quick grid" in bad.stderr
    bad = run("--quick", "--only", "ordered:50:0.5", "--no-write")
    assert bad.returncode == 2 and "not in the quick grid" in bad.stderr
    bad = run("--quick", "--steps", "0", "--no-write")
    assert bad.returncode == 2 and "--steps must be at least 1" in bad.stderr
    empty = run("--report-only", "--store", str(tmp_path / "empty"), "--no-write")
    assert empty.returncode == 1 and "no stream finished" in empty.stderr
