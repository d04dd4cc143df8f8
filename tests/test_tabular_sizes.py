"""TabularStream's neighbouring relation and all-or-nothing steps (issue 28, items 1 and 4).

Default: ε-DP for one record added or removed, the table's size released by a continual
counter inside ε. ``public_sizes=True``: exact sizes, ε-DP for one record replaced (every
mechanism calibrated to an ℓ1 change of 2). A step either completes or leaves the state
(``to_bytes()``) as it was.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import dpstream
import numpy as np
import pytest
from dpstream import noise as noise_module
from dpstream.tabular import (
    Adaptive,
    Baseline,
    Domain,
    ModelOptions,
    Paper,
    TabularStream,
    all_workloads,
)
from dpstream.tabular import stream as stream_module
from dpstream.tabular.model import junction_tree_size
from dpstream.tabular.policy import Policy, from_dict
from dpstream.tabular.selection import SIZE_SHARE

MAGIC = b"DPSTREAM-TABULAR"


def small() -> Domain:
    return Domain({"a": 3, "b": 2, "c": 4, "d": 2})


def rows_of(domain: Domain, n: int, seed: int) -> np.ndarray:
    g = np.random.default_rng(seed)
    return np.stack([g.integers(0, s, n) for s in domain.sizes], axis=1).astype(np.int64)


def edit_state(s: TabularStream, edit: Callable[[dict[str, Any]], None]) -> bytes:
    """``s.to_bytes()`` with its header changed by ``edit`` (to write a state as an older
    version of the library did)."""
    raw = s.to_bytes()
    npz = np.load(io.BytesIO(raw[len(MAGIC) :]))
    arrays = {k: npz[k] for k in npz.files}
    header = json.loads(arrays["header"].tobytes())
    edit(header)
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    return MAGIC + buf.getvalue()


def old_options(policy: Policy) -> dict[str, Any]:
    """The keyword options (before policies) that ran as ``policy`` (Baseline), or that
    made the same choices as ``Paper`` (``method="proposed"``, which released ``h_{t,k}``
    and not the mixture: an option set that dpstream 0.2 removed)."""
    if isinstance(policy, Baseline):
        return {"method": "baseline", "marginals_per_step": policy.k, "score": policy.score}
    assert isinstance(policy, Paper)
    return {
        "method": "proposed", "marginals_per_step": policy.k, "k_schedule": "fixed",
        "score": "paper", "remainder": "model", "pooled_stddev": "noise", "refit": "selection",
    }  # fmt: skip


def as_format_1(header: dict[str, Any]) -> None:
    """Rewrite a header as the library wrote it before policies (format 1)."""
    header["format"] = 1
    header["config"].update(old_options(from_dict(header["config"].pop("policy"))))


# ---------------------------------------------------------------------------- item 1


@pytest.mark.parametrize("policy", [Adaptive(), Paper(k=2)])
def test_the_default_releases_a_noisy_size_inside_epsilon(policy: Adaptive | Paper) -> None:
    """Fails before issue 28: there the releases had exactly |f_t| rows, ``size`` was the
    exact size and the whole ε went to the selections and the measurements."""
    d = small()
    eps = Fraction(2)
    s = TabularStream(d, eps, policy=policy, model=ModelOptions(iters=10), rng=dpstream.Rng(seed=1))
    assert not s.public_sizes
    for k, b in s.budgets.items():  # the split, summed: size + k selections + k counters
        assert b.size == eps * SIZE_SHARE > 0 and b.l1 == 1
        assert k * b.selection + k * b.measurement + b.size == eps
    data = rows_of(d, 1200, 2)
    sizes, lengths = [], []
    for t in range(8):
        out = s.step(data[150 * t : 150 * (t + 1)])
        sizes.append(s.size)
        lengths.append(len(out))
    exact = [150 * (t + 1) for t in range(8)]
    assert lengths == sizes  # every release has the released size's rows
    assert sizes != exact  # ... which is noisy (ε/20 = 1/10: Laplace of scale 10 per step)
    assert all(abs(a - b) < 400 for a, b in zip(sizes, exact, strict=True))
    assert sizes == sorted(sizes) and sizes[0] >= 0  # insert-only: monotone
    if isinstance(policy, Paper):
        assert s._size_counter is not None and s._size_counter.time == s.t == 8
        assert s._size_counter.epsilon == eps * SIZE_SHARE


def test_public_sizes_are_exact_and_calibrated_to_one_record_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    d = small()
    eps = Fraction(1)
    seen: list[tuple[Fraction, Fraction]] = []
    inner = noise_module.permute_and_flip

    def spy(scores, epsilon, sensitivity, *, rng):  # type: ignore[no-untyped-def]
        seen.append((Fraction(epsilon), Fraction(sensitivity)))
        return inner(scores, epsilon, sensitivity, rng=rng)

    monkeypatch.setattr(noise_module, "permute_and_flip", spy)
    s = TabularStream(
        d, eps, policy=Paper(k=2), model=ModelOptions(iters=10), public_sizes=True,
        rng=dpstream.Rng(seed=3),
    )  # fmt: skip
    data = rows_of(d, 600, 4)
    for t in range(4):
        out = s.step(data[150 * t : 150 * (t + 1)])
        assert len(out) == s.size == 150 * (t + 1)
    assert s._size_counter is None
    # Permute-and-flip: ε/2k = 1/4 with the "paper" score's sensitivity doubled (the
    # smallest workload, b × d, has 4 cells).
    assert seen and set(seen) == {(Fraction(1, 4), 2 * (Fraction(1, 4) + Fraction(1, 2**18)))}
    # The counters: ε/4k = 1/8 for an ℓ1 change of 1, i.e. ε/2k for the change of 2.
    counters = [c for c in s._counters if c is not None]
    assert counters and {c.epsilon for c in counters} == {Fraction(1, 8)}
    # The baseline's noise: scale 2·2k/ε.
    assert (
        TabularStream.budget(eps, 2, all_workloads(d, 2), d, public_sizes=True).laplace_scale == 8
    )
    with pytest.raises(TypeError, match="public_sizes"):
        TabularStream(d, 1, public_sizes="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="public_sizes"):
        TabularStream(d, 1, policy=Paper(), public_sizes="yes")  # type: ignore[arg-type]
    # The default with public sizes: every release has the exact size.
    s = TabularStream(
        d, eps, model=ModelOptions(iters=10), public_sizes=True, rng=dpstream.Rng(seed=3)
    )
    for t in range(4):
        assert len(s.step(data[150 * t : 150 * (t + 1)])) == s.size == 150 * (t + 1)


def test_sizes_stay_non_negative_with_deletions() -> None:
    d = small()
    s = TabularStream(
        d, 1, policy=Paper(k=2), model=ModelOptions(iters=10), rng=dpstream.Rng(seed=5)
    )
    data = rows_of(d, 200, 6)
    s.step(data[:20])
    sizes = []
    for t in range(6):  # delete everything, then steps with nothing
        out = s.step(None, deletions=data[:20] if t == 0 else None)
        assert len(out) == s.size >= 0
        sizes.append(s.size)
    assert not s._insert_only
    # Under add/remove a deletion from the (exactly) empty table is taken like any other
    # step: refusing it would depend on the private size (tests/test_tabular_deletions.py).
    s.step(None, deletions=data[:1])
    assert s.size >= 0


def test_the_baseline_grows_by_the_released_size() -> None:
    d = small()
    s = TabularStream(
        d,
        1,
        policy=Baseline(k=2, estimator="mw"),
        model=ModelOptions(iters=10),
        rng=dpstream.Rng(seed=7),
    )
    data = rows_of(d, 400, 8)
    before = 0
    for t in range(4):
        out = s.step(data[100 * t : 100 * (t + 1)])
        assert len(out) == s.size >= before
        before = s.size


def test_a_checkpoint_keeps_the_size_counter_and_resumes_exactly() -> None:
    d = small()
    data = rows_of(d, 800, 9)

    def make() -> TabularStream:
        return TabularStream(
            d, 1, policy=Paper(k=2), model=ModelOptions(iters=10), rng=dpstream.Rng(seed=11)
        )

    a, b = make(), make()
    for t in range(3):
        a.step(data[100 * t : 100 * (t + 1)])
        b.step(data[100 * t : 100 * (t + 1)])
    b = TabularStream.from_bytes(b.to_bytes(), allow_seeded=True)
    assert b.size == a.size and b._exact_size == a._exact_size == 300 and not b.public_sizes
    for t in range(3, 6):
        assert a.step(data[100 * t : 100 * (t + 1)]).equals(b.step(data[100 * t : 100 * (t + 1)]))
    assert a.to_bytes() == b.to_bytes()
    # A fresh stream's state (no step yet) resumes too.
    fresh = TabularStream.from_bytes(make().to_bytes(), allow_seeded=True)
    assert fresh._size_counter is not None and fresh.step(data[:100]).equals(
        make().step(data[:100])
    )


def test_a_state_from_before_issue_28_loads_as_public_sizes_at_twice_epsilon() -> None:
    """Old states: exact sizes, noise for one record added or removed at ε, i.e. the
    calibration of ``public_sizes=True`` at 2ε. They load as that, with a warning."""
    d = small()
    data = rows_of(d, 600, 12)

    def make() -> TabularStream:
        return TabularStream(
            d,
            2,
            policy=Baseline(k=2),
            model=ModelOptions(iters=10),
            public_sizes=True,
            rng=dpstream.Rng(seed=13),
        )

    a, b = make(), make()
    for t in range(3):
        a.step(data[100 * t : 100 * (t + 1)])
        b.step(data[100 * t : 100 * (t + 1)])

    def as_before(header: dict[str, Any]) -> None:
        as_format_1(header)
        del header["config"]["public_sizes"], header["exact_size"], header["insert_only"]
        header["config"]["epsilon"] = "1"  # what the old library said: ε = 1

    old = as_before_bytes = edit_state(b, as_before)
    with pytest.warns(UserWarning, match=r"public_sizes=True.*epsilon = 2-DP"):
        old = TabularStream.from_bytes(as_before_bytes, allow_seeded=True)
    assert old.public_sizes and old.epsilon == 2 and old.size == a.size == 300
    for t in range(3, 6):  # the same noise as before: it continues the old stream exactly
        assert a.step(data[100 * t : 100 * (t + 1)]).equals(old.step(data[100 * t : 100 * (t + 1)]))


# ---------------------------------------------------------------------------- item 4


def _blocking_domain() -> tuple[Domain, int]:
    """A domain and a max_model_cells that any one 2-way workload fits but no two do."""
    d = Domain({"a": 4, "b": 4, "c": 4, "d": 4})
    one = junction_tree_size(d.sizes, [(0, 1)])
    two = min(
        junction_tree_size(d.sizes, [w, v])
        for w in all_workloads(d, 2)
        for v in all_workloads(d, 2)
        if w != v
    )
    assert one < two
    return d, one


def test_a_workload_that_blocks_the_others_ends_the_step_early() -> None:
    """Before issue 28 the second selection raised "no workload fits" after the first
    workload's counter had counted the batch, so a retry counted it again."""
    d, cells = _blocking_domain()
    s = TabularStream(
        d,
        1,
        policy=Paper(k=2),
        model=ModelOptions(iters=10, max_model_cells=cells),
        rng=dpstream.Rng(seed=1),
    )
    data = rows_of(d, 200, 3)
    out = s.step(data[:100])  # completes, with one selection
    assert len(out) == s.size and len(s.last_selected) == 1
    steps = sum(c.time for c in s._counters if c is not None)
    assert steps == 1 == sum(s.selection_counts.values())


