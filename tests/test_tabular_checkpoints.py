"""Checkpoints written before issue 39 (``tests/data``, see its README).

The earlier default policy's options were removed in dpstream 0.2: its states (format 2, a
stored ``"adaptive"`` policy with fields such as ``score`` or ``coverage``; format 1,
``method="proposed"``) load, re-release their last table from the stored model and size,
and refuse to step, naming the options. ``Paper()`` and ``Baseline()`` states load and
continue exactly as the dpstream that wrote them did; their stream options ``counter``,
``horizon`` and ``estimator`` are policy fields now, and a fit that is no option any more
(``estimator="mbi"``, ``"mw"`` outside ``Baseline()``) makes a state that only re-releases.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import dpstream
import numpy as np
import pytest
from dpstream.tabular import Baseline, Domain, ModelOptions, Paper, TabularStream
from dpstream.tabular.policy import RemovedPolicy

DATA = Path(__file__).resolve().parent / "data"
#: The fixtures' domain (see ``tests/data/README.md``).
DOMAIN = Domain(
    {"age": ["young", "mid", "old"], "sex": ["f", "m"], "job": 4, "income": ["low", "high"]}
)


def rows(n: int, seed: int) -> np.ndarray:
    """The fixtures' records (4 columns: age, sex, job, income)."""
    g = np.random.default_rng(seed)
    a = g.integers(0, 3, n)
    s = g.integers(0, 2, n)
    j = (a + g.integers(0, 2, n)) % 4
    i = ((a == 2) | (g.random(n) < 0.3)).astype(np.int64)
    return np.stack([a, s, j, i], axis=1).astype(np.int64)


RECORDS = rows(400, 39)  # the first 300 went into the fixtures, four batches of 75


def digest(codes: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(codes, dtype="<i8").tobytes()).hexdigest()[:16]


#: (t, released size, digest of the re-released table) by the dpstream that wrote them;
#: the digests re-recorded when releases came to be drawn in chunks (issue 42: the same
#: models and sizes, other draws of the rows).
REMOVED = {
    "tabular_adaptive_v2.state": (4, 301, "d0e05eb01c84909f"),
    "tabular_adaptive_coverage_v2.state": (4, 275, "406bbf4d6a6daf52"),
    "tabular_proposed_v1.state": (4, 372, "eda010f2b71e5dcb"),
}
#: The options each message must name.
NAMED = {
    "tabular_adaptive_v2.state": (
        "this checkpoint's policy used Adaptive(score='l2', k=2, remainder=Pooled(stddev="
        "'shrinkage', margin=3.0), refit='step', drift_z=3.0, drift_decay=0.9, coverage=False, "
        "staleness=4.0, staleness_gate=64.0, staleness_share=0.5, max_scored=500), options "
        "removed in dpstream 0.2; it can re-release its last table but not continue: start a "
        "new stream"
    ),
    "tabular_adaptive_coverage_v2.state": "coverage=True",
    "tabular_proposed_v1.state": (
        "this checkpoint's stream used TabularStream(method='proposed', marginals_per_step=2, "
        "score='l2', remainder='pooled', refit='selection', pooled_stddev='noise', "
        "k_schedule='fixed'), options removed in dpstream 0.2"
    ),
}


@pytest.mark.parametrize("name", sorted(REMOVED))
def test_a_state_of_a_removed_policy_re_releases_and_refuses_to_step(name: str) -> None:
    raw = (DATA / name).read_bytes()
    s = dpstream.load(DATA / name)  # OS-seeded when written: no opt-in needed
    t, size, table = REMOVED[name]
    assert isinstance(s, TabularStream) and isinstance(s.policy, RemovedPolicy)
    assert (s.t, s.size) == (t, size) and not s.seeded
    # The stored state written back, bit for bit, before the sampling generator moves.
    assert s.to_bytes() == raw
    codes = s.synthetic_codes()
    assert codes.shape == (size, 4) and digest(codes) == table
    for batch in (RECORDS[300:350], None):
        with pytest.raises(ValueError) as info:
            s.step(batch)
        assert NAMED[name] in str(info.value)
    assert (s.t, s.size) == (t, size)
    # Loaded again (here from bytes), the same re-release.
    again = TabularStream.from_bytes(raw)
    assert digest(again.synthetic_codes()) == table
    assert f"policy={again.policy!r}" in repr(again)
    # Its public values are the stored ones.
    assert sum(again.selection_counts.values()) > 0 and again.epsilon == 1


def test_a_state_of_a_removed_policy_saved_after_a_release_continues_the_sampler() -> None:
    s = TabularStream.from_bytes((DATA / "tabular_adaptive_v2.state").read_bytes())
    first = s.synthetic_codes()
    back = TabularStream.from_bytes(s.to_bytes())
    assert np.array_equal(back.synthetic_codes(), s.synthetic_codes())
    assert back.size == first.shape[0] == 301


