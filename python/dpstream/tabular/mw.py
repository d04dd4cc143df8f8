"""Multiplicative weights over the full domain (the fit step of MWEM, Hardt et al. 2012).

The model is a table ``h`` of counts on every cell of the domain, summing to the total.
Each update (Section 4.2.1 of Kumar, Strohmer and Vershynin) takes one measured
marginal ``m`` of clique ``q`` and sets

    h(x) ∝ h(x) · exp(q(x) · (m − q(h)) / (2 |f|)),

that is, every cell is reweighted by ``exp((m_c − q(h)_c) / (2·total))`` where ``c`` is
its cell of the marginal; ``h`` is then rescaled to the total ``|f|``. This is
**post-processing**: no privacy noise and no privacy cost. Only small domains fit in
memory: :func:`estimate_mw` refuses domains of more than ``10**7`` cells.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dpstream.tabular.estimation import (
    FloatArray,
    IntArray,
    Measurement,
    check_clique,
    check_clique_in,
    check_measurements,
    check_sample_method,
    check_sample_size,
    check_sizes,
    check_total,
    round_rows,
    sample_rows,
)

#: The largest domain (cells) :func:`estimate_mw` accepts.
MAX_DOMAIN_CELLS = 10**7


class DenseModel:
    """Counts on every cell of a small domain (an array of shape ``sizes``)."""

    def __init__(self, sizes: Sequence[int], counts: npt.ArrayLike) -> None:
        self._sizes = check_sizes(sizes)
        arr = np.array(counts, dtype=np.float64, copy=True)
        cells = math.prod(self._sizes)
        if arr.size != cells:
            raise ValueError(f"counts has {arr.size} cells, but the domain has {cells}")
        if not np.all(np.isfinite(arr)) or np.any(arr < 0) or arr.sum() <= 0:
            raise ValueError("counts must be finite, non-negative and not all zero")
        self._counts = arr.reshape(self._sizes)
        self._counts.setflags(write=False)
        self.iterations = 0
        self.losses: tuple[float, ...] = ()

    @property
    def sizes(self) -> tuple[int, ...]:
        return self._sizes

    @property
    def total(self) -> float:
        return float(self._counts.sum())

    @property
    def counts(self) -> FloatArray:
        """The counts, shaped by ``sizes`` (read-only)."""
        return self._counts

    def __repr__(self) -> str:
        return f"DenseModel(sizes={self._sizes}, total={self.total:g})"

    def marginal(self, clique: Sequence[int]) -> FloatArray:
        """Counts of the marginal of ``clique``, flattened in C order."""
        cl = check_clique(clique)
        check_clique_in(cl, self._sizes)
        other = tuple(j for j in range(len(self._sizes)) if j not in cl)
        return np.asarray(np.sum(self._counts, axis=other), dtype=np.float64).reshape(-1)

    def sample(self, n: int, rng: np.random.Generator, *, method: str = "iid") -> IntArray:
        """``n`` rows ``(n, d)`` (int64 codes) with probabilities ``counts/total``.

        ``method="iid"``: independent draws. ``method="round"``: controlled rounding
        over the whole domain (one block, :func:`~dpstream.tabular.estimation.round_rows`):
        each cell gets the floor or the ceiling of ``n·counts/total`` rows, exactly
        ``n`` in all, unbiased; the rows are in a random order. Post-processing.
        """
        n = check_sample_size(n)
        flat_counts = self._counts.reshape(-1)
        if check_sample_method(method) == "round":
            flat = round_rows(flat_counts, None, n, rng)
            flat = flat[rng.permutation(n)]
        else:
            flat = sample_rows(flat_counts, n, rng)
        cols = np.unravel_index(flat, self._sizes)
        return np.stack(cols, axis=1).astype(np.int64).reshape(n, len(self._sizes))


def estimate_mw(
    sizes: Sequence[int],
    measurements: Sequence[Measurement],
    total: float,
    *,
    iters: int = 100,
    warm_start: npt.ArrayLike | DenseModel | None = None,
) -> DenseModel:
    """MWEM's multiplicative-weights fit (post-processing), ``iters`` passes over the list.

    Starts from ``warm_start`` (counts or a :class:`DenseModel`, rescaled to ``total``;
    cells at zero stay at zero) or from the uniform table, and applies the update of
    the module docstring once per measurement per pass, in order. The noise level
    ``stddev`` is not used (as in MWEM). ``model.losses`` records the loss
    ``Σ ||μ_C − y_C||² / σ_C²`` before the first and after each pass.
    """
    sz = check_sizes(sizes)
    cells = math.prod(sz)
    if cells > MAX_DOMAIN_CELLS:
        raise ValueError(
            f"the domain with sizes {sz} has {cells} cells > {MAX_DOMAIN_CELLS}; "
            "multiplicative weights keeps every cell: use estimate_pgm"
        )
    meas = check_measurements(sz, measurements)
    tot = check_total(total)
    if isinstance(iters, bool) or not isinstance(iters, (int, np.integer)) or iters < 0:
        raise ValueError(f"iters must be a non-negative int, got {iters!r}")
    if warm_start is None:
        h = np.full(sz, tot / cells)
    else:
        start = warm_start.counts if isinstance(warm_start, DenseModel) else warm_start
        h = DenseModel(sz, start).counts * 1.0
        h *= tot / h.sum()
    d = len(sz)
    others = {m.clique: tuple(j for j in range(d) if j not in m.clique) for m in meas}
    shapes = {m.clique: [sz[j] if j in m.clique else 1 for j in range(d)] for m in meas}

    def loss() -> float:
        out = 0.0
        for m in meas:
            diff = (np.sum(h, axis=others[m.clique]).reshape(-1) - m.values) / m.stddev
            out += float(diff @ diff)
        return out

    losses = [loss()]
    for _ in range(iters):
        for m in meas:
            est = np.sum(h, axis=others[m.clique]).reshape(-1)
            expo = (m.values - est) / (2.0 * tot)
            h *= np.exp(expo - expo.max()).reshape(shapes[m.clique])
            h *= tot / h.sum()
        losses.append(loss())
    model = DenseModel(sz, h)
    model.iterations = iters
    model.losses = tuple(losses)
    return model
