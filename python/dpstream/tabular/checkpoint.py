"""The checkpoint codec of :class:`~dpstream.tabular.TabularStream`; migration of old states.

A state is the magic ``DPSTREAM-TABULAR`` followed by a numpy ``.npz`` container: a JSON
header (format, domain, options, sizes, generator states) and arrays (counters, model,
marginals, the key ring). **Sensitive**: the counters hold exact sums, the header the exact
table size and the key ring the secret master key (:mod:`dpstream.tabular.keys`; absent
from states written before it: a load draws a fresh one). Format 3 is the default
policy's (:mod:`dpstream.tabular.epochs`). Format 2 stores the options with the
serialised policy (:func:`dpstream.tabular.policy.to_dict`); format 1 (before policies)
stores the old keyword options and is read through
:func:`policy_from_options`, the one migration of options.

The stream options ``counter``, ``horizon`` and ``estimator`` of older states are
policy fields now (:func:`_fold_options`). A format-1 or -2 state whose options dpstream
0.2 removed (the earlier default policy, or a fit that is no option any more:
``estimator="mbi"``, ``"mw"`` outside :class:`~dpstream.tabular.policy.Baseline`; a
:class:`~dpstream.tabular.policy.RemovedPolicy`) still loads: its stream re-releases its
last table from the stored model (or rows) and size, and refuses to step, naming the
options; its ``to_bytes`` writes the stored state back (with the sampling generator's
state).
Also here: :class:`Checkpointed` (the stream's ``to_bytes`` / ``from_bytes``), and the
snapshot a failed step rolls back to (:func:`undo_point`, :func:`roll_back`).
"""

from __future__ import annotations

import io
import json
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Self

import numpy as np
import numpy.typing as npt

from dpstream._rng import KeyRing, Rng
from dpstream.counters import Counter
from dpstream.persistence import seeded_refusal
from dpstream.tabular.domain import Domain
from dpstream.tabular.estimation import MarginalModel
from dpstream.tabular.keys import counter_rng
from dpstream.tabular.model import GraphicalModel
from dpstream.tabular.model_options import ModelOptions
from dpstream.tabular.mw import DenseModel
from dpstream.tabular.policy import RemovedPolicy, from_dict, removed_policy, to_dict
from dpstream.tabular.policy_options import ESTIMATORS, Adaptive, Baseline, Paper, Policy
from dpstream.tabular.tables import LazyTables

if TYPE_CHECKING:
    from dpstream.tabular.stream import TabularStream

__all__ = ["Checkpointed", "decode", "encode", "policy_from_options", "roll_back", "undo_point"]

_MAGIC = b"DPSTREAM-TABULAR"
_FORMAT = 2
#: The keyword options that policies replaced, and the value each had in states written
#: before it existed.
_OLD_OPTIONS: dict[str, Any] = {
    "method": "proposed",
    "marginals_per_step": "auto",
    "score": "paper",
    "remainder": "model",
    "refit": "selection",
    "pooled_stddev": "noise",
    "k_schedule": "fixed",
}


def policy_from_options(
    options: Mapping[str, Any],
) -> tuple[Policy | RemovedPolicy, dict[str, Any]]:
    """The migration of the keyword options that policies replaced (format-1 states).

    Returns the policy that runs exactly as those options did, and the other options.
    An option missing from ``options`` takes the value it had before it existed (a state
    written then ran with it). ``method="baseline"`` maps to :class:`Baseline` (``"auto"``
    k to 3, the ``"auto"`` score to ``"l2"``, which is what it ran). ``"proposed"`` ran as
    the earlier default policy (Algorithm 3 as the old options wrote it releases
    ``h_{t,k}``, not the average of :class:`Paper`), whose options dpstream 0.2 removed:
    a :class:`RemovedPolicy` naming them. ``ValueError`` naming the option for a value the
    old options did not accept."""
    rest = dict(options)
    old = {name: rest.pop(name, default) for name, default in _OLD_OPTIONS.items()}
    k = old["marginals_per_step"]
    if old["method"] == "proposed":
        return RemovedPolicy("TabularStream", old), rest
    if old["method"] != "baseline":
        raise ValueError(
            "an old TabularStream option cannot be migrated: method must be 'proposed' or "
            f"'baseline', got {old['method']!r}"
        )
    try:
        score: Any = "l2" if old["score"] == "auto" else old["score"]
        return Baseline(k=3 if k == "auto" else k, score=score), rest
    except (TypeError, ValueError) as e:
        raise ValueError(f"an old TabularStream option cannot be migrated: {e}") from None


