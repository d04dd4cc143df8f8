"""benches/diag_privhp_collisions.py: the for_memory audit's runs split by whether the public
hash keys put A and B in one level-8 bucket, through its command line on a tiny run."""

from __future__ import annotations

import re

from conftest import run_bench


def test_command_line_on_a_tiny_run() -> None:
    done = run_bench("diag_privhp_collisions.py", "--runs", "40", "--seed", "7", "--probe", "16")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("## online privhp (for_memory): level-8 pair: pair loss 1.1716")
    share = re.search(r"A and B collide in ([\d.]+)% / ([\d.]+)% of them", out)
    assert share is not None
    rows = [ln.split(" | ") for ln in out.splitlines() if ln.startswith(("| all", "| no col"))]
    assert [(r[0], r[1]) for r in rows] == [
        ("| all", "D >= 3"),
        ("| all", "D <= -3"),
        ("| no collision", "D >= 3"),
        ("| no collision", "D <= -3"),
    ]
    assert rows[0][2] == "40 / 40"
    kept = [int(v) for v in rows[2][2].split(" / ")]
    # The runs without a collision are the others: 40 minus the collision share.
    assert kept == [round(40 * (1 - float(share.group(i)) / 100)) for i in (1, 2)]
    # Dropping runs can only lower the tail counts.
    for whole, part in ((rows[0], rows[2]), (rows[1], rows[3])):
        assert int(part[3]) <= int(whole[3]) and int(part[4]) <= int(whole[4])
    assert "of the shortfall" in out


def test_refuses_nonpositive_runs() -> None:
    done = run_bench("diag_privhp_collisions.py", "--runs", "0")
    assert done.returncode != 0 and "--runs" in done.stderr
