"""``dpstream demo``: both commands on the data dpstream ships, with their evaluation."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path
from typing import Any

from dpstream import streams
from dpstream.cli.lazy import pandas
from dpstream.cli.options import DEFAULTS, UsageError
from dpstream.cli.points import cmd_points
from dpstream.cli.table import cmd_table


def cmd_demo(opts: dict[str, Any]) -> dict[str, Any]:
    """Both commands on shipped data: clustered points, the Adult table, and the cars
    CSV with its schema (numbers, missing values, a release every 3 years).

    ``OUT/data`` holds the inputs, ``OUT/points``, ``OUT/table`` and ``OUT/cars`` the
    releases only, ``OUT/NOT-PRIVATE-evaluation`` the evaluation against the real data.
    A previous demo's output in ``OUT`` is replaced; any other non-empty ``OUT`` is
    refused.
    """
    pd = pandas()
    out = Path(opts["out"])
    data = out / "data"
    evaluation = out / "NOT-PRIVATE-evaluation"
    marker = out / ".dpstream-demo"
    if out.is_dir() and any(out.iterdir()):
        if not marker.exists():
            raise UsageError(f"--out {out} is not empty and not a demo's output: give a new one")
        for sub in ("data", "points", "table", "cars", "NOT-PRIVATE-evaluation"):
            shutil.rmtree(out / sub, ignore_errors=True)  # the previous demo's, replaced
    data.mkdir(parents=True, exist_ok=True)
    marker.touch()
    x = streams.clustered(40_000, 2, seed=3)
    pts = pd.DataFrame({"x": x[:, 0] * 10, "y": x[:, 1] * 10})
    pts.to_csv(data / "points.csv", index=False)
    base = resources.files("dpstream") / "data"
    quiet = bool(opts.get("quiet"))
    p = cmd_points(
        {
            **DEFAULTS,
            "input": data / "points.csv",
            "columns": "x,y",
            "bounds": "0,10,0,10",
            "epsilon": 1,
            "out": out / "points",
            "batch_size": 4000,
            "evaluate": evaluation / "points",
            "plot": True,
            "quiet": quiet,
        }
    )
    adult = pd.read_csv(str(base / "adult.csv"), nrows=4000)
    adult.to_csv(data / "adult.csv", index=False)
    (data / "adult-domain.json").write_text((base / "adult-domain.json").read_text())
    t = cmd_table(
        {
            **DEFAULTS,
            "input": data / "adult.csv",
            "domain": data / "adult-domain.json",
            "batch_size": 400,
            "epsilon": 1,
            "out": out / "table",
            "evaluate": evaluation / "table",
            "plot": True,
            "quiet": quiet,
        }
    )
    for name in ("cars.csv", "cars-schema.json"):
        (data / name).write_bytes((base / name).read_bytes())
    c = cmd_table(
        {
            **DEFAULTS,
            "input": data / "cars.csv",
            "domain": data / "cars-schema.json",
            "time_column": "Year",
            "start": "1970",
            "end": "1981",
            "release_every": "3y",
            "epsilon": 1,
            "out": out / "cars",
            "evaluate": evaluation / "cars",
            "quiet": quiet,
        }
    )
    p["points"] = "40000 clustered points in [0,10]^2, 10 batches of 4000"
    t["rows"] = "4000 Adult rows, 10 batches of 400, 14 columns, all 91 2-way workloads"
    c["rows"] = "406 cars (numbers, missing values), a release every 3 years from 1970 to 1981"
    return {
        "points (online synthesizer, releases after every batch)": p,
        "table (tabular stream)": t,
        "cars (a CSV and its schema, data/cars-schema.json)": c,
        "epsilon spent": "1 for each of the three streams (separate data)",
    }
