"""Statistical privacy audits: try to falsify a differential privacy claim.

:func:`audit` runs a mechanism many times on two neighbouring inputs ``a`` and
``b``, counts how often each event ``E`` of the outputs happens under each,
and turns the counts into a high-confidence **lower bound** on the privacy
loss

    ``max over E of  ln((P_a(E) − δ) / P_b(E))``  and  ``ln((P_b(E) − δ) / P_a(E))``

from one-sided Clopper–Pearson bounds on the two probabilities (Bonferroni
over every bound used). If the mechanism is (ε, δ)-DP for these neighbours,
every such ratio is at most ε, so a lower bound above ε **falsifies** the
claim with confidence ``1 − alpha``. This is the approach of Google's DP
stochastic tester and of DP-Auditorium, with exact binomial bounds in place
of asymptotics.

What a result means:

* ``passed=False`` (lower bound > ε): with confidence ``1 − alpha`` the
  mechanism is **not** (ε, δ)-DP for these neighbours — a bug, or a claim
  that is too strong. If the mechanism does satisfy the claim, this happens
  with probability at most ``alpha`` (the false-alarm rate; default 1e-6)
  over the choice of seed.
* ``passed=True``: the audit **failed to falsify** the claim. It is not a
  proof of privacy: only the given pair of neighbours and the events tried
  were examined, and a violation smaller than the sampling error of ``runs``
  runs (roughly ``5 / sqrt(runs · P(E))`` in the log ratio at the default
  ``alpha``) cannot be seen. Choose neighbours and events where a bug would
  show (worst-case inputs, the statistics the mechanism's analysis is tight
  for); :attr:`AuditResult.lower_bound` close to ε means the audit is sharp.

Events are either given (predicates on the outputs) or chosen automatically:
scalar and vector outputs are binned into half-lines ``{x <= t}``,
``{x >= t}``, single values ``{x == v}`` and histogram cells ``{s < x <= t}``
of each coordinate (and, for vectors, of their max, min and sum), other
outputs into the events ``{output == v}``. The automatic choice looks only at
a **separate** set of runs (``selection_runs``, with their own seeds), keeps
the ``max_events`` events that promise the largest bound, and the audit
counts them on the remaining runs; the choice therefore cannot overfit the
runs that decide the result, and the Bonferroni correction counts only the
chosen events.

Reproducibility: every run gets its own seeded :class:`dpstream.Rng` derived
from ``seed``, the side and the run number (SHA-256), so an audit repeats
exactly. Seeded noise gives **no privacy**: audit outputs are for testing and
must never be published. The mechanism must take all its randomness from the
``rng`` it is given (and must not modify its input).

Clopper–Pearson bounds are computed here (no SciPy needed) from the
regularized incomplete beta function, evaluated by its continued fraction in
log space and inverted on the log-odds scale inside a bracket (Newton steps,
which stay on the conservative side because the function is concave there,
safeguarded by bisection); every bound is the bracket's conservative end,
widened by a relative 1e-8, more than the evaluation error (below 1e-9;
checked against SciPy in the tests).

Modules, each importing only those above it: :mod:`~dpstream.audit.incomplete_beta`,
:mod:`~dpstream.audit.bounds` (Clopper–Pearson), :mod:`~dpstream.audit.results`,
:mod:`~dpstream.audit.events`, :mod:`~dpstream.audit.runner` (:func:`audit`).
"""

from dpstream.audit.bounds import clopper_pearson
from dpstream.audit.results import AuditResult, EventBound
from dpstream.audit.runner import audit

__all__ = ["AuditResult", "EventBound", "audit", "clopper_pearson"]
