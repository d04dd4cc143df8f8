"""Count-min and count sketches (PrivHP, issue 3): a pure-Python reference, merging,
private release, persistence, fixed memory and input validation.

The reference replays updates from the public hash parameters :meth:`hashes` documents:
the bucket of key ``x`` in a row with parameters ``(a, b, sa, sb)`` is
``((((a*x + b) mod 2**128) >> 64) * width) >> 64`` and its count-sketch sign is ``-1`` iff
bit 127 of ``(sa*x + sb) mod 2**128`` is set. Its cells must equal :meth:`cells` exactly
and its min / median estimates must equal :meth:`query` exactly.
"""

from __future__ import annotations

import zlib
from fractions import Fraction
from pathlib import Path

import dpstream
import numpy as np
import pytest
from _helpers import assert_truncations_and_flips_refused
from conftest import assert_integer_distribution, laplace_cdf
from dpstream import Rng
from dpstream.budget import BudgetExceededError
from dpstream.sketch import CountMinSketch, CountSketch
from hypothesis import example, given
from hypothesis import strategies as st

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MASK128 = (1 << 128) - 1
KINDS = [CountMinSketch, CountSketch]

# ---------------------------------------------------------------------------------------
# Reference
# ---------------------------------------------------------------------------------------


def ref_bucket(h: tuple[int, int, int, int], key: int, width: int) -> int:
    a, b, _, _ = h
    return ((((a * key + b) & MASK128) >> 64) * width) >> 64


def ref_sign(h: tuple[int, int, int, int], key: int) -> int:
    _, _, sa, sb = h
    return -1 if ((sa * key + sb) & MASK128) >> 127 else 1


class RefSketch:
    """The same sketch in Python integers: replays updates, min / median queries."""

    def __init__(self, signed: bool, hashes: list[tuple[int, int, int, int]], width: int) -> None:
        self.signed = signed
        self.hashes = hashes
        self.width = width
        self.cells = [[0] * width for _ in hashes]

    def update(self, keys: list[int], counts: list[int]) -> bool:
        """All or nothing, with the core's order of checks (key by key, row by row): False
        (and no change) if some intermediate cell would leave the int64 range."""
        new = [row[:] for row in self.cells]
        for key, count in zip(keys, counts, strict=True):
            for r, h in enumerate(self.hashes):
                delta = count * ref_sign(h, key) if self.signed else count
                if not INT64_MIN <= delta <= INT64_MAX:
                    return False
                c = ref_bucket(h, key, self.width)
                v = new[r][c] + delta
                if not INT64_MIN <= v <= INT64_MAX:
                    return False
                new[r][c] = v
        self.cells = new
        return True

    def query(self, key: int) -> float:
        vals = []
        for r, h in enumerate(self.hashes):
            v = self.cells[r][ref_bucket(h, key, self.width)]
            vals.append(v * ref_sign(h, key) if self.signed else v)
        if not self.signed:
            return float(min(vals))
        vals.sort()
        m = len(vals) // 2
        if len(vals) % 2:
            return float(vals[m])
        return float(vals[m - 1] + vals[m]) / 2


def reference_for(sketch: CountMinSketch | CountSketch) -> RefSketch:
    return RefSketch(isinstance(sketch, CountSketch), sketch.hashes(), sketch.width)


# ---------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------

keys_st = st.one_of(
    st.integers(0, 20),
    st.integers(0, 2**64 - 1),
    st.sampled_from([0, 1, 2**63, 2**64 - 1, 2**32]),
)
counts_st = st.one_of(
    st.integers(-5, 10),
    st.integers(-(10**12), 10**12),
    st.integers(INT64_MIN, INT64_MAX),
    st.sampled_from([INT64_MIN, INT64_MAX, 2**62]),
)


