"""The events an audit counts: automatic ones binned from the outputs (half-lines, single
values, histogram cells, or ``{output == v}``), or predicates given by the caller."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

Predicate = Callable[[Any], Any]
EventsArg = Literal["auto"] | Sequence[Predicate] | Mapping[str, Predicate]


@dataclass(frozen=True)
class Event:
    """An automatic event on the feature matrix (or on categorical keys)."""

    kind: Literal["le", "ge", "eq", "cell", "is"]
    feature: int
    low: float
    high: float
    key: Hashable = None

    def name(self, features: list[str]) -> str:
        if self.kind == "is":
            return f"output == {self.key!r}"
        f = features[self.feature]
        lo, hi = _fmt(self.low), _fmt(self.high)
        if self.kind == "le":
            return f"{f} <= {hi}"
        if self.kind == "ge":
            return f"{f} >= {lo}"
        if self.kind == "eq":
            return f"{f} == {lo}"
        return f"{lo} < {f} <= {hi}"

    def count(self, x: Any) -> int:
        if self.kind == "is":
            return sum(1 for o in x if o == self.key)
        col = x[:, self.feature]
        if self.kind == "le":
            return int(np.count_nonzero(col <= self.high))
        if self.kind == "ge":
            return int(np.count_nonzero(col >= self.low))
        if self.kind == "eq":
            return int(np.count_nonzero(col == self.low))
        return int(np.count_nonzero((col > self.low) & (col <= self.high)))


def _fmt(v: float) -> str:
    """A threshold as written in an event's name: integers exactly, others to 8 digits."""
    if math.isfinite(v) and v == math.floor(v) and abs(v) < 2**53:
        return str(int(v))
    return f"{v:.8g}"


class Outputs:
    """Turns raw outputs into what events are evaluated on.

    Numeric outputs of one shape become an ``(n, F)`` float matrix: the
    coordinates, plus their max, min and sum for vectors. Anything else becomes
    a list of hashable keys (the output itself, or its ``repr``).
    """

    def __init__(self) -> None:
        self.numeric: bool | None = None
        self.shape: tuple[int, ...] | None = None
        self.names: list[str] = []

    def convert(self, outputs: Any, n: int) -> Any:
        arr: np.ndarray[Any, Any] | None
        try:
            arr = np.asarray(outputs)
        except (ValueError, TypeError):
            arr = None
        numeric = (
            arr is not None
            and arr.ndim >= 1
            and arr.shape[0] == n
            and (arr.dtype == np.bool_ or np.issubdtype(arr.dtype, np.number))
            and not np.issubdtype(arr.dtype, np.complexfloating)
        )
        if self.numeric is None:
            self.numeric = numeric
            if numeric:
                assert arr is not None
                self._set_names(arr.shape[1:])
        if self.numeric:
            if not numeric or arr is None or arr.shape[1:] != self.shape:
                raise ValueError(
                    "the mechanism's outputs changed type or shape between runs; automatic "
                    "events need outputs of one numeric shape (or give events=...)"
                )
            x = arr.reshape(n, -1).astype(np.float64)
            if x.shape[1] > 1:
                with np.errstate(invalid="ignore", over="ignore"):
                    x = np.column_stack([x, x.max(axis=1), x.min(axis=1), x.sum(axis=1)])
            return x
        return [_key(o) for o in _as_list(outputs, n)]

    def _set_names(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        if not shape:
            self.names = ["x"]
            return
        cells = [f"x[{', '.join(map(str, i))}]" for i in np.ndindex(*shape)]
        self.names = cells + (["max(x)", "min(x)", "sum(x)"] if len(cells) > 1 else [])


def _as_list(outputs: Any, n: int) -> list[Any]:
    out = list(outputs)
    if len(out) != n:
        raise ValueError(f"the mechanism returned {len(out)} outputs for {n} runs")
    return out


def _key(o: Any) -> Hashable:
    if isinstance(o, np.ndarray):
        return repr(o.tolist())
    try:
        hash(o)
    except TypeError:
        return repr(o)
    return o  # type: ignore[no-any-return]


def candidate_events(x_a: Any, x_b: Any, names: list[str], bins: int) -> list[Event]:
    """Automatic events from the selection runs of both sides (pooled)."""
    if isinstance(x_a, list):
        seen: dict[Hashable, int] = {}
        for o in [*x_a, *x_b]:
            seen[o] = seen.get(o, 0) + 1
        keys = sorted(seen, key=lambda o: -seen[o])[: 16 * bins]
        return [Event("is", 0, 0.0, 0.0, k) for k in keys]
    events: list[Event] = []
    pooled = np.concatenate([x_a, x_b])
    for f in range(pooled.shape[1]):
        col = pooled[:, f]
        col = col[~np.isnan(col)]
        if col.size == 0:
            continue
        values = np.unique(col)
        if values.size <= 2 * bins:
            events += [Event("eq", f, float(v), float(v)) for v in values]
            cuts = values
        else:
            levels = np.linspace(0.0, 1.0, bins + 1)[1:-1]
            cuts = np.unique(np.quantile(col, levels, method="inverted_cdf"))
            edges = [-np.inf, *cuts.tolist(), np.inf]
            events += [
                Event("cell", f, float(lo), float(hi)) for lo, hi in itertools.pairwise(edges)
            ]
        events += [Event("le", f, -np.inf, float(t)) for t in cuts[:-1]]
        events += [Event("ge", f, float(t), np.inf) for t in cuts[1:]]
    return events


def event_counts(events: list[Event], x: Any) -> npt.NDArray[np.int64]:
    """Counts of every automatic event, vectorised per feature."""
    if isinstance(x, list):
        return np.array([e.count(x) for e in events], dtype=np.int64)
    out = np.empty(len(events), dtype=np.int64)
    cache: dict[int, tuple[npt.NDArray[np.float64], int]] = {}
    for i, e in enumerate(events):
        if e.feature not in cache:
            col = x[:, e.feature]
            col = np.sort(col[~np.isnan(col)])
            cache[e.feature] = (col, col.size)
        s, size = cache[e.feature]
        if e.kind == "le":
            out[i] = np.searchsorted(s, e.high, side="right")
        elif e.kind == "ge":
            out[i] = size - np.searchsorted(s, e.low, side="left")
        elif e.kind == "eq":
            out[i] = np.searchsorted(s, e.low, side="right") - np.searchsorted(
                s, e.low, side="left"
            )
        else:
            out[i] = np.searchsorted(s, e.high, side="right") - np.searchsorted(
                s, e.low, side="right"
            )
    return out


def predicate_count(pred: Predicate, outputs: Any, n: int, batched: bool) -> int:
    if batched:
        hits = np.asarray(pred(outputs))
        if hits.shape != (n,):
            raise ValueError(
                f"with batch_size, an event must return a boolean array of shape ({n},), "
                f"got shape {hits.shape}"
            )
        return int(np.count_nonzero(hits))
    return sum(1 for o in outputs if pred(o))


def predicate_name(p: Predicate, i: int) -> str:
    name = getattr(p, "__name__", "")
    return name if name and name != "<lambda>" else f"event[{i}]"


def given_counts(
    given: list[tuple[str, Predicate]], chunks: list[tuple[Any, int]], batch: int | None
) -> npt.NDArray[np.int64]:
    out = np.zeros(len(given), dtype=np.int64)
    for outputs, m in chunks:
        out += np.array(
            [predicate_count(p, outputs, m, batch is not None) for _, p in given], dtype=np.int64
        )
    return out
