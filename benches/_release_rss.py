"""The release part of ``bench_distributed.py`` (``--release-rss N``): the client's peak
resident memory across one ``TabularStream.step`` of an ``N``-row Dask batch, its release
drawn on the workers or on the client; and across an ``N``-point online release.

Each case runs in a fresh client process (``python benches/_release_rss.py``) connected to
the same 2-worker ``LocalCluster``: the batch (8 columns, partitions of ``CHUNK`` rows made
inside the counting tasks, as in ``_distributed_streams``) is counted on the cluster in
both; then

* ``dask``: ``step(ddf)`` returns the release as a Dask DataFrame, written by the workers
  with ``to_parquet`` (one file per chunk of 2^20 rows);
* ``client``: ``step(batch_marginals(ddf))`` draws the release on the client (the pandas
  DataFrame of ``N`` rows ``step`` returns);
* ``online-dask`` / ``online-client``: the default ``OnlineSynthesizer`` (d = 2, fitted to
  10^5 uniform points) releases ``N`` points with ``release_dask(N)`` (blocks written by the
  workers with ``dask.array.to_npy_stack``) or ``release(N)`` (an array on the client).

The figure is the process's peak RSS (``ru_maxrss``, a lifetime peak: the imports and the
connection come before the baseline and are below it) minus its RSS just before the step.
Afterwards (not measured) each case hashes its release in row order: the two cases of a
release must be equal, byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

CHUNK = 10**6
#: The cases, in pairs (workers, client) whose releases must be equal.
CASES = (("dask", "client"), ("online-dask", "online-client"))


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _digest(codes: Any) -> str:
    return hashlib.sha256(np.ascontiguousarray(codes, dtype="<i8").tobytes()).hexdigest()[:16]


def _child(address: str, n: int, case: str, out: Path) -> dict[str, Any]:
    """One case in this (fresh) process: the peak RSS increase across the step."""
    import pandas as pd
    from _distributed_streams import DOMAIN, SEED, WORKLOADS, table_frame
    from dask.distributed import Client
    from dpstream import Rng, distributed
    from dpstream.tabular import TabularStream

    with Client(address):
        if case.startswith("online"):
            return _online_child(n, case, out)
        stream = TabularStream(DOMAIN, 1, workloads=WORKLOADS, rng=Rng(seed=SEED))
        batch = table_frame(n, CHUNK)
        before = _rss()
        t0 = time.perf_counter()
        if case == "dask":
            stream.step(batch).to_parquet(out, write_index=True)
        else:
            release = stream.step(distributed.batch_marginals(batch, DOMAIN, WORKLOADS))
        seconds = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
        if case == "dask":
            release = pd.read_parquet(out).sort_index()
        rows = len(release)
        digest = _digest(DOMAIN.encode(release))
    return {"case": case, "rows": rows, "increase": peak - before, "seconds": seconds,
            "before": before, "digest": digest}  # fmt: skip


def _online_child(n: int, case: str, out: Path) -> dict[str, Any]:
    """An online case (in :func:`_child`'s client): the peak RSS increase across the
    release of ``n`` points."""
    import dask.array as da
    from _distributed_streams import SEED
    from dpstream import OnlineSynthesizer, Rng

    synth = OnlineSynthesizer(1, 2, rng=Rng(seed=SEED))
    synth.update(np.random.default_rng(SEED).random((10**5, 2)))
    before = _rss()
    t0 = time.perf_counter()
    if case == "online-dask":
        da.to_npy_stack(out, synth.release_dask(n))
    else:
        points = synth.release(n)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    if case == "online-dask":
        points = da.from_npy_stack(out).compute()
    return {"case": case, "rows": len(points), "increase": peak - before, "seconds": seconds,
            "before": before, "digest": _digest(points.view("<i8"))}  # fmt: skip


def measure(address: str, n: int) -> list[dict[str, Any]]:
    """Every case, each in its own client process, on the cluster at ``address``."""
    here = Path(__file__).resolve()
    results = []
    for case in [c for pair in CASES for c in pair]:
        with tempfile.TemporaryDirectory(prefix="release_rss_") as tmp:
            done = subprocess.run(
                [sys.executable, str(here), address, str(n), case, str(Path(tmp) / "release")],
                capture_output=True, text=True, check=False,
                env={**os.environ, "PYTHONPATH": os.pathsep.join([str(here.parent), *sys.path])},
            )  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"release RSS, case {case}: {done.stderr}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    for i in range(0, len(results), 2):
        if results[i]["digest"] != results[i + 1]["digest"]:
            raise SystemExit(f"release RSS: the workers' {results[i]['case']} release differs")
    return results


def render(n: int, results: list[dict[str, Any]]) -> str:
    lines = [
        f"Client peak RSS across one `TabularStream.step` of a {n:,}-row Dask batch, and "
        f"across an online release of {n:,} points (2-worker LocalCluster; each pair of "
        "releases equal byte for byte):",
        "",
        "| release | rows | peak RSS increase | time |",
        "|---|---:|---:|---:|",
    ]
    labels = {
        "dask": "table: drawn and written (Parquet) by the workers",
        "client": "table: on the client",
        "online-dask": "online (d = 2): `release_dask`, written (npy) by the workers",
        "online-client": "online (d = 2): `release` on the client",
    }
    for r in results:
        lines.append(
            f"| {labels[r['case']]} | {r['rows']:,} | {r['increase'] / 2**20:,.0f} MiB | "
            f"{r['seconds']:.1f} s |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("n", type=int)
    parser.add_argument("case", choices=[c for pair in CASES for c in pair])
    parser.add_argument("out", type=Path)
    a = parser.parse_args()
    print(json.dumps(_child(a.address, a.n, a.case, a.out)))