@st.composite
def sketch_runs(draw: st.DrawFn):
    kind = draw(st.sampled_from(KINDS))
    rows = draw(st.integers(1, 7))
    width = draw(st.one_of(st.integers(1, 40), st.sampled_from([1, 2, 3, 1000, 4099])))
    seed = draw(st.integers(0, 2**64))
    batches = draw(
        st.lists(
            st.lists(st.tuples(keys_st, counts_st), max_size=25),
            min_size=1,
            max_size=4,
        )
    )
    queries = draw(st.lists(keys_st, max_size=20))
    return kind, rows, width, seed, batches, queries


# ---------------------------------------------------------------------------------------
# Reference equality
# ---------------------------------------------------------------------------------------


@given(sketch_runs())
@example((CountSketch, 4, 3, 1, [[(7, INT64_MIN)]], [7]))  # INT64_MIN * -1 overflows
@example((CountMinSketch, 2, 5, 2, [[(1, INT64_MAX), (1, 1)], [(3, 4)]], [1, 3]))
def test_cells_and_queries_match_the_reference(run) -> None:
    kind, rows, width, seed, batches, queries = run
    s = kind(rows, width, rng=Rng(seed=seed))
    assert (s.rows, s.width, s.released) == (rows, width, False)
    hashes = s.hashes()
    assert len(hashes) == rows
    assert all(len(h) == 4 and all(0 <= v < 2**128 for v in h) for h in hashes)
    ref = reference_for(s)
    assert s.cells().tolist() == ref.cells
    for batch in batches:
        keys = np.array([k for k, _ in batch], dtype=np.uint64)
        counts = np.array([c for _, c in batch], dtype=np.int64)
        ok = ref.update([k for k, _ in batch], [c for _, c in batch])
        if ok:
            s.update(keys, counts)
        else:
            with pytest.raises(OverflowError, match="nothing was changed"):
                s.update(keys, counts)
        got = s.cells()
        assert got.shape == (rows, width) and got.dtype == np.int64
        assert got.tolist() == ref.cells
    probe = queries + [k for batch in batches for k, _ in batch]
    est = s.query(np.array(probe, dtype=np.uint64))
    assert est.dtype == np.float64 and est.shape == (len(probe),)
    assert est.tolist() == [ref.query(k) for k in probe]


def test_known_hash_values() -> None:
    # The reference reproduces the bucket rule on fixed keys of a seeded sketch, and a
    # unit update of key x lands in the bucket the formula gives, in every row.
    s = CountSketch(5, 97, rng=Rng(seed=123))
    for key in [0, 1, 2**63, 2**64 - 1, 123456789]:
        before = s.cells().copy()
        s.update([key], [1])
        diff = s.cells() - before
        for r, h in enumerate(s.hashes()):
            expected = np.zeros(97, dtype=np.int64)
            expected[ref_bucket(h, key, 97)] = ref_sign(h, key)
            assert diff[r].tolist() == expected.tolist()


def test_scalar_counts_and_defaults() -> None:
    s = CountMinSketch(2, 16, rng=Rng(seed=3))
    ref = reference_for(s)
    s.update([5, 6, 5])
    ref.update([5, 6, 5], [1, 1, 1])
    s.update(np.array([9, 9], dtype=np.uint32), 4)
    ref.update([9, 9], [4, 4])
    s.update(7, 2)
    ref.update([7], [2])
    s.update([])
    assert s.cells().tolist() == ref.cells
    assert s.query([5, 6, 9, 7]).tolist() == [ref.query(k) for k in (5, 6, 9, 7)]
    # Count-min never underestimates non-negative counts.
    assert s.query([5])[0] >= 2 and s.query([9])[0] >= 8


# ---------------------------------------------------------------------------------------
# Merge
# ---------------------------------------------------------------------------------------