def test_a_step_refused_before_anything_changes() -> None:
    d, cells = _blocking_domain()
    data = rows_of(d, 200, 4)
    # No workload fits at all: refused when the stream is built (issue 31), so no step
    # can start without a workload that fits.
    with pytest.raises(ValueError, match="alone needs a model"):
        TabularStream(
            d,
            1,
            policy=Paper(),
            model=ModelOptions(iters=10, max_model_cells=cells - 1),
            rng=dpstream.Rng(seed=2),
        )
    # A bounded counter's horizon: refused before the size counter is stepped.
    s = TabularStream(
        d,
        1,
        model=ModelOptions(iters=10),
        policy=Paper(k=1, counter="block", horizon=2),
        rng=dpstream.Rng(seed=3),
    )
    s.step(data[:50])
    s.step(data[50:100])
    before = s.to_bytes()
    with pytest.raises(ValueError, match="horizon of 2 steps"):
        s.step(data[100:150])
    assert s.to_bytes() == before


def test_a_batch_beyond_the_cell_limit_is_refused_before_anything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The limit is 2^27 records in one cell of a workload; lowered here to keep the test small.
    monkeypatch.setattr(stream_module, "CELL_LIMIT", 64.0)
    s = TabularStream(
        Domain({"a": 2, "b": 2}),
        1,
        policy=Paper(),
        model=ModelOptions(iters=10),
        rng=dpstream.Rng(seed=4),
    )
    before = s.to_bytes()
    with pytest.raises(ValueError, match="beyond 2\\^27"):
        s.step(np.zeros((64, 2), dtype=np.int64))
    assert s.to_bytes() == before
    s.step(np.zeros((63, 2), dtype=np.int64))