def _put_model(
    arrays: dict[str, npt.NDArray[Any]], prefix: str, model: MarginalModel | None
) -> dict[str, Any]:
    """Store ``model``'s arrays under ``prefix``; its header fields."""
    kind = None if model is None else "pgm" if hasattr(model, "potentials") else "mw"
    if kind == "pgm":
        for k, (clique, theta) in enumerate(model.potentials.items()):  # type: ignore[union-attr]
            arrays[f"{prefix}clique_{k}"] = np.array(clique, dtype=np.int64)
            arrays[f"{prefix}theta_{k}"] = theta
        # the tree too: the fit may keep one the greedy triangulation would not find
        # (an mbi model has none: it loads as the built-in model on the greedy tree)
        tree = getattr(model, "junction_tree", None)
        for k, node in enumerate(tree.nodes if tree is not None else ()):
            arrays[f"{prefix}node_{k}"] = np.array(node, dtype=np.int64)
    elif kind == "mw":
        arrays[f"{prefix}dense"] = model.counts  # type: ignore[union-attr]
    return {
        "model": kind,
        "step_scale": getattr(model, "step_scale", 1.0),
        "model_total": None if model is None else float(model.total),
    }


def _get_model(
    arrays: Mapping[str, npt.NDArray[Any]], prefix: str, info: Mapping[str, Any], domain: Domain
) -> MarginalModel | None:
    if info["model"] == "pgm":
        k = 0
        potentials: dict[Sequence[int], npt.ArrayLike] = {}
        while f"{prefix}clique_{k}" in arrays:
            clique = tuple(int(c) for c in arrays[f"{prefix}clique_{k}"])
            potentials[clique] = arrays[f"{prefix}theta_{k}"]
            k += 1
        nodes: list[tuple[int, ...]] = []
        while f"{prefix}node_{len(nodes)}" in arrays:  # absent in states before 2026-11-26
            nodes.append(tuple(int(c) for c in arrays[f"{prefix}node_{len(nodes)}"]))
        model = GraphicalModel(
            domain.sizes, potentials, info["model_total"], junction_tree=nodes or None
        )
        model.step_scale = float(info["step_scale"])
        return model
    if info["model"] == "mw":
        return DenseModel(domain.sizes, arrays[f"{prefix}dense"])
    return None


def options(epsilon: Fraction, workloads: Any, policy: Policy, **rest: Any) -> dict[str, Any]:
    """The constructor's options as a state's header keeps them (a ``dpstream table`` run's
    fingerprint): ε exact, the workloads as lists, the policy serialised
    (:func:`~dpstream.tabular.policy.to_dict`), the other options (``rest``: the
    :class:`ModelOptions` fields by name, ``public_sizes``) as given."""
    listed = workloads if isinstance(workloads, int) else [list(w) for w in workloads]
    return {"epsilon": str(epsilon), "workloads": listed, "policy": to_dict(policy), **rest}


def _counter_name(i: int) -> str:
    return f"counter_{i}"


def _encode_epochs(s: TabularStream) -> bytes:
    """Format 3: the default policy's state (:meth:`EpochMechanism.state`)."""
    assert s._epochs is not None
    head, arrays = s._epochs.state()
    header = {
        "format": 3,
        "domain": s._domain.to_dict(),
        "config": s._config,
        "sample_rng": s._sample_rng.bit_generator.state,
        "epochs": head,
    }
    arrays = dict(arrays)
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    rng_state = s._rng._checkpoint_state()
    if rng_state is not None:
        arrays["rng"] = np.frombuffer(rng_state, dtype=np.uint8)
    arrays["keys"] = np.frombuffer(s._keys.to_bytes(), dtype=np.uint8)
    return _savez(arrays)