@pytest.mark.slow
@given(sketch_runs())
def test_merge_is_the_union(run) -> None:
    kind, rows, width, seed, batches, _ = run
    small = [[(k, c % 1000 - 500) for k, c in batch] for batch in batches]  # no overflow
    a = kind(rows, width, rng=Rng(seed=seed))
    b = kind(rows, width, rng=Rng(seed=seed))
    both = kind(rows, width, rng=Rng(seed=seed))
    assert a.hashes() == b.hashes() == both.hashes()
    for i, batch in enumerate(small):
        keys = [k for k, _ in batch]
        counts = [c for _, c in batch]
        (a if i % 2 == 0 else b).update(np.array(keys, dtype=np.uint64), counts)
        both.update(np.array(keys, dtype=np.uint64), counts)
    b_before = b.cells().copy()
    a.merge(b)
    assert a.cells().tolist() == both.cells().tolist()
    assert b.cells().tolist() == b_before.tolist(), "merge changed its argument"


@pytest.mark.parametrize("kind", KINDS)
def test_merge_refusals_leave_the_state_unchanged(kind) -> None:
    s = kind(3, 8, rng=Rng(seed=1))
    s.update([1, 2, 3], [4, 5, 6])
    before = s.cells().copy()
    other_kind = CountSketch if kind is CountMinSketch else CountMinSketch
    cases = [
        (other_kind(3, 8, rng=Rng(seed=1)), TypeError, "cannot merge a"),
        (kind(3, 9, rng=Rng(seed=1)), ValueError, "different shapes"),
        (kind(2, 8, rng=Rng(seed=1)), ValueError, "different shapes"),
        (kind(3, 8, rng=Rng(seed=2)), ValueError, "different hash functions"),
        ("not a sketch", TypeError, "cannot merge"),
    ]
    for other, error, message in cases:
        if not isinstance(other, str):
            other.update([1, 2], [1, 1])
        with pytest.raises(error, match=message):
            s.merge(other)  # type: ignore[arg-type]
        assert s.cells().tolist() == before.tolist()
    # Overflow: refused, nothing changed.
    big = kind(3, 8, rng=Rng(seed=1))
    big.update([1], [2**62 + 2**61])
    s.update([1], [2**62 + 2**61])
    before = s.cells().copy()
    with pytest.raises(OverflowError, match="nothing was changed"):
        s.merge(big)
    assert s.cells().tolist() == before.tolist()


# ---------------------------------------------------------------------------------------
# Release
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_release_returns_a_read_only_copy(kind) -> None:
    s = kind(3, 16, rng=Rng(seed=4))
    s.update([1, 2, 3, 1], [1, 2, 3, 4])
    exact = s.cells().copy()
    r = s.release(1, rng=Rng(seed=5))
    assert type(r) is kind and r.released and not s.released
    assert (r.rows, r.width, r.hashes()) == (3, 16, s.hashes())
    assert s.cells().tolist() == exact.tolist(), "release changed the exact sketch"
    assert not np.array_equal(r.cells(), exact), "no noise was added"
    assert r.memory_bytes() == s.memory_bytes()
    assert "released" in repr(r)
    # Queries of the release are post-processing of its cells.
    ref = RefSketch(kind is CountSketch, r.hashes(), r.width)
    ref.cells = r.cells().tolist()
    assert r.query([1, 2, 3, 99]).tolist() == [ref.query(k) for k in (1, 2, 3, 99)]
    # Same seed, same noise; the exact sketch can be released again (each spends ε).
    again = s.release(1, rng=Rng(seed=5))
    assert again.cells().tolist() == r.cells().tolist()
    other = s.release(1, rng=Rng(seed=6))
    assert other.cells().tolist() != r.cells().tolist()
    # The release cannot be updated, merged or released again; nothing changes.
    noisy = r.cells().copy()
    with pytest.raises(ValueError, match=r"private release.*cannot be updated"):
        r.update([1])
    with pytest.raises(ValueError, match=r"private release.*cannot be merged"):
        r.merge(s)
    with pytest.raises(ValueError, match=r"private release.*cannot be merged"):
        s.merge(r)
    with pytest.raises(ValueError, match=r"private release.*cannot be released again"):
        r.release(1, rng=Rng(seed=7))
    assert r.cells().tolist() == noisy.tolist()
    assert s.cells().tolist() == exact.tolist()