@pytest.mark.parametrize("public_sizes", [False, True])
def test_a_step_that_fails_later_is_rolled_back(
    monkeypatch: pytest.MonkeyPatch, public_sizes: bool
) -> None:
    """A failure after the counters were stepped (here: the fit raises at its second call
    of the step, as a non-finite marginal would) leaves ``to_bytes()`` identical, and the
    seeded stream then continues exactly as a twin that never failed."""
    d = small()
    data = rows_of(d, 600, 5)

    def make() -> TabularStream:
        return TabularStream(
            d, 1, policy=Paper(k=2), model=ModelOptions(iters=10),
            public_sizes=public_sizes, rng=dpstream.Rng(seed=6),
        )  # fmt: skip

    a, b = make(), make()
    a.step(data[:100])
    b.step(data[:100])
    before = a.to_bytes()
    fit = a._fit
    calls = {"n": 0}

    def failing(ms, total, warm):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:
            raise FloatingPointError("the model's marginals are not finite")
        return fit(ms, total, warm)

    monkeypatch.setattr(a, "_fit", failing)
    with pytest.raises(FloatingPointError):
        a.step(data[100:200])
    assert calls["n"] == 2 and a.to_bytes() == before
    monkeypatch.setattr(a, "_fit", fit)
    for t in range(1, 4):
        assert a.step(data[100 * t : 100 * (t + 1)]).equals(b.step(data[100 * t : 100 * (t + 1)]))
    assert a.to_bytes() == b.to_bytes()


