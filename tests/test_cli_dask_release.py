"""Issue 42: ``dpstream table --dask … --format parquet`` writes each release as a
directory of Parquet files, one per chunk of the release, drawn, decoded and written by
the workers; the rows are those of the run without ``--dask`` (same ``--seed``), and a
killed run resumes by drawing its pending release again from the checkpointed state."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dpstream.cli import main
from dpstream.runs import _decode_checkpoint
from dpstream.tabular import Domain, release
from test_cli import run as cli
from test_cli_dask import MONTHS, inputs, scheduler  # noqa: F401 (fixtures)

pytest.importorskip("dask.distributed")
pytest.importorskip("pyarrow")

SCHEMA = {
    "x": {"numeric": [0, 10], "bins": 5},
    "y": {"numeric": [-5, 15], "bins": 4, "missing": True},
    "a": 3,
    "b": {"categories": ["u", "v"], "missing": True},
    "c": 4,
}
LABELS = ["2024-01", "2024-02", "2024-03"]


@pytest.fixture
def numbers(inputs: tuple[Path, Path, Path]) -> tuple[Path, Path, Path]:  # noqa: F811
    """``test_cli_dask``'s inputs with a schema of numbers in bins and missing values."""
    inputs[2].write_text(json.dumps(SCHEMA))
    return inputs


def table(domain: Path, src: Path, out: Path, *extra: str) -> list[str]:
    return [
        "table", "--domain", str(domain), "--epsilon", "1", "--quiet", "--format", "parquet",
        *MONTHS, "--end", "2024-03", "--seed", "3", "--input", str(src), "--out", str(out),
        *extra,
    ]  # fmt: skip


def files(out: Path) -> dict[str, bytes]:
    """Every file under ``out`` (and below), by its path there."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_a_release_is_a_directory_of_chunks_with_the_rows_of_one_process(
    numbers: tuple[Path, Path, Path],
    tmp_path: Path,
    scheduler: str,  # noqa: F811 (the imported fixture)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one, directory, domain = numbers
    schema = Domain.from_json(domain)
    # Chunks of 997 rows (the plan carries its chunk size to the workers): several parts.
    monkeypatch.setattr(release, "CHUNK_ROWS", 997)
    assert main(table(domain, one, tmp_path / "one")) == 0
    assert main(table(domain, directory, tmp_path / "dask", "--dask", scheduler)) == 0
    for label in LABELS:
        name = f"release-{label}.parquet"
        want = pd.read_parquet(tmp_path / "one" / name)
        parts = sorted((tmp_path / "dask" / name).iterdir())
        rows = [len(pd.read_parquet(p)) for p in parts]
        assert [p.name for p in parts] == [f"part-{i:05d}.parquet" for i in range(len(parts))]
        assert len(parts) > 1 and rows[:-1] == [997] * (len(parts) - 1) and sum(rows) == len(want)
        got = pd.read_parquet(tmp_path / "dask" / name)  # the parts in order
        assert list(got.columns) == list(want.columns)
        # Row for row the same records; numbers drawn in the same bins, by each chunk's
        # own generator (function of seed, step and chunk).
        assert np.array_equal(schema.encode(got), schema.encode(want))
        for c in ("a", "b", "c"):
            assert got[c].equals(want[c]), c
    # A release of one chunk is the file of the run without --dask, numbers and all.
    monkeypatch.undo()
    assert main(table(domain, one, tmp_path / "one-whole")) == 0
    assert main(table(domain, directory, tmp_path / "whole", "--dask", scheduler)) == 0
    for label in LABELS:
        name = f"release-{label}.parquet"
        got = pd.read_parquet(tmp_path / "whole" / name)
        assert [p.name for p in (tmp_path / "whole" / name).iterdir()] == ["part-00000.parquet"]
        pd.testing.assert_frame_equal(got, pd.read_parquet(tmp_path / "one-whole" / name))


@pytest.mark.slow
def test_a_killed_run_draws_its_pending_release_again_from_the_state(
    numbers: tuple[Path, Path, Path],
    tmp_path: Path,
    scheduler: str,  # noqa: F811 (the imported fixture)
) -> None:
    """The checkpoint holds the state a pending release is drawn from, not its rows:
    killed after it (another process and cluster: ``local:1``), the run draws the
    release again, the same bytes; killed after the release's directory appeared, the
    run keeps it (and removes an unfinished one). ``--policy paper`` draws a new key
    from the state at every release."""
    _, directory, domain = numbers
    paper = ["--policy", "paper", "--checkpoint"]

    def argv(out: str, *extra: str) -> list[str]:
        ckpt = str(tmp_path / f"{out}.ckpt")
        return table(domain, directory, tmp_path / out, *paper, ckpt, *extra)

    assert main(argv("ref", "--dask", scheduler)) == 0
    ref = files(tmp_path / "ref")
    assert sorted({k.split("/")[0] for k in ref}) == [f"release-{m}.parquet" for m in LABELS]

    killed = cli(*argv("a", "--dask", "local:1"), env={"DPSTREAM_FAULT": "after-checkpoint:1"})
    assert killed.returncode == 137, killed.stderr
    header, _, pending = _decode_checkpoint(tmp_path / "a.ckpt")
    assert header["redraw"] == "release-2024-02.parquet" and pending == b""  # no rows
    assert not (tmp_path / "a" / "release-2024-02.parquet").exists()
    assert main(argv("a")) == 2  # drawn by the workers: only a --dask run resumes it
    assert main(argv("a", "--dask", scheduler)) == 0
    assert files(tmp_path / "a") == ref

    killed = cli(*argv("b", "--dask", scheduler), env={"DPSTREAM_FAULT": "after-write:1"})
    assert killed.returncode == 137, killed.stderr
    kept = tmp_path / "b" / "release-2024-02.parquet" / "part-00000.parquet"
    stamp = kept.stat().st_mtime_ns
    unfinished = tmp_path / "b" / ".release-2024-03.parquet.tmp"
    unfinished.mkdir()
    (unfinished / "part-00000.parquet").write_bytes(b"half")
    assert main(argv("b", "--dask", scheduler)) == 0
    assert kept.stat().st_mtime_ns == stamp and not unfinished.exists()
    assert files(tmp_path / "b") == ref
