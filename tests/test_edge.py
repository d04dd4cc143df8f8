"""The Rust-only edge program (rust/core/examples/privhp_edge.rs): CSV points on stdin in
fixed memory, an ε-DP generator written to a file that Python loads."""

from __future__ import annotations

import subprocess
from fractions import Fraction
from pathlib import Path

import dpstream
import numpy as np
import pytest
from conftest import example_binary
from dpstream import PrivHP, Rng, TreeGenerator

N_POINTS = 5000
ARGS = ["--epsilon", "1", "--dim", "2", "--memory-bytes", "200000", "--expected-n", "5000"]


@pytest.fixture(scope="module")
def edge_binary() -> Path:
    return example_binary("privhp_edge")


@pytest.fixture(scope="module")
def points() -> np.ndarray:
    return np.random.default_rng(31).random((N_POINTS, 2))


def to_csv(rows: np.ndarray | list) -> str:
    """Shortest round-trip decimal of each float64, so Rust parses the same numbers."""
    return "".join(",".join(repr(float(v)) for v in row) + "\n" for row in rows)


def run(binary: Path, stdin: str, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(binary), *ARGS, "--out", str(out), *extra],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_edge_release_loads_in_python(
    edge_binary: Path, points: np.ndarray, tmp_path: Path
) -> None:
    out = tmp_path / "gen.dpst"
    result = run(edge_binary, to_csv(points), out, "--seed", "7")
    assert result.returncode == 0, result.stderr
    assert f"{N_POINTS} points" in result.stderr
    assert "NOT PRIVATE" in result.stderr, "a seeded run must say it is not private"
    assert not (tmp_path / "gen.dpst.tmp").exists()
    # The file records the seeded noise: loading it needs the opt-in.
    with pytest.raises(ValueError, match="seeded TreeGenerator"):
        dpstream.load(out)
    g = dpstream.load(out, allow_seeded=True)
    assert isinstance(g, TreeGenerator)
    assert g.noise_seeded
    assert g.dim == 2
    s = g.sample(5000, rng=Rng(seed=1))
    assert s.shape == (5000, 2) and ((s >= 0) & (s <= 1)).all()
    # The same public configuration in Python gives the root's noise scale 1/σ_0.
    cfg = PrivHP.for_memory(1, 2, N_POINTS, 200_000)
    scale = 1 / float(cfg.sigmas[0])
    assert abs(g.total - N_POINTS) <= 20 * scale, (g.total, scale)
    _, _, counts = g.cells()
    assert (counts >= 0).all() and abs(counts.sum() - g.total) <= 1e-9 * max(g.total, 1)


def test_same_seed_same_bytes_and_same_as_python(
    edge_binary: Path, points: np.ndarray, tmp_path: Path
) -> None:
    csv = to_csv(points)
    first, second, other = tmp_path / "a.dpst", tmp_path / "b.dpst", tmp_path / "c.dpst"
    for out, seed in ((first, "7"), (second, "7"), (other, "8")):
        result = run(edge_binary, csv, out, "--seed", seed)
        assert result.returncode == 0, result.stderr
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes() != other.read_bytes()
    # Cross-language: Rust's seed 7 is Python's Rng(seed=7) (the low 8 bytes of the key),
    # used for the hash keys and then the noise, exactly as the program does.
    rng = Rng(seed=7)
    p = PrivHP.for_memory(Fraction(1), 2, N_POINTS, 200_000, rng=rng)
    p.update(points)
    assert p.release(rng=rng).to_bytes() == first.read_bytes()


def test_unseeded_runs_differ(edge_binary: Path, points: np.ndarray, tmp_path: Path) -> None:
    csv = to_csv(points[:500])
    a, b = tmp_path / "a.dpst", tmp_path / "b.dpst"
    for out in (a, b):
        result = run(edge_binary, csv, out)
        assert result.returncode == 0, result.stderr
        assert "NOT PRIVATE" not in result.stderr
    assert a.read_bytes() != b.read_bytes()
    # Rust records the unseeded noise: Python loads the file without the opt-in.
    assert not dpstream.load(a).noise_seeded


GOOD = ["0.1,0.2", "0.3,0.4"]
TAIL = ["0.5,0.5", "0.6,0.6", "0.7,0.7", "0.8,0.8", "0.9,0.9"]


def run_with_line(
    binary: Path, tmp_path: Path, line: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The binary, seeded, on GOOD, then ``line`` (line 3), then TAIL; and its output path."""
    out = tmp_path / "gen.dpst"
    return run(binary, "\n".join([*GOOD, line, *TAIL]) + "\n", out, "--seed", "1"), out


@pytest.mark.parametrize(
    ("bad_line", "detail"),
    [
        ("0.1,0.2,0.3", "more than 2 values"),
        ("0.1", "fewer than 2 values"),
        ("abc,0.2", '"abc" is not a number'),
        ("0.1,", "is not a number"),
    ],
    ids=["three-values", "one-value", "non-number", "empty-field"],
)
def test_bad_lines_are_named(edge_binary: Path, tmp_path: Path, bad_line: str, detail: str) -> None:
    result, out = run_with_line(edge_binary, tmp_path, bad_line)
    assert result.returncode == 2, result.stderr
    assert "line 3" in result.stderr, result.stderr
    assert detail in result.stderr, result.stderr
    assert not out.exists(), "a failed run left an output file"


@pytest.mark.parametrize("bad_value", ["1.5", "-0.25", "nan", "inf"])
def test_out_of_range_values_fail_with_status_2(
    edge_binary: Path, tmp_path: Path, bad_value: str
) -> None:
    result, out = run_with_line(edge_binary, tmp_path, f"0.5,{bad_value}")
    assert result.returncode == 2, result.stderr
    assert "outside [0, 1]" in result.stderr or "NaN" in result.stderr, result.stderr
    assert not out.exists()


@pytest.mark.parametrize("bad_value", ["1.5", "nan"])
def test_out_of_range_values_name_their_line(
    edge_binary: Path, tmp_path: Path, bad_value: str
) -> None:
    result, _ = run_with_line(edge_binary, tmp_path, f"0.5,{bad_value}")
    assert result.returncode == 2
    assert "line 3" in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dim", "2", "--out", "x"], "--epsilon is required"),
        (["--epsilon", "0", "--dim", "2", "--out", "x", "--k", "2"], "epsilon"),
        (["--epsilon", "1", "--dim", "2", "--out", "x"], "--memory-bytes"),
        (["--epsilon", "1", "--dim", "two", "--out", "x"], "--dim must be a whole number"),
        (
            ["--epsilon", "1", "--dim", "2", "--out", "x", "--memory-bytes", "10"],
            "--expected-n",
        ),
        (["--epsilon", "1", "--dim", "2", "--out", "x", "--sketch", "cms"], "--sketch"),
        (["--epsilon"], "--epsilon needs a value"),
        (["stray"], "unexpected argument stray"),
    ],
)
def test_bad_arguments_fail_with_status_2(
    edge_binary: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    result = subprocess.run(
        [str(edge_binary), *args],
        input="0.5,0.5\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert message in result.stderr, result.stderr
    assert not (tmp_path / "x").exists()