def _restore_epochs(
    s: TabularStream, header: Mapping[str, Any], arrays: dict[str, Any]
) -> TabularStream:
    """Format 3: the default policy's state into ``s``, a fresh stream of its options."""
    if s._epochs is None:
        raise ValueError("corrupt TabularStream state: format 3 without the default policy")
    s._epochs.load_state(dict(header["epochs"]), arrays)
    s._sample_rng.bit_generator.state = header["sample_rng"]
    s._t, s._size = s._epochs.t, s._epochs.size
    return s


def encode(s: TabularStream) -> bytes:
    """The bytes of :meth:`TabularStream.to_bytes`."""
    if s._epochs is not None:
        return _encode_epochs(s)
    if s._stored is not None:  # a removed policy's state: written back as it was loaded
        stored_header, stored_arrays = s._stored
        stored_header = {**stored_header, "sample_rng": s._sample_rng.bit_generator.state}
        stored_arrays = dict(stored_arrays)
        encoded = json.dumps(stored_header).encode()
        stored_arrays["header"] = np.frombuffer(encoded, dtype=np.uint8)
        return _savez(stored_arrays)
    arrays: dict[str, npt.NDArray[Any]] = {"selections": s._selections}
    header = {
        "format": _FORMAT,
        "domain": s._domain.to_dict(),
        "config": s._config,
        "t": s._t,
        "size": s._size,
        "exact_size": s._exact_size,
        "insert_only": s._insert_only,
        "sample_rng": s._sample_rng.bit_generator.state,
        **_put_model(arrays, "", s._model),
        "mixture": [_put_model(arrays, f"mix{m}_", c) for m, c in enumerate(s._mixture)],
        "last_selected": s._last_selected,
    }
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    rng_state = s._rng._checkpoint_state()
    if rng_state is not None:
        arrays["rng"] = np.frombuffer(rng_state, dtype=np.uint8)
    arrays["keys"] = np.frombuffer(s._keys.to_bytes(), dtype=np.uint8)
    if s._size_counter is not None:
        arrays["size_counter"] = np.frombuffer(s._size_counter.to_bytes(), dtype=np.uint8)
    for i in range(len(s._workloads)):
        arrays[f"marginal_{i}"] = s._synthetic_marginals[i]
        arrays[f"remainder_{i}"] = s._remainder[i]
        c = s._counters[i]
        if c is not None:
            arrays[_counter_name(i)] = np.frombuffer(c.to_bytes(), dtype=np.uint8)
    for k, rows in enumerate(s._baseline_rows):
        arrays[f"rows_{k}"] = rows
    return _savez(arrays)