@pytest.mark.parametrize(
    ("epsilon", "error", "message"),
    [
        (0, ValueError, "epsilon must be positive"),
        (-1, ValueError, "epsilon must be positive"),
        (float("nan"), ValueError, "epsilon must be finite"),
        (float("inf"), ValueError, "epsilon must be finite"),
        ("1", TypeError, "epsilon"),
        (True, TypeError, "epsilon"),
        (2.0**-60, ValueError, "scale"),  # rows/ε beyond 2^56
    ],
)
def test_release_refuses_bad_epsilons(epsilon: object, error: type, message: str) -> None:
    s = CountMinSketch(2, 4, rng=Rng(seed=1))
    s.update([1, 2])
    before = s.cells().copy()
    with pytest.raises(error, match=message):
        s.release(epsilon, rng=Rng(seed=1))  # type: ignore[arg-type]
    assert s.cells().tolist() == before.tolist() and not s.released


@pytest.mark.parametrize(
    ("kind", "rows", "epsilon"),
    [
        (CountMinSketch, 1, 1),
        (CountMinSketch, 4, 2),
        (CountSketch, 3, 0.5),
        (CountMinSketch, 2, Fraction(1, 3)),
    ],
)
def test_release_noise_is_discrete_laplace(kind, rows: int, epsilon) -> None:
    """Every cell gets independent discrete Laplace noise of scale rows/ε: chi-square of
    all cells of one wide release against the exact law at ALPHA."""
    width = 200_000 // rows
    s = kind(rows, width, rng=Rng(seed=rows))
    s.update(np.arange(5000, dtype=np.uint64), np.arange(5000) % 7 - 3)
    exact = s.cells().copy()
    r = s.release(epsilon, rng=Rng(seed=900 + rows))
    noise = (r.cells() - exact).ravel()
    scale = rows / float(epsilon)
    assert_integer_distribution(
        noise, laplace_cdf(scale), int(40 * scale) + 10, f"{kind.__name__} rows={rows}"
    )
    # Independent across cells: adjacent cells are uncorrelated (|r| < 6/sqrt(n) is a
    # ~1e-9 event for independent cells).
    corr = np.corrcoef(noise[:-1], noise[1:])[0, 1]
    assert abs(corr) < 6 / np.sqrt(noise.size)


def test_seeded_release_noise_says_not_private() -> None:
    # The construction rng only keys the public hashes: seeding it is harmless.
    s = CountMinSketch(2, 8, rng=Rng(seed=1))
    assert "NOT PRIVATE" not in repr(s)
    assert "NOT PRIVATE" in repr(s.release(1, rng=Rng(seed=2)))
    assert "NOT PRIVATE" not in repr(s.release(1))


# ---------------------------------------------------------------------------------------
# Persistence
# ---------------------------------------------------------------------------------------


def _filled(kind, seed: int = 9):
    s = kind(3, 7, rng=Rng(seed=seed))
    s.update(np.array([1, 2, 3, 2**64 - 1], dtype=np.uint64), [5, -2, 7, 1])
    return s


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("released", [False, True])
def test_bytes_round_trip(kind, released: bool) -> None:
    s = _filled(kind)
    if released:
        s = s.release(1, rng=Rng(seed=3))
    data = s.to_bytes()
    assert isinstance(data, bytes) and data[:8] == b"DPSTREAM"
    # A release with seeded noise is not private: loading it needs the opt-in.
    back = kind.from_bytes(data, allow_seeded=released)
    assert type(back) is kind
    assert back.released == released
    assert back.hashes() == s.hashes()
    assert back.cells().tolist() == s.cells().tolist()
    assert (back.epsilon_spent, back.epsilon_remaining) == (s.epsilon_spent, s.epsilon_remaining)
    assert ("NOT PRIVATE" in repr(back)) == released
    assert back.to_bytes() == data
    copy = kind.from_bytes(bytearray(data), allow_seeded=True)
    assert copy.cells().tolist() == s.cells().tolist()
    if released:
        with pytest.raises(ValueError, match="private release"):
            back.update([1])
    else:
        back.update([1])  # an exact sketch stays updatable


