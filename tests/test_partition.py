"""Cross-language property tests of the binary partition of ``[0,1]^d`` (PrivHP, issue 3).

A short pure-Python REFERENCE (exact integers and :class:`fractions.Fraction`, no numpy
arithmetic) of

* path encoding: level ``l -> l+1`` cuts coordinate ``l mod d`` through the middle of the
  current cell; a level-``l`` cell is an ``l``-bit integer whose most significant bit is
  the first cut; bit ``k`` of coordinate ``x`` is ``floor(x * 2**k) mod 2``, and ``x = 1``
  lies in the top cell;
* the corners of a cell ``(theta, level, dim)``;
* consistency, Algorithm 4 of PrivHP (``/work/shared/papers/private-synthetic-data-small-
  memory.md`` §5.4): clamp negative children to 0, ``Λ = left + right - parent``, subtract
  ``Λ/2`` from each child, with the two "correction 2" branches; for integer counts the
  left child takes the larger-magnitude half of an odd ``Λ``,

checked against :func:`dpstream.partition.encode`, :func:`~dpstream.partition.cell_bounds`
and :func:`~dpstream.partition.enforce_consistency` (the Rust core) on generated inputs.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from dpstream import partition
from hypothesis import example, given
from hypothesis import strategies as st

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# ---------------------------------------------------------------------------------------
# Reference implementation
# ---------------------------------------------------------------------------------------


def ref_bit(x: float, k: int) -> int:
    """Bit ``k >= 1`` of coordinate ``x``: ``floor(x * 2**k) mod 2``; ``x = 1`` is all ones."""
    if x == 1.0:
        return 1
    return math.floor(Fraction(x) * 2**k) % 2


def ref_encode(point: list[float], depth: int) -> int:
    """The level-``depth`` path of ``point``: cut ``c`` takes the next bit of ``c mod d``."""
    d = len(point)
    theta = 0
    for c in range(depth):
        theta = (theta << 1) | ref_bit(point[c % d], c // d + 1)
    return theta


def ref_cuts(level: int, dim: int) -> list[int]:
    """How often each coordinate has been cut after ``level`` levels."""
    cuts = [0] * dim
    for c in range(level):
        cuts[c % dim] += 1
    return cuts


def ref_bounds(theta: int, level: int, dim: int) -> tuple[list[Fraction], list[Fraction]]:
    """Exact lower and upper corners of cell ``theta`` at ``level``."""
    q = [0] * dim
    for c in range(level):
        bit = (theta >> (level - 1 - c)) & 1
        q[c % dim] = 2 * q[c % dim] + bit
    k = ref_cuts(level, dim)
    lower = [Fraction(q[j], 2 ** k[j]) for j in range(dim)]
    upper = [Fraction(q[j] + 1, 2 ** k[j]) for j in range(dim)]
    return lower, upper


def ref_consistency(
    parent: Fraction | int, left: Fraction | int, right: Fraction | int, *, integer: bool
):
    """Algorithm 4 in exact arithmetic. The parent should be consistent (>= 0); a negative
    parent is treated as 0, as the core documents."""
    p = max(parent, 0)
    n0, n1 = max(left, 0), max(right, 0)  # correction 1
    lam = n0 + n1 - p
    if integer:
        b = abs(lam) // 2 * (1 if lam >= 0 else -1)  # truncation toward zero
        a = lam - b  # the left child takes the larger-magnitude half
    else:
        a = b = Fraction(lam) / 2
    if n0 - a < 0:  # correction 2 (left)
        return 0, p
    if n1 - b < 0:  # correction 2 (right)
        return p, 0
    return n0 - a, n1 - b


def sign(x: Fraction | int) -> int:
    return (x > 0) - (x < 0)


# ---------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------

SPECIAL_COORDS = [0.0, 1.0, 0.5, 0.25, 0.75, 1 - 2**-53, 2**-63, 2**-1074, 0.1, 1 / 3]


@st.composite
def dyadic(draw: st.DrawFn) -> float:
    """``k / 2**m`` (a cut boundary), or the float just below or above it."""
    m = draw(st.integers(0, 62))
    k = draw(st.integers(0, 2**m))
    x = k / 2**m
    nudge = draw(st.sampled_from([0, -1, 1]))
    if nudge:
        x = float(np.nextafter(x, 1.0 if nudge > 0 else 0.0))
    return min(max(x, 0.0), 1.0)


coords = st.one_of(
    st.floats(0.0, 1.0),
    dyadic(),
    st.sampled_from(SPECIAL_COORDS),
    st.floats(0.0, 1e-12),
)


@st.composite
def point_batches(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    dim = draw(st.sampled_from([1, 1, 2, 2, 3, 4, 5, 7, 13, 64]))
    n = draw(st.integers(1, 12))
    rows = [[draw(coords) for _ in range(dim)] for _ in range(n)]
    depth = draw(st.integers(0, 63))
    return np.array(rows, dtype=np.float64).reshape(n, dim), depth


# ---------------------------------------------------------------------------------------
# Path encoding and cells
# ---------------------------------------------------------------------------------------


@given(point_batches())
@example((np.array([[0.75, 0.25]]), 3))  # 0b101: upper x0, lower x1, upper quarter of x0
@example((np.array([[1.0, 1.0, 1.0]]), 63))
@example((np.array([[0.5 - 2**-53]]), 63))
def test_encode_matches_reference(batch: tuple[np.ndarray, int]) -> None:
    points, depth = batch
    got = partition.encode(points, depth)
    assert got.dtype == np.uint64 and got.shape == (len(points),)
    want = [ref_encode([float(x) for x in row], depth) for row in points]
    assert [int(t) for t in got] == want
    # The level-l prefix of a path is the level-l path.
    for level in sorted({0, depth // 2, max(depth - 1, 0)}):
        prefix = partition.encode(points, level)
        assert [int(t) for t in prefix] == [w >> (depth - level) for w in want]


def test_encode_small_examples() -> None:
    pts = np.array([[0.75, 0.25], [1.0, 1.0], [0.0, 0.0], [0.5, 0.5]])
    assert partition.encode(pts, 3).tolist() == [0b101, 0b111, 0, 0b110]
    # A 1-D input is n points of dimension 1.
    assert partition.encode([0.5, 0.25, 1.0], 3).tolist() == [0b100, 0b010, 0b111]
    assert partition.encode(np.zeros((0, 2)), 5).shape == (0,)
    # Integers and float32 convert exactly.
    assert partition.encode([[1, 0]], 3).tolist() == [0b101]
    assert partition.encode(np.array([[0.75, 0.25]], dtype=np.float32), 3).tolist() == [5]


@st.composite
def cells(draw: st.DrawFn) -> tuple[list[int], int, int]:
    level = draw(st.integers(0, 63))
    dim = draw(st.sampled_from([1, 1, 2, 3, 4, 6, 64]))
    thetas = draw(
        st.lists(
            st.one_of(
                st.integers(0, 2**level - 1),
                st.sampled_from([0, 2**level - 1]),
            ),
            min_size=1,
            max_size=8,
        )
    )
    return thetas, level, dim


@given(cells())
@example(([0b101], 3, 2))
@example(([2**63 - 1, 1, 2**53], 63, 1))  # beyond 53 cuts the corners are rounded
def test_cell_bounds_match_reference(cell: tuple[list[int], int, int]) -> None:
    thetas, level, dim = cell
    lower, upper = partition.cell_bounds(np.array(thetas, dtype=np.uint64), level, dim)
    assert lower.shape == upper.shape == (len(thetas), dim)
    assert lower.dtype == upper.dtype == np.float64
    for i, theta in enumerate(thetas):
        lo, hi = ref_bounds(theta, level, dim)
        # Exact below 2**53 cuts; correctly rounded (float(Fraction)) beyond.
        assert lower[i].tolist() == [float(v) for v in lo], (theta, level, dim)
        assert upper[i].tolist() == [float(v) for v in hi], (theta, level, dim)


def test_cell_bounds_small_examples() -> None:
    lo, hi = partition.cell_bounds([0b101], 3, 2)
    assert lo.tolist() == [[0.75, 0.0]] and hi.tolist() == [[1.0, 0.5]]
    lo, hi = partition.cell_bounds([0], 0, 3)
    assert lo.tolist() == [[0.0] * 3] and hi.tolist() == [[1.0] * 3]
    lo, hi = partition.cell_bounds([], 4, 2)
    assert lo.shape == hi.shape == (0, 2)


@given(point_batches())
def test_every_point_lies_in_its_cell(batch: tuple[np.ndarray, int]) -> None:
    points, depth = batch
    dim = points.shape[1]
    thetas = partition.encode(points, depth)
    lower, upper = partition.cell_bounds(thetas, depth, dim)
    cuts = ref_cuts(depth, dim)
    for i, row in enumerate(points):
        lo_exact, hi_exact = ref_bounds(int(thetas[i]), depth, dim)
        for j, x in enumerate(row.tolist()):
            # Exactly: half-open cells, except that 1.0 lies in the top cell.
            fx = Fraction(x)
            assert lo_exact[j] <= fx, (x, depth, dim)
            assert fx < hi_exact[j] or (x == 1.0 and hi_exact[j] == 1), (x, depth, dim)
            # And in the floating corners the core reports.
            if cuts[j] <= 53:
                assert lower[i, j] <= x < upper[i, j] or (x == 1.0 == upper[i, j])
            else:
                assert lower[i, j] <= x <= upper[i, j]


def test_children_halve_the_parent_along_the_next_coordinate() -> None:
    for dim in (1, 2, 3):
        for level in range(0, 9):
            thetas = np.arange(2**level, dtype=np.uint64)
            plo, phi = partition.cell_bounds(thetas, level, dim)
            alo, ahi = partition.cell_bounds(2 * thetas, level + 1, dim)
            blo, bhi = partition.cell_bounds(2 * thetas + 1, level + 1, dim)
            cut = level % dim
            mid = (plo[:, cut] + phi[:, cut]) / 2
            assert np.array_equal(alo, plo) and np.array_equal(bhi, phi)
            assert np.array_equal(ahi[:, cut], mid) and np.array_equal(blo[:, cut], mid)
            others = [j for j in range(dim) if j != cut]
            assert np.array_equal(ahi[:, others], phi[:, others])
            assert np.array_equal(blo[:, others], plo[:, others])


# ---------------------------------------------------------------------------------------
# Errors of encode / cell_bounds
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("points", "message"),
    [
        ([[0.1, 0.2], [0.3, np.nan]], r"points\[1, 1\] is NaN"),
        ([[0.1, 0.2], [1.5, 0.2]], r"points\[1, 0\] = 1\.5 is outside \[0, 1\]"),
        ([[0.1, -1e-300]], r"points\[0, 1\] = -1e-300 is outside \[0, 1\]"),
        ([[0.1, 0.2], [0.3, 0.4], [np.inf, 0.0]], r"points\[2, 0\] = inf is outside"),
        ([[-np.inf]], r"points\[0, 0\] = -inf is outside"),
        ([[2, 0]], r"points\[0, 0\] = 2\.0 is outside"),
    ],
)
def test_encode_names_the_offending_entry(points: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        partition.encode(np.array(points), 5)


def test_encode_names_an_entry_deep_in_a_long_batch() -> None:
    pts = np.full((3000, 3), 0.5)
    pts[2999, 2] = 1.0 + 2**-52
    with pytest.raises(ValueError, match=r"points\[2999, 2\] = 1\.0000000000000002 is outside"):
        partition.encode(pts, 20)


@pytest.mark.parametrize(
    ("depth", "error", "message"),
    [
        (64, ValueError, "depth"),
        (-1, ValueError, "depth"),
        (2.0, TypeError, "depth"),
        (True, TypeError, "depth"),
        ("3", TypeError, "depth"),
    ],
)
def test_encode_refuses_bad_depths(depth: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        partition.encode([[0.5, 0.5]], depth)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "points",
    [
        np.array([[True, False]]),
        np.array([["0.1", "0.2"]]),
        np.array([[0.5 + 0j, 0.5]]),
        np.array([[0.5, 0.5]], dtype=np.longdouble),
        np.array([[0.5, 0.5]], dtype=object),
    ],
    ids=["bool", "str", "complex", "longdouble", "object"],
)
def test_encode_refuses_wrong_dtypes(points: np.ndarray) -> None:
    if points.dtype == np.longdouble and np.finfo(np.longdouble).bits <= 64:
        pytest.skip("long double is float64 on this platform")
    with pytest.raises(TypeError, match="points"):
        partition.encode(points, 4)


def test_encode_refuses_wrong_shapes() -> None:
    with pytest.raises(ValueError, match="shape"):
        partition.encode(np.zeros((2, 2, 2)), 4)
    with pytest.raises(ValueError, match="dim"):
        partition.encode(np.zeros((3, 0)), 4)


def test_cell_bounds_errors() -> None:
    with pytest.raises(ValueError, match="8"):
        partition.cell_bounds([8], 3, 2)  # 8 needs 4 bits
    with pytest.raises(ValueError, match="thetas must be non-negative"):
        partition.cell_bounds([-1], 3, 2)
    with pytest.raises(TypeError, match="thetas must be integers"):
        partition.cell_bounds([0.5], 3, 2)
    with pytest.raises(ValueError, match="63"):
        partition.cell_bounds([0], 64, 2)
    with pytest.raises(TypeError):
        partition.cell_bounds([0], 3.0, 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dim"):
        partition.cell_bounds([0], 3, 0)
    with pytest.raises(ValueError, match="1-D"):
        partition.cell_bounds([[0]], 3, 2)


@pytest.mark.parametrize("dim", [2.5, -1], ids=["float", "negative"])
def test_cell_bounds_refuses_bad_dims(dim: object) -> None:
    with pytest.raises((TypeError, ValueError), match="dim"):
        partition.cell_bounds([0b101], 3, dim)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# Consistency (Algorithm 4)
# ---------------------------------------------------------------------------------------

int_counts = st.one_of(
    st.integers(-20, 60),
    st.integers(-(10**6), 10**6),
    st.integers(INT64_MIN, INT64_MAX),
    st.sampled_from([0, 1, -1, INT64_MAX, INT64_MIN, INT64_MAX - 1]),
)
int_parents = st.one_of(
    st.integers(0, 60), st.integers(0, INT64_MAX), st.sampled_from([0, 1, INT64_MAX])
)


@given(st.lists(st.tuples(int_parents, int_counts, int_counts), min_size=1, max_size=40))
@example([(10, 3, 7), (10, 2, 2), (11, 3, 3), (10, 12, 1), (4, 0, 10), (4, 10, 0), (7, -5, 3)])
@example([(INT64_MAX, INT64_MAX, INT64_MAX), (INT64_MAX, INT64_MIN, INT64_MIN)])
def test_int_consistency_matches_algorithm_4(triples: list[tuple[int, int, int]]) -> None:
    p, a, b = (np.array(col, dtype=np.int64) for col in zip(*triples, strict=True))
    left, right = partition.enforce_consistency(p, a, b)
    assert left.dtype == right.dtype == np.int64
    for (pp, aa, bb), x, y in zip(triples, left.tolist(), right.tolist(), strict=True):
        assert (x, y) == ref_consistency(pp, aa, bb, integer=True), (pp, aa, bb)
        # Invariants, exactly.
        assert x >= 0 and y >= 0
        assert x + y == pp
        assert sign(x - max(aa, 0)) * sign(y - max(bb, 0)) >= 0, "children moved apart"


def test_int_consistency_corner_cases() -> None:
    cases = {
        (10, 3, 7): (3, 7),  # already consistent
        (10, 2, 2): (5, 5),  # deficit
        (11, 3, 3): (6, 5),  # odd deficit: the left child takes the larger half
        (10, 9, 8): (5, 5),  # odd surplus: Λ = 7 -> (4, 3)
        (10, 12, 1): (10, 0),  # correction 2 (right)
        (4, 1, 20): (0, 4),  # correction 2 (left)
        (10, -5, -7): (5, 5),  # correction 1 then deficit
        (0, 5, 9): (0, 0),
    }
    p, a, b = (np.array(col) for col in zip(*cases, strict=True))
    left, right = partition.enforce_consistency(p, a, b)
    assert list(zip(left.tolist(), right.tolist(), strict=True)) == list(cases.values())
    # A negative parent is treated as 0 (the core documents it).
    assert [v.tolist() for v in partition.enforce_consistency([-3], [5], [9])] == [[0], [0]]
    # Scalars and 2-D input are flattened.
    assert [v.tolist() for v in partition.enforce_consistency(5, 1, 1)] == [[3], [2]]


def ulp(x: float) -> float:
    return math.ulp(abs(x))


float_counts = st.one_of(
    st.floats(-50.0, 200.0),
    st.integers(-20, 80).map(float),
    st.floats(-1e12, 1e12),
    st.floats(0.0, 1e-300),
    st.sampled_from([0.0, -0.0, 0.5, 1.0, 2**-1074, 4.6, 3.5, 3.7]),
)
float_parents = st.one_of(
    st.floats(0.0, 200.0),
    st.integers(0, 80).map(float),
    st.floats(0.0, 1e12),
    st.sampled_from([0.0, 1.0, 4.6, 2**-1074]),
)


@st.composite
def float_triples(draw: st.DrawFn) -> tuple[float, float, float]:
    p = draw(float_parents)
    a = draw(float_counts)
    shape = draw(st.sampled_from(["free", "consistent", "nearly"]))
    if shape == "free":
        b = draw(float_counts)
    elif shape == "consistent":
        b = p - a  # consistent up to one rounding
    else:
        b = p - a + draw(st.floats(-1e-9, 1e-9)) * max(p, 1.0)
    return p, a, b


def check_float_invariants(p: float, a: float, b: float, x: float, y: float) -> None:
    """Exact invariants: the children add up to the parent (in floats AND exactly), are
    non-negative, and moved in the same direction from their clamped inputs."""
    assert x >= 0 and y >= 0, (p, a, b, x, y)
    assert x + y == p, (p, a, b, x, y)
    assert Fraction(x) + Fraction(y) == Fraction(p), (p, a, b, x, y)
    moved = sign(Fraction(x) - Fraction(max(a, 0.0))) * sign(Fraction(y) - Fraction(max(b, 0.0)))
    assert moved >= 0, f"children moved apart: {(p, a, b)} -> {(x, y)}"


@given(st.lists(float_triples(), min_size=1, max_size=30))
@example([(4.6, 3.5, 3.7), (4.0, 0.0, 10.0), (4.0, 10.0, 0.0), (6.0, -1.0, 2.0)])
def test_float_consistency_matches_algorithm_4(triples: list[tuple[float, float, float]]) -> None:
    """Against the exact rule, within a few ulps of the largest input magnitude (see
    test_float_consistency_is_within_ulps_of_the_parent for the parent-ulp claim)."""
    p, a, b = (np.array(col, dtype=np.float64) for col in zip(*triples, strict=True))
    left, right = partition.enforce_consistency(p, a, b)
    assert left.dtype == right.dtype == np.float64
    for (pp, aa, bb), x, y in zip(triples, left.tolist(), right.tolist(), strict=True):
        check_float_invariants(pp, aa, bb, x, y)
        ex, ey = ref_consistency(Fraction(pp), Fraction(aa), Fraction(bb), integer=False)
        scale = max(pp, max(aa, 0.0) + max(bb, 0.0))
        tol = 8 * ulp(scale)
        assert abs(Fraction(x) - ex) <= tol and abs(Fraction(y) - ey) <= tol, (
            f"{(pp, aa, bb)} -> {(x, y)}, exact rule gives {(float(ex), float(ey))}"
        )


@given(st.lists(float_triples(), min_size=1, max_size=30))
def test_float_consistency_is_within_ulps_of_the_parent_for_comparable_inputs(
    triples: list[tuple[float, float, float]],
) -> None:
    """When the children are at most twice the parent, the repaired result is within a
    few ulps of the parent of the exact rule."""
    triples = [(p, a, b) for p, a, b in triples if max(a, b, 0.0) <= 2 * p]
    if not triples:
        return
    p, a, b = (np.array(col, dtype=np.float64) for col in zip(*triples, strict=True))
    left, right = partition.enforce_consistency(p, a, b)
    for (pp, aa, bb), x, y in zip(triples, left.tolist(), right.tolist(), strict=True):
        check_float_invariants(pp, aa, bb, x, y)
        ex, ey = ref_consistency(Fraction(pp), Fraction(aa), Fraction(bb), integer=False)
        tol = 8 * ulp(pp)
        assert abs(Fraction(x) - ex) <= tol and abs(Fraction(y) - ey) <= tol, (
            f"{(pp, aa, bb)} -> {(x, y)}, exact rule gives {(float(ex), float(ey))}"
        )


def test_float_consistency_is_within_ulps_of_the_parent() -> None:
    p, a, b = 1.0, 1e12 + 2**-13, 1e12
    left, right = partition.enforce_consistency([p], [a], [b])
    ex, ey = ref_consistency(Fraction(p), Fraction(a), Fraction(b), integer=False)
    assert (float(ex), float(ey)) == (0.50006103515625, 0.49993896484375)
    assert abs(Fraction(left[0]) - ex) <= 8 * ulp(p)
    assert abs(Fraction(right[0]) - ey) <= 8 * ulp(p)


def test_float_consistency_paper_example() -> None:
    # Example 7.1 of the paper: children (3.5, 3.7) under a parent of 4.6 become (2.2, 2.4).
    left, right = partition.enforce_consistency([4.6, 6.0], [3.5, -1.0], [3.7, 2.0])
    assert left[0] + right[0] == 4.6
    assert abs(left[0] - 2.2) < 1e-12 and abs(right[0] - 2.4) < 1e-12
    # Correction 1 clamps -1 to 0, then the deficit of 4 raises both children by 2.
    assert (left[1], right[1]) == (2.0, 4.0)


def test_consistency_errors() -> None:
    with pytest.raises(ValueError, match="same length"):
        partition.enforce_consistency([1, 2], [1], [1])
    with pytest.raises(TypeError, match="left must be numeric"):
        partition.enforce_consistency([1], [True], [1])
    with pytest.raises(TypeError, match="parent must be numeric"):
        partition.enforce_consistency(["1"], [1], [1])
    for bad in (np.nan, np.inf, -np.inf):
        with pytest.raises(ValueError, match="finite"):
            partition.enforce_consistency([1.0], [bad], [1.0])
        with pytest.raises(ValueError, match="finite"):
            partition.enforce_consistency([bad], [1.0], [1.0])


def test_consistency_refuses_or_handles_uint64_beyond_int64() -> None:
    parent = np.array([2**63], dtype=np.uint64)
    one = np.array([1], dtype=np.uint64)
    try:
        left, right = partition.enforce_consistency(parent, one, one)
    except (OverflowError, ValueError):
        return
    assert int(left[0]) + int(right[0]) == 2**63