@pytest.mark.parametrize("joint", [True, False], ids=["joint", "pairs"])
def test_batch_histograms_are_the_marginal_counts_of_each_workload(
    joint: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """count_codes counts every workload from the joint histogram when its cells are no
    more than the rows (2,000 rows, 840 cells), otherwise the 2-way workloads of one
    first column together by blocks of rows: the same int64 histograms as one workload
    at a time, whatever the mix of workloads."""
    from dpstream.tabular import marginal_counts
    from dpstream.tabular import marginals as m

    if not joint:
        monkeypatch.setattr(m, "JOINT_CELLS", 0)
        monkeypatch.setattr(m, "BLOCK_ROWS", 7)  # blocks that do not divide the rows
    g = np.random.default_rng(4)
    sizes = (3, 1, 5, 2, 7, 4)
    for n in (0, 1, 500, 2000):
        codes = np.stack([g.integers(0, s, n) for s in sizes], axis=1).astype(np.int64)
        workloads = [(0, 2), (1, 4), (0, 5), (2,), (1, 3, 5), (3, 4), (0, 1), (2, 3, 4, 5), ()]
        got = m.count_codes(codes, sizes, workloads)
        assert len(got) == len(workloads)
        for w, h in zip(workloads, got, strict=True):
            assert h.dtype == np.int64 and h.flags.c_contiguous
            want = marginal_counts(codes, sizes, w) if w else np.array([n])
            np.testing.assert_array_equal(h, want)


def test_the_next_size_is_exact_with_public_sizes_and_the_counter_release_otherwise() -> None:
    from dpstream.counters import Counter
    from dpstream.tabular.table_size import next_size

    # Public sizes: no counter, the exact size and rows.
    assert next_size(None, 100, -7, 13, monotone=False) == (93, 13)
    # A counter: its release post-processed, and the change of the released size as rows.
    rng = dpstream.Rng(seed=5)
    twin = Counter("simple", 1, 1, rng=dpstream.Rng(seed=5))
    raw = int(twin.step(40)[0])
    size, rows = next_size(Counter("simple", 1, 1, rng=rng), 10, 40, 40, monotone=True)
    assert size == max(10, raw) and rows == abs(size - 10)
    size, rows = next_size(Counter("simple", 1, 1, rng=dpstream.Rng(seed=5)), 10, 40, 40,
                           monotone=False)  # fmt: skip
    assert size == max(raw, 0) and rows == abs(size - 10)