@pytest.mark.parametrize("kind", KINDS)
def test_save_and_load(kind, tmp_path: Path) -> None:
    for released in (False, True):
        s = _filled(kind)
        if released:
            s = s.release(2, rng=Rng(seed=8))
        path = tmp_path / f"{kind.__name__}-{released}.dpst"
        dpstream.save(s, path)
        back = dpstream.load(path, allow_seeded=released)
        assert type(back) is kind
        assert back.released == released
        assert back.cells().tolist() == s.cells().tolist()
        assert back.hashes() == s.hashes()
        assert path.read_bytes() == s.to_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{kind.__name__}-{r}.dpst" for r in (False, True)
    ), "save left temporary files behind"


@pytest.mark.parametrize("kind", KINDS)
def test_corrupted_and_truncated_bytes_raise(kind, tmp_path: Path) -> None:
    data = _filled(kind).to_bytes()
    assert_truncations_and_flips_refused(kind.from_bytes, data, 0x10)
    with pytest.raises(ValueError, match="invalid dpstream state"):
        kind.from_bytes(data + b"\x00")
    path = tmp_path / "bad.dpst"
    path.write_bytes(data[:-3])
    with pytest.raises(ValueError, match="invalid dpstream state"):
        dpstream.load(path)
    path.write_bytes(b"not a dpstream file at all, not at all")
    with pytest.raises(ValueError, match="invalid dpstream state"):
        dpstream.load(path)


# ---------------------------------------------------------------------------------------
# The ε ledger and seeded noise survive a save (issue 28)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_spent_budget_stays_spent_after_a_save(kind, tmp_path: Path) -> None:
    """Regression: the ledger was not in the encoding, so a loaded sketch could be
    released again past its budget."""
    s = kind(3, 7, budget=Fraction(3, 2), rng=Rng(seed=9))
    s.update([1, 2, 3], [5, 2, 7])
    s.release(1)
    s.release(Fraction(1, 2))
    assert s.epsilon_remaining == 0
    path = tmp_path / "s.dpst"
    dpstream.save(s, path)
    for back in (kind.from_bytes(s.to_bytes()), dpstream.load(path)):
        assert (back.epsilon_spent, back.epsilon_remaining) == (Fraction(3, 2), 0)
        before = back.to_bytes()
        with pytest.raises(BudgetExceededError, match="only 0 of the budget 3/2 remains"):
            back.release(Fraction(1, 100))
        assert back.to_bytes() == before
    # Partly spent: the rest is still available, and no more.
    p = kind(3, 7, budget=1, rng=Rng(seed=9))
    p.release(Fraction(1, 4))
    back = kind.from_bytes(p.to_bytes())
    assert back.epsilon_remaining == Fraction(3, 4)
    with pytest.raises(BudgetExceededError):
        back.release(1)
    back.release(Fraction(3, 4))
    assert back.epsilon_remaining == 0
    # Without a budget the spending is still recorded.
    u = kind(3, 7, rng=Rng(seed=9))
    u.release(2)
    back = kind.from_bytes(u.to_bytes())
    assert (back.epsilon_spent, back.epsilon_remaining) == (2, None)


@pytest.mark.parametrize("kind", KINDS)
def test_a_release_with_seeded_noise_stays_marked(kind) -> None:
    r = _filled(kind).release(1, rng=Rng(seed=3))
    assert "NOT PRIVATE" in repr(r)
    with pytest.raises(ValueError, match=r"seeded sketch release .*allow_seeded=True"):
        kind.from_bytes(r.to_bytes())
    back = kind.from_bytes(r.to_bytes(), allow_seeded=True)
    assert "NOT PRIVATE" in repr(back)
    assert back.epsilon_spent == 1
    private = _filled(kind).release(1)
    assert "NOT PRIVATE" not in repr(kind.from_bytes(private.to_bytes()))


