"""Bad inputs every synthesizer of points in ``[0,1]^2`` refuses the same way
(:class:`dpstream.OnlineSynthesizer`, :class:`dpstream.PrivHP`): the parameter or the
coordinate the message names."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

#: ``(args, kwargs, error, message)`` of a construction ``Cls(epsilon, dim)`` with a
#: bad ε.
BAD_EPSILONS = [
    ((0, 2), {}, ValueError, "epsilon must be positive"),
    ((-0.5, 2), {}, ValueError, "epsilon must be positive"),
    ((Fraction(-1, 3), 2), {}, ValueError, "epsilon must be positive"),
    ((float("nan"), 2), {}, ValueError, "epsilon must be finite"),
    ((float("inf"), 2), {}, ValueError, "epsilon must be finite"),
    (("1", 2), {}, TypeError, "epsilon"),
    ((True, 2), {}, TypeError, "epsilon"),
    ((None, 2), {}, TypeError, "epsilon"),
]

_long_bad = np.full((5000, 2), 0.5)
_long_bad[4999, 1] = 1.25

#: ``(batch, error, message)`` of an update of a ``dim = 2`` synthesizer with a bad
#: batch of points.
BAD_BATCHES = [
    (np.zeros((3, 3)), ValueError, r"shape \(n, 2\)"),
    (np.zeros(4), ValueError, r"shape \(n, 2\)"),
    (np.zeros((2, 2, 1)), ValueError, r"shape \(n, 2\)"),
    ([[0.1, np.nan]], ValueError, r"points\[0, 1\] is NaN"),
    ([[0.2, 0.3], [1.5, 0.2]], ValueError, r"points\[1, 0\] = 1\.5 is outside \[0, 1\]"),
    ([[0.2, 0.3], [-0.1, 0.2]], ValueError, r"points\[1, 0\] = -0\.1 is outside"),
    ([[0.2, np.inf]], ValueError, r"points\[0, 1\] = inf is outside"),
    ([[0.2, -np.inf]], ValueError, r"points\[0, 1\] = -inf is outside"),
    (_long_bad, ValueError, r"points\[4999, 1\] = 1\.25 is outside"),
    (np.array([[True, False]]), TypeError, "dtype bool"),
    (np.array([["0.1", "0.2"]]), TypeError, "dtype <U3"),
    (np.array([[0.1 + 0j, 0.2]]), TypeError, "dtype complex128"),
    (np.array([[None, 0.2]]), TypeError, "dtype object"),
    ("0.1,0.2", TypeError, "numeric"),
]
