"""The fit of a graphical model to noisy marginals (:func:`estimate_pgm`).

Entropic mirror descent with an Armijo line search on the loss
``Σ_m ||μ_{C_m} − y_m||² / σ_m²`` (Algorithm 1 of McKenna, Sheldon, Miklau 2019; the
loss is convex in the marginals ``μ``), optionally with Nesterov momentum.
Post-processing of released measurements: no privacy noise, no privacy cost. Units:
measurements are counts; the loss is dimensionless.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, NamedTuple

import numpy as np

from dpstream.tabular.estimation import (
    Clique,
    FloatArray,
    Measurement,
    check_clique,
    check_clique_in,
    check_measurements,
    check_sizes,
    check_total,
    clique_shape,
)
from dpstream.tabular.model.factors import marginalize
from dpstream.tabular.model.graphical_model import GraphicalModel
from dpstream.tabular.model.growth import model_nodes
from dpstream.tabular.model.inference import propagate
from dpstream.tabular.model.junction_tree import (
    MAX_CLIQUE_CELLS,
    JunctionTree,
    check_node_cells,
    node_of,
    tree_of_nodes,
)


def estimate_pgm(
    sizes: Sequence[int],
    measurements: Sequence[Measurement],
    total: float,
    *,
    iters: int = 200,
    warm_start: GraphicalModel | None = None,
    extra_cliques: Iterable[Sequence[int]] = (),
    max_clique_cells: int = MAX_CLIQUE_CELLS,
    tol: float | None = None,
    method: Literal["accelerated", "mirror-descent"] = "accelerated",
) -> GraphicalModel:
    """Fit a graphical model with marginals close to the measurements (post-processing).

    Minimises ``L(μ) = Σ_m ||μ_{C_m} − y_m||² / σ_m²`` over models ``total · P_θ`` whose
    cliques are those of the measurements, of ``extra_cliques`` and of ``warm_start``.
    Each step is an entropic mirror-descent step ``θ_C ← θ_C − α ∂L/∂μ_C`` (Algorithm 1
    of McKenna et al. 2019), kept only if it lowers ``L`` by at least half the decrease
    its gradient predicts (Armijo): ``α`` then grows by 10 %, and halves on a rejected
    step. ``method="accelerated"`` (default) takes the step from a Nesterov
    extrapolation of ``θ`` (FISTA momentum), restarting the momentum whenever the loss
    would rise (O'Donoghue and Candès 2015); ``"mirror-descent"`` takes plain steps.
    The first ``α`` is ``1 / (total · Σ_m 1/σ_m²)``, the inverse smoothness constant of
    ``L`` on the simplex (McKenna et al.), times ``warm_start.step_scale`` when
    warm-starting.

    Args:
        sizes: domain size of each column.
        measurements: the released noisy marginals (counts).
        total: the total count of the model (positive).
        iters: budget of belief propagations (one per trial point, the extrapolated
            points of the accelerated method included).
        warm_start: a previous fit over the same columns; its potentials start ``θ``
            (each is kept on its clique, which stays in the model).
        extra_cliques: cliques to keep in the model without measuring them.
        max_clique_cells: refuse (ValueError) a junction tree with a larger node.
        tol: stop early once ten propagations lower the loss by at most
            ``tol · max(loss, 1)``; ``None`` spends all ``iters``.
        method: ``"accelerated"`` or ``"mirror-descent"``.

    The returned model records ``iterations`` (propagations spent), ``losses`` (the
    loss of the current iterate after each, ``losses[0]`` at the start) and
    ``step_scale`` (the final ``α`` over the first, at least 1, for the next warm start).
    """
    sz = check_sizes(sizes)
    meas = check_measurements(sz, measurements)
    tot = check_total(total)
    if isinstance(iters, bool) or not isinstance(iters, (int, np.integer)) or iters < 0:
        raise ValueError(f"iters must be a non-negative int, got {iters!r}")
    if tol is not None and not (math.isfinite(tol) and tol >= 0):
        raise ValueError(f"tol must be a non-negative number or None, got {tol!r}")
    if method not in ("accelerated", "mirror-descent"):
        raise ValueError(f"method must be 'accelerated' or 'mirror-descent', got {method!r}")
    theta: dict[Clique, FloatArray] = {}
    scale = 1.0
    if warm_start is not None:
        if not isinstance(warm_start, GraphicalModel):
            raise ValueError(
                f"warm_start must be a GraphicalModel, got {type(warm_start).__name__}"
            )
        if warm_start.sizes != sz:
            raise ValueError(
                f"warm_start has sizes {warm_start.sizes}, but the domain has sizes {sz}"
            )
        theta = {c: t.copy() for c, t in warm_start._theta.items()}
        scale = warm_start.step_scale
    for i, c in enumerate(extra_cliques):
        cl = check_clique(c, f"extra_cliques[{i}]")
        check_clique_in(cl, sz, f"extra_cliques[{i}]")
        theta.setdefault(cl, np.zeros(clique_shape(sz, cl)))
    for m in meas:
        theta.setdefault(m.clique, np.zeros(clique_shape(sz, m.clique)))
    base = warm_start.junction_tree if warm_start is not None else None
    nodes = model_nodes(sz, list(theta), base)
    check_node_cells(sz, nodes, max_clique_cells)
    jt = tree_of_nodes(sz, nodes)
    fit = _Fit(sz, meas, tot, jt, theta)
    inv_var = sum(
        1.0 / m.stddev**2 if isinstance(m.stddev, float) else float(np.mean(m.stddev**-2.0))
        for m in meas
    )
    alpha0 = 1.0 / (tot * inv_var) if inv_var > 0 else 0.0
    alpha = fit.run(
        alpha0 * scale, int(iters) if meas else 0, accelerated=method == "accelerated", tol=tol
    )
    point = fit.current
    model = GraphicalModel._from_fit(sz, point.theta, tot, jt, max_clique_cells, point.probs)
    model.iterations = len(fit.losses) - 1
    model.losses = tuple(fit.losses)
    model.step_scale = max(1.0, alpha / alpha0) if alpha0 > 0 else scale
    return model


#: Step-size factors of the line search (after an accepted / a rejected step).
_GROW = 1.1
_SHRINK = 0.5


class _Point(NamedTuple):
    """Potentials and what one belief propagation computes from them."""

    theta: dict[Clique, FloatArray]
    probs: list[FloatArray]
    mu: dict[Clique, FloatArray]
    loss: float
    grad: dict[Clique, FloatArray]


class _Fit:
    """The optimisation: evaluation of potentials, and the line-search loop."""

    def __init__(
        self,
        sizes: tuple[int, ...],
        measurements: list[Measurement],
        total: float,
        jt: JunctionTree,
        theta: dict[Clique, FloatArray],
    ) -> None:
        self.sizes, self.meas, self.total, self.jt = sizes, measurements, total, jt
        self.assign = {c: node_of(jt, sizes, c) for c in theta}
        self.measured = sorted({m.clique for m in measurements})
        self.current = self.evaluate(theta)
        self.losses = [self.current.loss]

    def evaluate(self, theta: dict[Clique, FloatArray]) -> _Point:
        """Belief propagation at ``theta``: node tables, measured marginals, loss, gradient."""
        probs, _ = propagate(self.jt, self.sizes, theta, self.assign)
        mu: dict[Clique, FloatArray] = {}
        for c in self.measured:
            i = self.assign[c]
            marg = marginalize(probs[i], self.jt.nodes[i], c)
            mu[c] = np.asarray(marg).reshape(-1) * self.total
        loss = 0.0
        grad = {c: np.zeros_like(v) for c, v in mu.items()}
        for m in self.meas:
            diff = mu[m.clique] - m.values
            if isinstance(m.stddev, float):
                w = 1.0 / m.stddev**2
                loss += w * float(diff @ diff)
                grad[m.clique] += 2.0 * w * diff
            else:  # one standard deviation per count
                weighted = diff / np.square(m.stddev)
                loss += float(diff @ weighted)
                grad[m.clique] += 2.0 * weighted
        return _Point(theta, probs, mu, loss, grad)

    def _moved(
        self, base: dict[Clique, FloatArray], direction: Mapping[Clique, FloatArray], t: float
    ) -> dict[Clique, FloatArray]:
        """``base + t · direction`` on the measured cliques (the others never move)."""
        out = dict(base)
        for c in self.measured:
            out[c] = base[c] + t * direction[c].reshape(base[c].shape)
        return out

    def _converged(self, tol: float | None) -> bool:
        h = self.losses
        return tol is not None and len(h) > 10 and h[-11] - h[-1] <= tol * max(h[-1], 1.0)

    def run(self, alpha: float, budget: int, *, accelerated: bool, tol: float | None) -> float:
        """Spend up to ``budget`` propagations; returns the final step size."""
        spent = 0
        previous = self.current.theta  # θ_{k-1}; equal to θ_k means no momentum
        t_k = 1.0
        while spent < budget and not self._converged(tol):
            cur = self.current
            t_next = (1.0 + math.sqrt(1.0 + 4.0 * t_k * t_k)) / 2.0 if accelerated else 1.0
            beta = (t_k - 1.0) / t_next
            base = cur
            if beta > 0:
                momentum = {c: cur.theta[c] - previous[c] for c in self.measured}
                base = self.evaluate(self._moved(cur.theta, momentum, beta))
                spent += 1
                self.losses.append(cur.loss)
            accepted: _Point | None = None
            while spent < budget:
                neg_grad = {c: -g for c, g in base.grad.items()}
                trial = self.evaluate(self._moved(base.theta, neg_grad, alpha))
                spent += 1
                predicted = sum(
                    float(base.grad[c] @ (base.mu[c] - trial.mu[c])) for c in self.measured
                )
                if base.loss - trial.loss >= 0.5 * predicted and trial.loss <= base.loss:
                    alpha *= _GROW
                    accepted = trial
                    break
                alpha *= _SHRINK
                self.losses.append(cur.loss)
            if accepted is None:
                break
            previous = cur.theta
            if accepted.loss <= cur.loss:
                self.current, t_k = accepted, t_next
            else:  # the momentum overshot: drop the step and restart from θ_k
                t_k = 1.0
            self.losses.append(self.current.loss)
        return alpha