@pytest.mark.parametrize("kind", KINDS)
def test_merge_combines_the_ledgers(kind) -> None:
    """A merged sketch holds both inputs' records: it has spent the larger ε spent and
    may spend only the smaller ε remaining."""
    a = kind(3, 7, budget=1, rng=Rng(seed=1))
    b = kind(3, 7, budget=2, rng=Rng(seed=1))
    a.release(Fraction(1, 4))
    b.release(Fraction(3, 2))
    a.merge(b)
    assert (a.epsilon_spent, a.epsilon_remaining) == (Fraction(3, 2), Fraction(1, 2))
    assert (b.epsilon_spent, b.epsilon_remaining) == (Fraction(3, 2), Fraction(1, 2))
    c = kind(3, 7, rng=Rng(seed=1))  # no cap
    c.merge(b)
    assert c.epsilon_remaining == Fraction(1, 2)
    d, e = kind(3, 7, rng=Rng(seed=1)), kind(3, 7, rng=Rng(seed=1))
    e.release(1)
    d.merge(e)
    assert (d.epsilon_spent, d.epsilon_remaining) == (1, None)
    # A refused merge leaves the ledger alone.
    wide = kind(3, 8, budget=1, rng=Rng(seed=1))
    with pytest.raises(ValueError):
        c.merge(wide)
    assert c.epsilon_remaining == Fraction(1, 2)


def test_kinds_are_not_interchangeable() -> None:
    cs = _filled(CountSketch).to_bytes()
    cm = _filled(CountMinSketch).to_bytes()
    with pytest.raises(ValueError, match="count sketch, not a count-min sketch"):
        CountMinSketch.from_bytes(cs)
    with pytest.raises(ValueError, match="count-min sketch, not a count sketch"):
        CountSketch.from_bytes(cm)
    # A generator's bytes are not a sketch.
    p = dpstream.PrivHP(1, 1, k=2, width=4, depth=3, rng=Rng(seed=1))
    p.update([[0.5]])
    gen = p.release(rng=Rng(seed=2)).to_bytes()
    with pytest.raises(ValueError, match="expected a Sketch, found a TreeGenerator"):
        CountMinSketch.from_bytes(gen)


def _with_crc(body: bytes) -> bytes:
    """``body`` (header + payload) with a valid CRC-32 appended (crc32fast is zlib's)."""
    return body + zlib.crc32(body).to_bytes(4, "little")


def test_crc_is_zlib_crc32() -> None:
    data = _filled(CountMinSketch).to_bytes()
    assert _with_crc(data[:-4]) == data


@given(
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
    st.sampled_from(KINDS),
)
def test_valid_checksums_over_bad_payloads_never_crash(edits, kind) -> None:
    """Bytes with a correct header and checksum but a mangled payload either decode to a
    valid sketch or raise ValueError — never a crash, a huge allocation or another error."""
    data = bytearray(_filled(kind).to_bytes()[:-4])
    for pos, value in edits:
        i = 20 + pos % (len(data) - 20)  # payload only: the header is checked separately
        data[i] = value
    try:
        s = kind.from_bytes(_with_crc(bytes(data)))
    except ValueError:
        return
    assert 1 <= s.rows <= 64 and s.width >= 1
    assert s.cells().shape == (s.rows, s.width)