def _savez(arrays: dict[str, npt.NDArray[Any]]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    return _MAGIC + buf.getvalue()


def _options(header: Mapping[str, Any]) -> tuple[dict[str, Any], RemovedPolicy | None]:
    """The constructor's options from a header, format-1 states migrated; and the
    :class:`RemovedPolicy` of a state whose options were removed (the options then hold
    :class:`Paper` in its place, for a stream that only re-releases)."""
    cfg = dict(header["config"])
    removed: RemovedPolicy | None = None
    if header["format"] == 1:
        cfg.setdefault("sampling", "iid")  # states written before the option existed
        policy, cfg = policy_from_options(cfg)
        if isinstance(policy, RemovedPolicy):
            removed, policy = policy, Paper()
        cfg["policy"] = policy
        if "public_sizes" not in cfg:
            # Before the add/remove default: exact sizes, noise for an ℓ1 change of 1.
            old = Fraction(cfg["epsilon"])
            cfg["public_sizes"] = True
            cfg["epsilon"] = str(2 * old)
            warnings.warn(
                f"this TabularStream state was saved before dpstream released the table's "
                f"size privately: it loads with public_sizes=True (exact sizes; neighbouring "
                f"streams differ in one record's values) and, as its noise was calibrated "
                f"for epsilon = {old} with one record added or removed, it is "
                f"epsilon = {2 * old}-DP for that relation. Start a new stream for the "
                f"add/remove guarantee.",
                UserWarning,
                stacklevel=4,
            )
    elif header["format"] == 2:
        removed = removed_policy(cfg["policy"])
        cfg["policy"] = Paper() if removed is not None else from_dict(cfg["policy"])
    else:  # format 3: the default policy of today
        cfg["policy"] = from_dict(cfg["policy"])
    removed = _fold_options(cfg, removed)
    if isinstance(cfg["workloads"], list):
        cfg["workloads"] = [tuple(w) for w in cfg["workloads"]]
    return cfg, removed


#: The stream options that are :class:`ModelOptions` fields (a state's keys).
_MODEL_OPTIONS = ("iters", "max_model_cells", "sampling")
#: The stream options that became policy fields.
_POLICY_OPTIONS = ("counter", "horizon", "estimator")


def _fold_options(cfg: dict[str, Any], removed: RemovedPolicy | None) -> RemovedPolicy | None:
    """Move the stream options of older states that are policy fields now (``counter``,
    ``horizon``, ``estimator``) into ``cfg["policy"]``; the :class:`RemovedPolicy` of a
    state whose fit is no longer an option (``estimator="mbi"``, or ``"mw"`` outside
    :class:`Baseline`), or ``removed`` as given."""
    old = {name: cfg.pop(name) for name in _POLICY_OPTIONS if name in cfg}
    policy = cfg["policy"]
    if removed is not None or isinstance(policy, Adaptive):
        return removed  # Adaptive took the defaults only; a removed policy does not step
    estimator = old.pop("estimator", None)  # absent from the states written since
    if isinstance(policy, Baseline) and estimator in ESTIMATORS:
        old["estimator"] = estimator
    elif estimator not in (None, "pgm"):
        removed = RemovedPolicy("TabularStream", {"estimator": estimator})
    cfg["policy"] = replace(policy, **old)
    return removed


def decode(
    cls: type[TabularStream], data: bytes | bytearray | memoryview, *, allow_seeded: bool
) -> TabularStream:
    """The stream of :meth:`TabularStream.from_bytes` (``ValueError`` for corrupt data)."""
    if not bytes(data[: len(_MAGIC)]) == _MAGIC:
        raise ValueError("not a dpstream TabularStream state")
    try:
        npz = np.load(io.BytesIO(bytes(data[len(_MAGIC) :])), allow_pickle=False)
        arrays = {k: npz[k] for k in npz.files}
        header = json.loads(arrays["header"].tobytes())
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile) as e:
        raise ValueError(f"corrupt TabularStream state: {e}") from None
    if header.get("format") not in (1, _FORMAT, 3):
        raise ValueError(f"unsupported TabularStream state format {header.get('format')!r}")
    domain = Domain(header["domain"])
    cfg, removed = _options(header)
    rng_state = arrays["rng"].tobytes() if "rng" in arrays else None
    if rng_state is not None and not allow_seeded:
        raise ValueError(seeded_refusal("TabularStream"))
    model = ModelOptions(**{k: cfg.pop(k) for k in _MODEL_OPTIONS if k in cfg})
    s = cls(domain, Fraction(cfg.pop("epsilon")), model=model, rng=Rng(), **cfg)
    # The constructor drew the sampling seed: restore the generator after it.
    s._rng = Rng._from_checkpoint_state(rng_state)
    s._keys = _load_keys(s, arrays)
    if header["format"] == 3:
        return _restore_epochs(s, header, arrays)
    s._t, s._size = int(header["t"]), int(header["size"])
    s._exact_size = int(header.get("exact_size", s._size))  # old states: exact sizes
    s._insert_only = bool(header.get("insert_only", True))
    if s._size < 0 or (s._public_sizes and s._size != s._exact_size):
        raise ValueError("corrupt TabularStream state: sizes")
    if removed is not None:
        return _removed_stream(s, removed, header, arrays, domain)
    if s._size_counter is not None:
        if "size_counter" not in arrays:
            if s._t:
                raise ValueError("corrupt TabularStream state: no size counter")
            s._size_counter = Counter(
                s._counter_kind, s._budget.size, 1, horizon=s._horizon,
                rng=counter_rng(s._keys, None),
            )  # fmt: skip
        else:
            c = Counter.from_bytes(
                arrays["size_counter"].tobytes(), rng=counter_rng(s._keys, None),
                allow_seeded=allow_seeded,
            )  # fmt: skip
            if c.kind != s._counter_kind or c.epsilon != s._budget.size or c.dim != 1:
                raise ValueError("corrupt TabularStream state: size counter")
            s._size_counter = c
    s._sample_rng.bit_generator.state = header["sample_rng"]
    _load_selections(s, header, arrays)
    for i in range(len(s._workloads)):
        s._synthetic_marginals[i] = np.asarray(arrays[f"marginal_{i}"], dtype=np.float64)
        s._remainder[i] = np.asarray(arrays[f"remainder_{i}"], dtype=np.float64)
        name = _counter_name(i)
        if name in arrays:
            data = arrays[name].tobytes()
            c = Counter.from_bytes(data, rng=counter_rng(s._keys, i), allow_seeded=allow_seeded)
            if c.kind != s._counter_kind or c.epsilon != s._budget.counter_epsilon:
                raise ValueError(f"corrupt TabularStream state: {name}")
            s._counters[i] = c
    _load_models(s, header, arrays, domain)
    _load_rows(s, arrays)
    return s


