"""The generators of :class:`~dpstream.tabular.TabularStream`'s noise, from its key ring.

The stream holds a :class:`~dpstream._rng.KeyRing` (a secret master key, stored in its
checkpoint). Each step absorbs the exact counts it reads into the ring's running keyed
digest, then draws all its noise from the generator of its position: a fixed function of
the master key, the step's index and the digest of every batch so far. A checkpoint
loaded any number of times and fed the same batches releases the same values, byte for
byte (the measurements at an epoch's close, which cover rows from before the
checkpoint, cannot be averaged); other batches give independent noise. A checkpoint
supports one continuation. A counter's master key comes from the generator of its own
position (its noise is keyed by the counter itself: :mod:`dpstream.counters`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dpstream._rng import KeyRing, Rng

__all__ = ["counter_rng", "step_rng"]

#: Position tags of the ring's generators.
_STEP, _SIZE_COUNTER, _WORKLOAD_COUNTER = 0, 1, 2


def step_rng(keys: KeyRing, t: int, counts: Sequence[npt.ArrayLike]) -> Rng:
    """The noise generator of step ``t`` (0-based), after absorbing ``counts`` (the
    step's exact integer counts, in a fixed order) into ``keys``."""
    for c in counts:
        keys.absorb(np.asarray(c, dtype=np.int64).ravel())
    return keys.generator([_STEP, int(t)])


def counter_rng(keys: KeyRing, workload: int | None) -> Rng:
    """The generator a counter draws its master key from: the size counter's
    (``workload=None``) or workload ``workload``'s."""
    if workload is None:
        return keys.generator([_SIZE_COUNTER])
    return keys.generator([_WORKLOAD_COUNTER, int(workload)])
