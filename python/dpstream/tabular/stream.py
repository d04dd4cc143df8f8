"""A private synthetic table that follows a stream of insertions and deletions.

Kumar, Strohmer and Vershynin, "Differentially private synthetic high-dimensional tabular
stream": at every time ``t`` the stream receives a batch of inserted (and optionally
deleted) records — the differential data ``∇f_t`` — and releases a synthetic table
``g_t`` of the current size whose ``k``-way marginals follow the real table
``f_t = Σ_{τ≤t} ∇f_τ``.

**Policies** (:mod:`dpstream.tabular.policy`). The default,
:class:`~dpstream.tabular.policy.Adaptive`, measures every column of every batch and
releases one MST model per epoch of batches; its mechanism, ε split and privacy argument
are in :mod:`dpstream.tabular.epochs` (insertions only). :class:`~dpstream.tabular.policy.Paper`
is Algorithm 3 as printed, with the workloads of Section 7.2: at each step ``k`` workloads
are selected one by one by permute-and-flip with ``ε'/2k`` each, on the score (3) against
the current model (:mod:`dpstream.tabular.selection`); the selected workload's histogram
of ``∇f_t`` is fed to its own continual counter (``ε'/2k``), whose release plus the
model's values for the rows it did not count is a measurement; the model is refitted after
each selection and the release is the mixture of the step's models, sampled to the
released size. :class:`~dpstream.tabular.policy.Baseline` (Algorithm 2, StreamingMWEM):
each step runs an independent select–measure–fit on ``∇f_t`` alone (discrete Laplace
noise per selected histogram) and appends the fitted table to the previous one;
insertions only.

**Privacy** of ``Paper`` and ``Baseline`` (Theorem 6.1, with the table's size released
privately):

* Neighbouring streams (default): one stream has one more record than the other, in the
  insertions or the deletions of one time step (add/remove one record).
* Guarantee: the whole sequence of synthetic tables, their sizes (row counts) and
  :attr:`TabularStream.size` is ε-DP. Public: the domain, the options and the policy,
  the time index, and whether a step is given a ``deletions`` argument (not its records).
* The table's size is released by a scalar continual counter of each batch's net rows
  (``ε·SIZE_SHARE`` = ``ε/20``, the workload counters' kind and horizon;
  :mod:`dpstream.tabular.table_size`); everything that
  needs a size reads that release. It is post-processed: a running maximum while the
  stream is insert-only, else clipped at 0. Deleting a record that was never inserted is
  not refused under add/remove (a refusal would depend on the private size): the exact
  counts of its cells and the exact size go below what they were, the released counts
  and size follow them (the size clipped at 0). With ``public_sizes`` the sizes are
  public and a step deleting more records than the table holds is refused.
* Split (:func:`~dpstream.tabular.selection.split_budget`, one place; ``ε' = ε − ε/20``):
  ``ε'/2`` to selection (``k`` selections of ``ε'/2k`` per step, each reading only
  ``∇f_t``, the released sizes and earlier releases) and ``ε'/2`` to measurement (a record
  enters only the ``k`` counters selected at its step, ``ε'/2k`` each; a workload
  histogram has ℓ1-sensitivity 1). A step whose later selections find no workload within
  ``ModelOptions.max_model_cells`` ends early (a public rule) and spends less.
* ``public_sizes=True`` (opt-in): the exact batch sizes are public and neighbouring
  streams differ in one record's values (an ℓ1 change of 2 in a batch histogram): no
  size counter, ``ε/2k`` to each selection and counter, every mechanism calibrated to
  the change of 2.
* Noise: exact discrete Laplace and exact permute-and-flip in the Rust core, from
  ChaCha12 generators derived from one master key (:mod:`dpstream.tabular.keys`). The
  fit and the sampling of rows cost no ε.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from dpstream._dask import is_collection
from dpstream._params import RealLike, exact_fraction
from dpstream._rng import KeyRing, Rng
from dpstream.counters import Counter, KindName
from dpstream.persistence import register
from dpstream.tabular import checkpoint
from dpstream.tabular.baseline import BaselineStep
from dpstream.tabular.checkpoint import Checkpointed
from dpstream.tabular.dask import release_frame, step_marginals
from dpstream.tabular.domain import Codes, Domain
from dpstream.tabular.epochs import FIT_ITERS as EPOCH_ITERS
from dpstream.tabular.epochs import EpochMechanism, pair_candidates
from dpstream.tabular.estimation import MarginalModel, Measurement
from dpstream.tabular.fitting import FIT_ITERS, CellLimit, make_fit
from dpstream.tabular.keys import counter_rng, step_rng
from dpstream.tabular.marginals import BatchMarginals
from dpstream.tabular.measurement import WorkloadMeasurements
from dpstream.tabular.model_options import ModelOptions, SamplingName, refuse_moved
from dpstream.tabular.policy import RemovedPolicy, check_policy, score_kind
from dpstream.tabular.policy_options import Adaptive, Baseline, Paper, Policy
from dpstream.tabular.public_values import PublicValues
from dpstream.tabular.release import Part, ReleasePlan
from dpstream.tabular.selection import CELL_LIMIT, SIZE_SHARE, Budget, ScoreKind, select
from dpstream.tabular.table_size import next_size
from dpstream.tabular.tables import LazyTables
from dpstream.tabular.workloads import Clique, workload_list

__all__ = ["SIZE_SHARE", "Budget", "ModelOptions", "TabularStream"]


class TabularStream(PublicValues, WorkloadMeasurements, BaselineStep, Checkpointed):
    """ε-DP synthetic tables for a stream of categorical records.

    Default guarantee: ε-DP for one record added to or removed from the stream, the
    table's size released by a continual counter with ``ε/20`` (``public_sizes=False``);
    with ``public_sizes=True``, ε-DP for one record's values replaced, the exact sizes
    public. The module docstring states what is public and how ε is split.

    Args:
        domain: the public schema.
        epsilon: ε of the whole stream (exact: see :mod:`dpstream._params`).
        workloads: ``k`` for all ``k``-way workloads (default 2), or a list of
            sorted column-index tuples.
        policy: how each step measures and fits, with the options only it reads
            (:mod:`dpstream.tabular.policy_options`): :class:`Adaptive` (default;
            insertions only), :class:`Paper` (Algorithm 3 as printed; its counters) or
            :class:`Baseline` (Algorithm 2; its size counter and fit). Every policy has
            the same guarantee.
        model: the fit's iterations, the cell bound of the model and how the rows are
            drawn (:class:`~dpstream.tabular.model_options.ModelOptions`; public, no ε).
        public_sizes: ``False`` (default): ε-DP for one record added or removed, the size
            released privately. ``True``: the batch sizes are public and exact and the
            guarantee is for one record's values replaced.
        rng: the stream's secret master key, from which the noise of every step is
            derived (:mod:`dpstream.tabular.keys`), is drawn from it (``None``: OS-seeded,
            private; a seeded :class:`dpstream.Rng` is reproducible and **not private**).
            Sampling of synthetic rows uses a numpy generator seeded from it.
    """

    @refuse_moved
    def __init__(
        self,
        domain: Domain,
        epsilon: RealLike,
        *,
        workloads: int | list[Clique] = 2,
        policy: Policy = Adaptive(),  # noqa: B008 - frozen, immutable
        model: ModelOptions = ModelOptions(),  # noqa: B008 - frozen, immutable
        public_sizes: bool = False,
        rng: Rng | None = None,
    ) -> None:
        if not isinstance(domain, Domain):
            raise TypeError(
                f"domain must be a dpstream.tabular.Domain, got {type(domain).__name__}"
            )
        self._domain = domain
        self._epsilon = exact_fraction(epsilon, "epsilon")
        self._policy = check_policy(policy)
        if not isinstance(model, ModelOptions):
            raise TypeError(f"model must be a ModelOptions, got {type(model).__name__}")
        iters, sampling = model.iters, model.sampling
        self._config = checkpoint.options(
            self._epsilon, workloads, policy, iters=iters,
            max_model_cells=model.max_model_cells, sampling=sampling, public_sizes=public_sizes,
        )  # fmt: skip
        self._workloads: list[Clique] = workload_list(domain, workloads)
        cliques = self._workloads
        self._epochs: EpochMechanism | None = None
        # Set only on a stream loaded from a checkpoint whose options were removed
        # (:func:`dpstream.tabular.checkpoint.decode`): it re-releases, it does not step.
        self._removed: RemovedPolicy | None = None
        self._stored: tuple[dict[str, Any], dict[str, Any]] | None = None
        if isinstance(policy, Adaptive):
            self._init_epochs(policy, model, public_sizes, rng)
            return
        assert isinstance(policy, (Paper, Baseline))
        self._k = min(int(policy.k), len(cliques))
        self._baseline = isinstance(policy, Baseline)
        self._score: ScoreKind = score_kind(policy)
        counter, horizon = policy.counter, policy.horizon
        estimator = policy.estimator if isinstance(policy, Baseline) else "pgm"
        self._sampling: SamplingName = sampling
        self._iters = FIT_ITERS if iters is None else iters
        self._fit = make_fit(estimator, domain.sizes, self._iters)
        self._limit = CellLimit(domain, cliques, estimator, model.max_model_cells)
        self._rng = rng if rng is not None else Rng()
        seed = [int(x) for x in self._rng.integers(4)]
        self._sample_rng = np.random.Generator(np.random.PCG64(seed))
        # The master key of every noise draw (:mod:`dpstream.tabular.keys`).
        self._keys = KeyRing(self._rng)
        self._noise_rng = self._rng  # each step's generator (set by the step)
        self._cells = np.array([domain.cells(c) for c in cliques], dtype=np.int64)
        if not isinstance(public_sizes, (bool, np.bool_)):
            raise TypeError(f"public_sizes must be a bool, got {type(public_sizes).__name__}")
        self._public_sizes = bool(public_sizes)
        self._budget = self.budget(
            self._epsilon, self._k, cliques, domain, score=self._score, public_sizes=public_sizes
        )
        self._budgets = {self._k: self._budget}
        self._counter_kind: KindName = counter
        # Paper: one counter per workload (ε'/2k), fed at the steps that select it.
        self._counters: list[Counter | None] = [None] * len(cliques)
        self._horizon = horizon
        if not self._baseline:
            # Counters are allocated when first selected; build one now so that bad counter
            # parameters fail here (no noise is drawn).
            Counter(counter, self._budget.counter_epsilon, 1, horizon=horizon, rng=self._rng)
        # Default (add/remove): the table's size, released by a scalar continual counter of
        # the net rows of each batch (one record changes it by 1) with ε·SIZE_SHARE.
        self._size_counter: Counter | None = None
        if not self._public_sizes:
            self._size_counter = Counter(
                counter, self._budget.size, 1, horizon=horizon, rng=counter_rng(self._keys, None)
            )
        self._t = 0
        # The released size |f_t| (public) and the exact size (never released; sensitive
        # like the counters; read only with public_sizes, where it is public).
        self._size = 0
        self._exact_size = 0
        # Public (the arguments' form): no step has been given a `deletions` argument.
        self._insert_only = True
        # Public: the model, the earlier components of a mixture release (Paper), the
        # synthetic table's workload marginals and remainders (each computed when first
        # read after a step: :mod:`dpstream.tabular.tables`).
        self._model: MarginalModel | None = None
        self._mixture: list[MarginalModel] = []
        zeros = [np.zeros(int(c)) for c in self._cells]
        self._synthetic_marginals = LazyTables(zeros, self._synthetic_marginal)
        self._remainder = LazyTables([z.copy() for z in zeros], self._model_remainder)
        self._baseline_rows: list[Codes] = []
        # Public (outputs of permute-and-flip, inside ε): what each step selected.
        self._selections = np.zeros(len(cliques), dtype=np.int64)
        self._last_selected: list[int] = []

    def _init_epochs(
        self, policy: Adaptive, model: ModelOptions, public_sizes: object, rng: Rng | None
    ) -> None:
        """The default policy's state (:mod:`dpstream.tabular.epochs`)."""
        if not isinstance(public_sizes, (bool, np.bool_)):
            raise TypeError(f"public_sizes must be a bool, got {type(public_sizes).__name__}")
        # A workload whose own marginal exceeds the bound is refused (the trees' nodes are
        # pairs inside the workloads, so every model stays within it).
        CellLimit(self._domain, self._workloads, "pgm", model.max_model_cells)
        self._sampling = model.sampling
        self._iters = EPOCH_ITERS if model.iters is None else model.iters
        self._public_sizes = bool(public_sizes)
        self._rng = rng if rng is not None else Rng()
        seed = [int(x) for x in self._rng.integers(4)]
        self._sample_rng = np.random.Generator(np.random.PCG64(seed))
        # The master key of every noise draw (:mod:`dpstream.tabular.keys`).
        self._keys = KeyRing(self._rng)
        self._epochs = EpochMechanism(
            self._domain.sizes, self._epsilon, growth=float(policy.growth),
            candidates=pair_candidates(self._workloads), public_sizes=self._public_sizes,
            rng=self._rng, iters=self._iters,
        )  # fmt: skip
        self._budgets = {}
        self._t = 0
        self._size = 0
        self._last_selected = []
        self._selections = np.zeros(len(self._workloads), dtype=np.int64)

    def _step_epochs(self, batch: Any, deletions: Any, draw: bool) -> Any:
        mech = self._epochs
        assert mech is not None
        d = len(self._domain)
        cliques: list[Clique] = [(j,) for j in range(d)] + mech.candidates
        counted = batch.workloads if isinstance(batch, BatchMarginals) else None
        if counted is not None and counted != tuple(cliques) and deletions is None:
            # Marginals counted for the stream's workloads (as for Paper()): the mechanism's
            # 1-way and pair marginals are sums of them (exact).
            batch.check(self._domain, self._workloads)
            batch = batch.project(cliques)
        counts = step_marginals(self._domain, cliques, batch, deletions)
        if counts.has_deletions:
            raise ValueError(
                "the default policy Adaptive() takes insertions only; for a stream with "
                "deletions use policy=Paper()"
            )
        ins = [np.asarray(c, dtype=np.int64) for c in counts.inserted]
        undo = (self._keys.copy(), mech.state())
        try:
            mech.rng = step_rng(self._keys, mech.t, [[counts.rows_inserted], *ins])
            mech.step(
                ins[:d], dict(zip(mech.candidates, ins[d:], strict=True)), counts.rows_inserted
            )
        except BaseException:
            self._keys = undo[0]
            mech.load_state(*undo[1])
            raise
        self._t = mech.t
        self._size = mech.size
        return self._released(batch, deletions) if draw else None

    # ------------------------------------------------------------------ the stream

    def step(self, batch: Any = None, *, deletions: Any = None, draw: bool = True) -> Any:
        """Take the next time step's insertions (and deletions); return the synthetic table.

        Args:
            batch: inserted records (a pandas/polars DataFrame with the domain's
                columns, an ``(n, d)`` integer array of codes, or ``None`` for none); a
                Dask DataFrame or array, counted on the cluster
                (:func:`dpstream.distributed.batch_marginals`); or the step's exact
                :class:`~dpstream.tabular.marginals.BatchMarginals` (insertions and
                deletions, with ``deletions=None``). Every form gives the same step, bit
                for bit, on the same records.
            deletions: removed records, same forms (not with :class:`Baseline`). Whether a
                step is given a ``deletions`` argument (not its records) is public.
            draw: ``False``: the step draws no table and returns ``None``; the next
                :meth:`synthetic_codes` or :meth:`synthetic_dask` draws the table it would
                have returned. That table is a function of :meth:`to_bytes` taken before
                it is drawn: a stream loaded from those bytes draws the same one.

        Returns:
            A pandas DataFrame (if pandas is installed, else an ``(n, d)`` int64 array of
            codes) of :attr:`size` synthetic records, with the domain's category labels in
            the columns that have them (:meth:`Domain.decode`). When ``batch`` or
            ``deletions`` is a Dask collection, the same table as a Dask DataFrame whose
            rows are drawn on the workers when computed (:meth:`synthetic_dask`).

        All or nothing. Refused before anything changes (``to_bytes()`` identical): a
        rejected batch (wrong columns, dtypes, unknown categories, with ``public_sizes``
        deleting more records than the table holds, deletions with the baseline, a
        marginal count beyond ``2^27`` in one cell), a stream at the counters'
        ``horizon``, and a model that no workload fits within ``max_model_cells``. If the
        step still fails after that (a numerical failure of a fit: a bug), the state is
        rolled back before the error is raised; nothing was released, but the error
        follows from the step's noisy values, so a retry of the same batch counts as
        another step against ε.
        """
        if self._removed is not None:
            raise ValueError(self._removed.message)
        if not isinstance(draw, bool):
            raise TypeError(f"draw must be True or False, got {type(draw).__name__}")
        if self._epochs is not None:
            return self._step_epochs(batch, deletions, draw)
        counts = step_marginals(self._domain, self._workloads, batch, deletions)
        n_ins, n_dels = counts.rows_inserted, counts.rows_deleted
        if n_dels and self._baseline:
            raise ValueError("the baseline method takes insertions only")
        exact = self._exact_size + n_ins - n_dels
        if exact < 0 and self._public_sizes:  # sizes public: the check reveals nothing
            raise ValueError(
                f"deleting {n_dels} records from a table of {self._exact_size + n_ins}"
            )
        self._check_step()
        diff = counts.differences()
        if any(d.size and float(np.abs(d).max()) >= CELL_LIMIT for d in diff):
            raise ValueError(
                "a batch with a marginal count beyond 2^27 in one cell; split it into "
                "smaller batches"
            )
        undo = checkpoint.undo_point(self)
        try:
            # The released size |f_t| and the batch's rows as the scores see them (public).
            self._noise_rng = step_rng(self._keys, self._t, [[n_ins, n_dels], *diff])
            monotone = self._baseline or (self._insert_only and not counts.has_deletions)
            size, rows = next_size(
                self._size_counter, self._size, n_ins - n_dels, n_ins + n_dels, monotone=monotone
            )
            if self._baseline:
                self._step_baseline(diff, size - self._size)
            else:
                self._step_proposed(diff, size, rows)
        except BaseException:
            checkpoint.roll_back(self, undo)
            raise
        self._size = size
        self._exact_size = exact
        self._insert_only = self._insert_only and not counts.has_deletions
        self._t += 1
        return self._released(batch, deletions) if draw else None

    def _check_step(self) -> None:
        """Refuse, before anything changes, a step that could fail after the counters are
        stepped for reasons that do not depend on the batch (public values only)."""
        if self._horizon is not None and self._t >= self._horizon:
            raise ValueError(
                f"the stream has reached its horizon of {self._horizon} steps (the "
                f"{self._counter_kind!r} counters take no more)"
            )
        model = None if self._baseline else self._model
        if not self._limit.any_fits(self._limit.structure(model, [])):
            raise ValueError(
                "no workload fits the model within max_model_cells; raise it or use a "
                "policy with fewer selections per step"
            )
        if not all(np.all(np.isfinite(m)) for m in self._synthetic_marginals.known()) or not all(
            np.all(np.isfinite(r)) for r in self._remainder.known()
        ):
            raise ValueError("the model's marginals are not finite (corrupt state)")

    def synthetic_codes(self) -> Codes:
        """The current synthetic table as an ``(size, d)`` int64 array (post-processing),
        drawn on this machine in the chunks of :meth:`synthetic_dask`, the same rows.

        With :class:`Paper` the table is drawn from the mixture of the step's models
        ``h_{t,1..k}`` (equal weights): ``"round"`` gives each model ``⌊n/k⌋`` or
        ``⌈n/k⌉`` rows (the first ones ``⌈n/k⌉``), ``"iid"`` a multinomial share of each
        chunk."""
        return self._release_plan().sample()

    def synthetic_dask(self) -> Any:
        """The current synthetic table as a Dask DataFrame drawn on the workers
        (post-processing; needs Dask): one partition per chunk of
        :data:`~dpstream.tabular.release.CHUNK_ROWS` rows, each drawn from the small
        fitted models alone, so the client never holds the rows. Computed (now or after
        later steps), it is the table :meth:`step` returns for the same draw on one
        machine: the same rows, order and index, bit for bit when decoding draws nothing
        (numbers binned by the schema are drawn inside their bins on each side). The
        table is fixed when this is called: every compute gives the same codes."""
        return release_frame(self._release_plan(), self._domain)

    def _release_plan(self) -> ReleasePlan:
        """How the current table's rows are drawn (:mod:`dpstream.tabular.release`)."""
        d = len(self._domain)
        if self._epochs is not None:
            return self._epochs.release_plan(self._sample_rng, method=self._sampling)
        if self._baseline or self._model is None or self._size == 0:
            rows = self._baseline_rows if self._baseline else []
            empty = np.zeros((0, d), dtype=np.int64)
            return ReleasePlan.of_rows(np.concatenate(rows) if rows else empty)
        key = int(self._sample_rng.integers(2**63))
        parts = [Part(m) for m in [*self._mixture, self._model]]
        k, n = len(parts), self._size
        sizes = [n // k + (p < n % k) for p in range(k)] if self._sampling == "round" else None
        return ReleasePlan.mixture(d, parts, sizes, (key, self._t), self._sampling, rows=n)

    def _released(self, batch: Any, deletions: Any) -> Any:
        """A step's release: :meth:`synthetic_dask` when its records were a Dask
        collection, else the table of :meth:`synthetic_codes`."""
        if is_collection(batch) or is_collection(deletions):
            return self.synthetic_dask()
        return self._table(self.synthetic_codes())

    def _table(self, codes: Codes) -> Any:
        try:
            import pandas  # noqa: F401
        except ImportError:  # pragma: no cover - pandas is a test dependency
            return codes
        return self._domain.decode(codes)

    # ------------------------------------------------------------------ selection

    def _select(
        self,
        batch: list[npt.NDArray[np.float64]],
        base: LazyTables | None,
        model_marginals: Any,
        taken: set[int],
        order: list[int],
        model: MarginalModel | None,
        rows: int,
        table_rows: int,
    ) -> int | None:
        """Permute-and-flip (:func:`~dpstream.tabular.selection.select`) over the workloads
        not yet taken at this step that fit ``model`` with this step's selections
        ``order``; ``None`` when no workload does (the step then ends its selections).
        Public rules.

        The selection target is ``batch[i] + base[i]`` (``q_i(∇f_t + g_{t−1})``; ``base``
        ``None`` for zeros); only ``batch`` depends on the current records."""
        structure = self._limit.structure(model, order)
        every = range(len(self._workloads))
        candidates = [i for i in every if i not in taken and self._limit.fits(structure, i)]
        if not candidates:
            return None
        pick = select(
            self._score, [batch[i] for i in candidates],
            [base[i] if base is not None else 0.0 for i in candidates],
            [model_marginals(i) for i in candidates], rows=rows, table_rows=table_rows,
            budget=self._budget, rng=self._noise_rng,
        )  # fmt: skip
        return candidates[pick]

    # ------------------------------------------------------------------ Algorithm 3

    def _step_proposed(self, diff: list[npt.NDArray[np.float64]], size: int, rows: int) -> None:
        """A step of :class:`Paper` (Algorithm 3 as printed)."""
        # Selection target: q_i(∇f_t + g_{t-1}); g_{t-1} is public.
        base = self._synthetic_marginals  # read, not written, until the step's end
        model = self._model
        k = self._k
        cache: dict[int, npt.NDArray[np.float64]] = {}

        def model_marginals(i: int) -> npt.NDArray[np.float64]:
            if i not in cache:
                if model is not self._model:
                    cache[i] = model.marginal(self._workloads[i])  # type: ignore[union-attr]
                else:
                    cache[i] = base[i]  # h_{t,0} = g_{t-1}, as printed
            return cache[i]

        taken: set[int] = set()
        order: list[int] = []
        measurements: list[Measurement] = []
        fits: list[MarginalModel] = []  # h_{t,l} after each selection but the last
        for n_taken in range(k):
            j = self._select(diff, base, model_marginals, taken, order, model, rows, size)
            if j is None:  # no workload fits max_model_cells any more: the step ends here
                break
            taken.add(j)
            order.append(j)
            # A selected workload keeps its remainder r(t−1, j): read it (from the model
            # and the release it stands for) before its counter moves.
            self._remainder.hold(j)
            self._counter(j).step(diff[j].astype(np.int64))
            released, stddev = self._release(j)
            values = self._measurement(j, released)
            measurements.append(Measurement(self._workloads[j], values, stddev))
            if n_taken < k - 1:
                model = self._fit(measurements, float(max(size, 1)), model)
                fits.append(model)
            cache = {}
        assert measurements, "_check_step: the first selection has a candidate"
        if len(fits) == len(order):  # the step ended early: its last fit is redone below
            fits.pop()
        model = self._fit(measurements, float(max(size, 1)), model)
        assert model is not None
        self._model = model
        # g_t is the average of h_{t,1..k} (a mixture).
        self._mixture = fits
        self._record(order)
        self._note_release(taken)

    # ------------------------------------------------------------------ Algorithm 2

    def _record(self, order: list[int]) -> None:
        self._last_selected = list(order)
        self._selections[order] += 1


register(TabularStream.from_bytes, "TabularStream", prefix=checkpoint._MAGIC)