def _load_rows(s: TabularStream, arrays: Mapping[str, Any]) -> None:
    """The tables :class:`Baseline` appended, one per step."""
    k = 0
    while f"rows_{k}" in arrays:
        s._baseline_rows.append(np.asarray(arrays[f"rows_{k}"], dtype=np.int64))
        k += 1


def _load_keys(s: TabularStream, arrays: Mapping[str, Any]) -> KeyRing:
    """The stored key ring; for a state written before rings were stored, a ring drawn
    from the restored generator (fresh from the operating system unless seeded)."""
    if "keys" not in arrays:
        return KeyRing(s._rng)
    keys = KeyRing.from_bytes(arrays["keys"].tobytes())
    if keys.seeded != s._rng.seeded:
        raise ValueError("corrupt TabularStream state: key ring")
    return keys


def _load_selections(
    s: TabularStream, header: Mapping[str, Any], arrays: Mapping[str, Any]
) -> None:
    """The selection counts and the last step's selections (public values)."""
    if "selections" in arrays:  # states written before selections were kept have zeros
        sel = np.asarray(arrays["selections"], dtype=np.int64)
        last = [int(i) for i in header.get("last_selected", [])]
        if sel.shape != s._selections.shape or np.any(sel < 0):
            raise ValueError("corrupt TabularStream state: selection counts")
        if any(not 0 <= i < sel.size for i in last):
            raise ValueError("corrupt TabularStream state: last selections")
        s._selections, s._last_selected = sel.copy(), last


def _load_models(
    s: TabularStream, header: Mapping[str, Any], arrays: Mapping[str, Any], domain: Domain
) -> None:
    """The model and the earlier components of a mixture release."""
    s._model = _get_model(arrays, "", header, domain)
    mixture = header.get("mixture", [])
    if mixture and (s._model is None or not isinstance(mixture, list)):
        raise ValueError("corrupt TabularStream state: mixture")
    s._mixture = [_get_model(arrays, f"mix{m}_", info, domain) for m, info in enumerate(mixture)]  # type: ignore[misc]
    if any(c is None for c in s._mixture):
        raise ValueError("corrupt TabularStream state: mixture")


def _removed_stream(
    s: TabularStream, removed: RemovedPolicy, header: Mapping[str, Any],
    arrays: dict[str, Any], domain: Domain,
) -> TabularStream:  # fmt: skip
    """A stream of a state whose options were removed: it keeps the public values, the
    model (and mixture) and the sampling generator, so that :meth:`synthetic_codes`
    re-releases the last table, and refuses to step (:attr:`RemovedPolicy.message`)."""
    s._sample_rng.bit_generator.state = header["sample_rng"]
    _load_selections(s, header, arrays)
    _load_models(s, header, arrays, domain)
    _load_rows(s, arrays)
    if s._size and s._model is None and not s._baseline_rows:
        raise ValueError("corrupt TabularStream state: no model")
    s._policy = removed
    s._removed = removed
    s._config = dict(header["config"])
    s._stored = (dict(header), dict(arrays))
    return s