# ---------------------------------------------------------------------------------------
# Fixed memory
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_memory_is_fixed(kind) -> None:
    s = kind(4, 1024, rng=Rng(seed=1))
    m = s.memory_bytes()
    assert m >= 4 * 1024 * 8
    keys = np.empty(100_000, dtype=np.uint64)
    gen = np.random.default_rng(0)
    for _ in range(20):
        keys[:] = gen.integers(0, 2**63, size=keys.size, dtype=np.uint64)
        s.update(keys, 1)
        assert s.memory_bytes() == m
    s.merge(kind(4, 1024, rng=Rng(seed=1)))
    assert s.memory_bytes() == m
    assert s.release(1, rng=Rng(seed=1)).memory_bytes() == m
    if kind is CountMinSketch:
        assert (s.cells().sum(axis=1) == 2_000_000).all()


# ---------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "counts", "error", "message"),
    [
        ([-1], 1, ValueError, "keys must be non-negative"),
        ([1, 2, -3], 1, ValueError, "keys must be non-negative"),
        ([1.0], 1, TypeError, "keys must be integers"),
        ([2**64], 1, ValueError, "keys must be below 2\\*\\*64"),
        ([True], 1, TypeError, "keys must be integers"),
        (["a"], 1, TypeError, "keys must be integers"),
        ([[1, 2]], 1, ValueError, "keys must be 1-D"),
        ([1, 2], [1, 2, 3], ValueError, "counts must be an int or 1-D with length 2"),
        ([1, 2], [[1, 2]], ValueError, "counts must be an int or 1-D with length 2"),
        ([1], [1.5], TypeError, "counts must be integers"),
        ([1], [True], TypeError, "counts must be integers"),
        ([1], np.array([2**63], dtype=np.uint64), ValueError, "counts exceed the int64 range"),
    ],
)
@pytest.mark.parametrize("kind", KINDS)
def test_bad_updates_raise_and_change_nothing(kind, keys, counts, error, message) -> None:
    s = _filled(kind)
    before = s.cells().copy()
    with pytest.raises(error, match=message):
        s.update(keys, counts)
    assert s.cells().tolist() == before.tolist()


@pytest.mark.parametrize("method", ["update", "query"])
def test_lists_of_large_keys_are_accepted(method: str) -> None:
    s = CountMinSketch(2, 8, rng=Rng(seed=1))
    getattr(s, method)([1, 2**63])


def test_bad_queries_raise() -> None:
    s = _filled(CountMinSketch)
    with pytest.raises(ValueError, match="keys must be non-negative"):
        s.query([-1])
    with pytest.raises(TypeError, match="keys must be integers"):
        s.query([0.5])
    assert s.query([]).shape == (0,)


@pytest.mark.parametrize(
    ("rows", "width", "error", "message"),
    [
        (0, 8, ValueError, r"rows must be in 1\.\.=64, got 0"),
        (65, 8, ValueError, r"rows must be in 1\.\.=64, got 65"),
        (1, 0, ValueError, r"width must be in 1\.\.=2\^30, got 0"),
        (1, 2**30 + 1, ValueError, r"width must be in 1\.\.=2\^30"),
        (64, 2**30, ValueError, "16 GiB"),
        (1.0, 8, TypeError, "rows must be an int"),
        (1, "8", TypeError, "width must be an int"),
        (True, 8, TypeError, "rows must be an int"),
    ],
)
@pytest.mark.parametrize("kind", KINDS)
def test_bad_shapes_raise(kind, rows, width, error, message) -> None:
    with pytest.raises(error, match=message):
        kind(rows, width, rng=Rng(seed=1))


@pytest.mark.parametrize(
    ("rows", "width", "name"),
    [(-1, 8, "rows"), (1, -8, "width"), (2**70, 8, "rows")],
    ids=["negative-rows", "negative-width", "huge-rows"],
)
def test_negative_or_huge_shapes_name_the_parameter(rows: int, width: int, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        CountMinSketch(rows, width, rng=Rng(seed=1))


def test_rng_must_be_a_dpstream_rng() -> None:
    with pytest.raises(TypeError, match=r"rng must be a dpstream\.Rng"):
        CountMinSketch(1, 4, rng=np.random.default_rng(0))  # type: ignore[arg-type]