#: name: (policy, t, released size, re-release, the next two steps' releases; the steps
#: re-recorded when counter noise keys came from a master key, and again when every
#: step's noise did, issue 41: a state without a stored key ring draws one from its
#: restored seeded generator; Paper's digests when releases came to be drawn in chunks,
#: issue 42: the rows' draws only).
CONTINUED = {
    "tabular_paper_v2.state": (
        Paper(k=2),
        4,
        237,
        "74bc236074e99ae9",
        ["a8d4738bb6f19d94", "8475e0f0ce68eb9f"],
    ),
    "tabular_baseline_v1.state": (
        Baseline(k=2),
        4,
        324,
        "86864145ce5bf61b",
        ["e6da73869a250eb3", "680fc405915f5724"],
    ),
}


@pytest.mark.parametrize("name", sorted(CONTINUED))
def test_paper_and_baseline_states_continue_exactly(name: str) -> None:
    policy, t, size, table, following = CONTINUED[name]
    raw = (DATA / name).read_bytes()
    with pytest.raises(ValueError, match="allow_seeded=True"):
        TabularStream.from_bytes(raw)  # seeded when written
    s = TabularStream.from_bytes(raw, allow_seeded=True)
    assert s.policy == policy and (s.t, s.size) == (t, size)
    assert digest(s.synthetic_codes()) == table
    s = TabularStream.from_bytes(raw, allow_seeded=True)
    got = [digest(s.domain.encode(s.step(RECORDS[300 + 50 * k : 350 + 50 * k]))) for k in (0, 1)]
    assert got == following


def with_config(raw: bytes, **config: object) -> bytes:
    """``raw`` with its header's stream options updated (as an older dpstream wrote them)."""
    magic = b"DPSTREAM-TABULAR"
    npz = np.load(io.BytesIO(raw[len(magic) :]), allow_pickle=False)
    arrays = {k: npz[k] for k in npz.files}
    header = json.loads(arrays["header"].tobytes())
    header["config"].update(config)
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    return magic + buf.getvalue()


@pytest.mark.parametrize(
    ("name", "estimator"),
    [
        ("tabular_paper_v2.state", "mw"),
        ("tabular_paper_v2.state", "mbi"),
        ("tabular_baseline_v1.state", "mbi"),
    ],
)
def test_a_state_whose_fit_is_no_option_re_releases_and_refuses_to_step(
    name: str, estimator: str
) -> None:
    """``estimator="mbi"``, and ``"mw"`` outside ``Baseline()``, are no options any more."""
    _, t, size, table, _ = CONTINUED[name]
    raw = with_config((DATA / name).read_bytes(), estimator=estimator)
    s = TabularStream.from_bytes(raw, allow_seeded=True)
    assert isinstance(s.policy, RemovedPolicy) and (s.t, s.size) == (t, size)
    assert s.to_bytes() == raw
    assert digest(s.synthetic_codes()) == table  # the stored model (or rows), re-released
    with pytest.raises(ValueError, match=rf"TabularStream\(estimator='{estimator}'\)"):
        s.step(RECORDS[300:350])
    assert (s.t, s.size) == (t, size)


def test_the_stream_options_of_older_states_become_policy_fields() -> None:
    raw = (DATA / "tabular_baseline_v1.state").read_bytes()
    s = TabularStream.from_bytes(with_config(raw, estimator="mw"), allow_seeded=True)
    assert s.policy == Baseline(k=2, estimator="mw") and s.t == 4
    raw = (DATA / "tabular_paper_v2.state").read_bytes()
    s = TabularStream.from_bytes(raw, allow_seeded=True)
    assert s.policy == Paper(k=2, counter="simple", horizon=None)
    # The stored counters are checked against the policy's: they are "simple".
    with pytest.raises(ValueError, match="corrupt TabularStream state: size counter"):
        TabularStream.from_bytes(with_config(raw, counter="block", horizon=9), allow_seeded=True)


def test_a_new_state_keeps_its_policy_fields() -> None:
    policy = Paper(k=1, counter="block", horizon=3)
    s = TabularStream(
        DOMAIN, 1, policy=policy, model=ModelOptions(iters=10), rng=dpstream.Rng(seed=4)
    )
    s.step(RECORDS[:50])
    back = TabularStream.from_bytes(s.to_bytes(), allow_seeded=True)
    assert back.policy == policy and back.t == 1
    assert back.step(RECORDS[50:100]).equals(s.step(RECORDS[50:100]))
    b = TabularStream(DOMAIN, 1, policy=Baseline(k=1, estimator="mw"), model=ModelOptions(iters=5))
    b.step(RECORDS[:50])
    assert TabularStream.from_bytes(b.to_bytes()).policy == Baseline(k=1, estimator="mw")