class Checkpointed:
    """:meth:`to_bytes` and :meth:`from_bytes` of :class:`~dpstream.tabular.TabularStream`."""

    def to_bytes(self) -> bytes:
        """The whole state, for a checkpoint (versioned; :mod:`dpstream.tabular.checkpoint`).

        **Sensitive**: the counters hold exact sums, the header the exact table size and
        the bytes the stream's secret master key (:mod:`dpstream.tabular.keys`) — protect
        them like the raw data. Loaded any number of times and fed the same batches, the
        stream releases the same tables, byte for byte; other batches give independent
        noise. A checkpoint supports one continuation."""
        return encode(self)  # type: ignore[arg-type]

    @classmethod
    def from_bytes(cls, data: bytes, *, allow_seeded: bool = False) -> Self:
        """Rebuild a stream from :meth:`to_bytes` output; ``ValueError`` if corrupt.

        A seeded stream's checkpoint is refused unless ``allow_seeded=True`` (it resumes
        the seeded generator: reproducible, **not private**). A state written before
        policies existed is migrated (:func:`policy_from_options`) to the policy that
        continues it exactly; one written before ``public_sizes`` existed loads as
        ``public_sizes=True`` at twice its ε, with a :class:`UserWarning` saying why. A
        state whose options dpstream 0.2 removed (the earlier default policy, a fit that is
        no option any more) loads as a stream that re-releases its last table and refuses
        to step, naming them."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        try:
            return decode(cls, data, allow_seeded=bool(allow_seeded))  # type: ignore[arg-type,return-value]
        except (KeyError, TypeError, AttributeError, IndexError, NotImplementedError) as e:
            # A damaged container or header fields of the wrong type or shape: corrupt data.
            raise ValueError(f"corrupt TabularStream state: {type(e).__name__}: {e}") from None


# ----------------------------------------------------------------------------- undo


@dataclass(frozen=True)
class Undo:
    """The state before a step (:func:`undo_point`)."""

    keys: KeyRing
    counters: list[bytes | None]
    size_counter: bytes | None
    sample_rng: Mapping[str, Any]
    fields: dict[str, Any]


def undo_point(s: TabularStream) -> Undo:
    """What :func:`roll_back` needs to restore the state before a step."""
    counters = [None if c is None else c.to_bytes() for c in s._counters]
    names = (
        *("_model", "_mixture", "_synthetic_marginals", "_remainder"),
        *("_selections", "_last_selected", "_baseline_rows"),
    )
    return Undo(
        keys=s._keys.copy(),
        counters=counters,
        size_counter=None if s._size_counter is None else s._size_counter.to_bytes(),
        sample_rng=s._sample_rng.bit_generator.state,
        fields={n: _copy(getattr(s, n)) for n in names},
    )


def roll_back(s: TabularStream, undo: Undo) -> None:
    """Restore the state saved by :func:`undo_point` (after a failed step), the key
    ring's digest included: a retry of the same batch draws the same noise."""
    s._keys = undo.keys
    for i, data in enumerate(undo.counters):
        s._counters[i] = None if data is None else Counter.from_bytes(
            data, rng=counter_rng(s._keys, i), allow_seeded=s.seeded
        )  # fmt: skip
    if undo.size_counter is not None:
        s._size_counter = Counter.from_bytes(
            undo.size_counter, rng=counter_rng(s._keys, None), allow_seeded=s.seeded
        )
    s._sample_rng.bit_generator.state = undo.sample_rng
    for name, value in undo.fields.items():
        setattr(s, name, value)


def _copy(value: Any) -> Any:
    """A copy of a state field deep enough that a step cannot change it in place."""
    if isinstance(value, (np.ndarray, LazyTables)):
        return value.copy()
    return list(value) if isinstance(value, list) else value
