"""Issue 30: ``dpstream points`` and ``dpstream table`` on Parquet directories, read
partition by partition, with ``--dask local:2`` or Dask's local scheduler: the same
release files, byte for byte, as a pandas run over one file (same seed); checkpoints
resume across a kill; an unreachable scheduler and bad records are one-line errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from dpstream.cli import main
from dpstream.cli.cluster import local_cluster
from test_cli import run as cli

pytest.importorskip("dask.dataframe")
pytest.importorskip("dask.distributed")
pytest.importorskip("pyarrow")

POINTS = ["--columns", "x,y", "--bounds", "0,10,-5,15", "--epsilon", "1", "--quiet"]
MONTHS = ["--time-column", "when", "--release-every", "month", "--start", "2024-01"]


def frame(n: int, seed: int) -> pd.DataFrame:
    g = np.random.default_rng(seed)
    when = pd.Timestamp("2024-01-01") + pd.to_timedelta(g.integers(0, 90 * 86400, n), unit="s")
    return pd.DataFrame(
        {
            "when": when,
            "x": g.random(n) * 10,
            "y": g.normal(5, 2, n),
            "a": g.choice(3, n, p=[0.6, 0.3, 0.1]),
            "b": g.choice(["u", "v"], n),
            "c": g.integers(0, 4, n),
        }
    )


def write_dir(data: pd.DataFrame, directory: Path, parts: int, first: int = 0) -> None:
    directory.mkdir(exist_ok=True)
    for i, rows in enumerate(np.array_split(np.arange(len(data)), parts)):
        data.iloc[rows].to_parquet(directory / f"part-{first + i:03d}.parquet", index=False)


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path, Path]:
    data = frame(12_000, 1)
    data.to_parquet(tmp_path / "one.parquet", index=False)
    write_dir(data, tmp_path / "dir", 4)
    domain = tmp_path / "domain.json"
    domain.write_text(json.dumps({"a": 3, "b": ["u", "v"], "c": 4}))
    return tmp_path / "one.parquet", tmp_path / "dir", domain


def same_files(a: Path, b: Path) -> list[str]:
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir()) and names
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    return names


def reads() -> Any:
    """A Dask callback counting the Parquet partition reads of the local scheduler."""
    from dask.callbacks import Callback

    class Reads(Callback):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.n = 0

        def _pretask(self, key: object, dsk: object, state: object) -> None:
            name = key[0] if isinstance(key, tuple) else key
            self.n += str(name).startswith("read_parquet")

    return Reads()


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """The address of the 2-worker cluster ``--dask local:2`` starts: worker processes,
    the workers' statistical profiler off (:func:`dpstream.cli.cluster.local_cluster`).

    Not in-process workers (``processes=False``): their tasks would run in pytest's
    process, and each worker's profiler, a periodic callback on the event-loop thread,
    walks the frames of the threads running tasks (``sys._current_frames()``, every
    10 ms), which CPython 3.11 does not make memory safe (dask/distributed#8163, #8916):
    a segmentation fault there ends the whole test session. In worker processes a crash
    would end one worker (its nanny starts another), not pytest."""
    with local_cluster(2) as cluster:
        yield str(cluster.scheduler_address)


@pytest.mark.slow
def test_cluster_runs_equal_one_process_byte_for_byte(
    inputs: tuple[Path, Path, Path], tmp_path: Path, scheduler: str
) -> None:
    one, directory, domain = inputs
    months = [*MONTHS, "--end", "2024-03", "--seed", "3"]
    table = ["table", "--domain", str(domain), "--epsilon", "1", "--quiet", *months]
    cases = {
        "online": ["points", *POINTS, *months, "--evaluate", "EVAL"],
        "fixed": ["points", *POINTS, *months, "--memory", "2000000", "--expected-n", "50000"],
        "table": [*table, "--evaluate", "EVAL"],
    }
    for name, argv in cases.items():

        def run(src: Path, out: str, *extra: str, argv: list[str] = argv) -> int:
            args = [a.replace("EVAL", str(tmp_path / f"{out}-eval")) for a in argv]
            return main([*args, "--input", str(src), "--out", str(tmp_path / out), *extra])

        assert run(one, f"{name}-pandas") == 0
        assert run(directory, f"{name}-dask", "--dask", scheduler) == 0
        names = same_files(tmp_path / f"{name}-pandas", tmp_path / f"{name}-dask")
        assert names == [f"release-2024-0{m}.csv" for m in (1, 2, 3)]
        if name == "table":  # evaluated from exact marginals counted on the cluster
            same_files(tmp_path / f"{name}-pandas-eval", tmp_path / f"{name}-dask-eval")
        if name == "online":  # from a sample drawn on the workers (here: every point)
            metrics = pd.read_csv(tmp_path / f"{name}-dask-eval" / "NOT-PRIVATE-metrics.csv")
            assert list(metrics["real_rows"]) == list(
                pd.read_csv(tmp_path / f"{name}-pandas-eval" / "NOT-PRIVATE-metrics.csv")[
                    "real_rows"
                ]
            )
            assert metrics["w1"].between(0, 0.2).all()


@pytest.mark.slow
def test_checkpoints_resume_and_continue_on_a_parquet_directory(
    inputs: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Killed after a checkpoint, resumed (with or without --dask: the digests are the
    partitions'), then continued with an appended file: the releases of an
    uninterrupted run over the grown input, byte for byte."""
    _, directory, domain = inputs

    def argv(out: str, ckpt: str) -> list[str]:
        return [
            "table", "--input", str(directory), "--domain", str(domain), "--epsilon", "1",
            "--batch-size", "2500", "--seed", "5", "--quiet", "--out", str(tmp_path / out),
            "--checkpoint", str(tmp_path / ckpt),
        ]  # fmt: skip

    fault = {"DPSTREAM_FAULT": "after-checkpoint:1"}
    killed = cli(*argv("out", "out.ckpt"), "--dask", "local:2", env=fault)
    assert killed.returncode == 137, killed.stderr
    assert main(argv("out", "out.ckpt")) == 0  # resumed on the local scheduler
    assert main(argv("ref", "ref.ckpt")) == 0  # uninterrupted
    assert len(same_files(tmp_path / "out", tmp_path / "ref")) == 5  # 12,000 rows / 2,500
    write_dir(frame(3000, 2), directory, 1, first=10)  # a new file: the stream goes on
    assert main(argv("out", "out.ckpt")) == 0
    assert main(argv("ref", "ref.ckpt")) == 0
    assert len(same_files(tmp_path / "out", tmp_path / "ref")) == 7  # + 2,500 + 500
    # A changed consumed row is refused before anything is written.
    data = pd.read_parquet(directory / "part-000.parquet")
    data.loc[5, "c"] = (data.loc[5, "c"] + 1) % 4
    data.to_parquet(directory / "part-000.parquet", index=False)
    assert main(argv("out", "out.ckpt")) == 2


def test_errors_are_one_line_with_exit_2(
    inputs: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, directory, domain = inputs
    bad = frame(500, 3)
    bad.loc[321, "c"] = 9
    write_dir(bad, directory, 1, first=20)
    table = [
        "table",
        "--input",
        str(directory),
        "--domain",
        str(domain),
        "--epsilon",
        "1",
        "--quiet",
    ]
    cases = [
        ([*table, "--batch-size", "5000", "--out", str(tmp_path / "t")], "column 'c' has code 9"),
        (
            [
                "points",
                "--input",
                str(directory),
                *POINTS,
                "--batch-size",
                "9",
                "--out",
                str(tmp_path / "p"),
                "--method",
                "online-paper",
            ],
            "online-paper tests every time step in order",
        ),
        (
            [
                "points",
                "--input",
                str(directory),
                *POINTS,
                *MONTHS[:2],
                "--start",
                "1",
                "--end",
                "3",
                "--out",
                str(tmp_path / "q"),
            ],
            "without --release-every must hold integer steps",
        ),
        (
            [
                *table,
                "--batch-size",
                "5",
                "--out",
                str(tmp_path / "u"),
                "--dask",
                "tcp://127.0.0.1:9",
            ],
            "--dask: cannot reach the scheduler at 'tcp://127.0.0.1:9'",
        ),
    ]
    booleans = frame(500, 4).assign(c=lambda f: f["c"] > 1)  # the domain has codes 0..3
    write_dir(booleans, tmp_path / "bool", 2)
    booleans.to_csv(tmp_path / "bool.csv", index=False)
    for src in ("bool", "bool.csv"):  # partitioned and pandas: the same one line
        argv = [*table, "--batch-size", "100", "--out", str(tmp_path / "b")]
        argv[2] = str(tmp_path / src)
        cases.append((argv, "column 'c' must hold integer codes, got bool"))
    for argv, message in cases:
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


@pytest.mark.slow
def test_a_single_file_checkpoint_resumes_on_a_parquet_directory(
    inputs: tuple[Path, Path, Path], tmp_path: Path, scheduler: str
) -> None:
    """A batch's digest is a multiset hash of its rows (``dpstream._digest``), the same
    for one file and for a directory of the same rows: a pandas run's checkpoint
    resumes on the directory (with and without --dask) and a directory run's on the
    file, and the releases are those of an uninterrupted run."""
    one, directory, domain = inputs
    table = ["table", "--domain", str(domain), "--epsilon", "1", "--seed", "5", "--quiet"]

    def run(src: Path, out: str, *extra: str) -> int:
        ckpt = ["--checkpoint", str(tmp_path / f"{out}.ckpt")]
        return main([*table, *extra, "--input", str(src), "--out", str(tmp_path / out), *ckpt])

    months = [*MONTHS, "--end"]
    assert run(one, "a", *months, "2024-01") == 0  # pandas, one file
    assert run(directory, "a", *months, "2024-02", "--dask", scheduler) == 0  # cluster
    assert run(one, "a", *months, "2024-03") == 0  # back to pandas
    assert run(one, "ref", *months, "2024-03") == 0
    assert len(same_files(tmp_path / "a", tmp_path / "ref")) == 3
    # Batches of rows: the file holds the first three parts' rows, the directory all.
    first = pd.concat([pd.read_parquet(p) for p in sorted(directory.iterdir())[:3]])
    first.to_parquet(tmp_path / "first.parquet", index=False)
    rows = ["--batch-size", "2500"]
    assert run(tmp_path / "first.parquet", "b", *rows) == 0  # 2500, 2500, 2500, 1500
    assert run(directory, "b", *rows) == 0  # resumed on the local scheduler: + 2500, 500
    assert run(tmp_path / "first.parquet", "ref2", *rows) == 0
    assert run(one, "ref2", *rows) == 0
    assert len(same_files(tmp_path / "b", tmp_path / "ref2")) == 6


def test_each_partition_is_read_once_per_batch(
    inputs: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """A batch's counts, row count and digest are computed in one pass: with monthly
    batches over 4 files (rows of every month in every file), 3 × 4 partition reads,
    whatever the model (before, the digest's pass read every partition again)."""
    _, directory, domain = inputs

    months = [*MONTHS, "--end", "2024-03", "--seed", "1", "--input", str(directory)]
    cases = {
        "table": ["table", "--domain", str(domain), "--epsilon", "1", "--quiet"],
        "online": ["points", *POINTS],
        "fixed": ["points", *POINTS, "--memory", "2000000", "--expected-n", "50000"],
    }
    for name, argv in cases.items():
        with reads() as seen:
            assert main([*argv, *months, "--out", str(tmp_path / name)]) == 0
        assert seen.n == 3 * 4, name


def test_batch_sizes_on_a_parquet_directory_take_the_lengths_from_the_footers(
    inputs: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--batch-size`` cuts the batches from the partitions' lengths: Dask has them from
    the Parquet footers, so no partition is read for them. 4 files of 3,000 rows in
    batches of 3,000 rows: 4 partition reads in all (one per batch), not 4 more for the
    lengths; the releases are those of the same run where the lengths are counted."""
    import dpstream.cli.parquet_input as partitioned

    _, directory, domain = inputs

    argv = ["table", "--domain", str(domain), "--epsilon", "1", "--quiet", "--seed", "1"]
    argv += ["--batch-size", "3000", "--input", str(directory)]
    with reads() as seen:
        assert main([*argv, "--out", str(tmp_path / "footers")]) == 0
    assert seen.n == 4

    def counted(frame: object, parts: list[object]) -> list[int]:  # the pass before
        import dask

        return [int(n) for n in dask.compute(*[dask.delayed(len)(p) for p in parts])]

    monkeypatch.setattr(partitioned, "partition_lengths", counted)
    with reads() as seen:
        assert main([*argv, "--out", str(tmp_path / "counted")]) == 0
    assert seen.n == 4 + 4
    assert len(same_files(tmp_path / "footers", tmp_path / "counted")) >= 4


def test_local_cluster_workers_get_their_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--dask local:N`` starts its workers with ``LOCAL_CLUSTER_CONFIG`` (the allocator's
    thresholds in their environment, the statistical profiler off) and leaves the client's
    own Dask settings and environment as they were, even when the client's environment
    holds another value (what an earlier cluster with Dask's defaults leaves there)."""
    import os

    import dask
    import dask.distributed as dist
    from dpstream.cli.cluster import LOCAL_CLUSTER_CONFIG

    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    key = "distributed.worker.profile.enabled"
    assert LOCAL_CLUSTER_CONFIG[key] is False
    before = dask.config.get(key)
    with local_cluster(1) as cluster, dist.Client(cluster, set_as_default=False) as client:
        assert list(client.run(dask.config.get, key).values()) == [False]
        env = next(iter(client.run(lambda: dict(os.environ)).values()))
        assert env["MALLOC_MMAP_THRESHOLD_"] == str(32 << 20)
        assert env["MALLOC_TRIM_THRESHOLD_"] == str(256 << 20)
        assert cluster.scheduler.WORKER_SATURATION == 1.0
        assert os.environ["MALLOC_TRIM_THRESHOLD_"] == "65536"
        assert "MALLOC_MMAP_THRESHOLD_" not in os.environ
    assert dask.config.get(key) == before
