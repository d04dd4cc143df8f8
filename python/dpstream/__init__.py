"""dpstream: differentially private synthetic data from streams.

The privacy-critical work (noise, counting, sketches, state) runs in the Rust
core ``dpstream._core``; this package validates input, converts it, and
presents the results. See the README for the privacy model.

The evaluation modules (:mod:`~dpstream.audit`, :mod:`~dpstream.metrics`,
:mod:`~dpstream.streams`, :mod:`~dpstream.datasets`) are imported on first use
(``dpstream.metrics`` works without importing it first).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

# The capabilities are imported here, so that dpstream.load knows every kind of state.
from dpstream import counters, noise, partition, sketch, tabular
from dpstream._core import __version__
from dpstream._rng import Rng
from dpstream.online import OnlineSynthesizer
from dpstream.persistence import load, save
from dpstream.privhp import PrivHP, TreeGenerator

if TYPE_CHECKING:
    from dpstream import audit, datasets, metrics, streams

__all__ = [
    "OnlineSynthesizer",
    "PrivHP",
    "Rng",
    "TreeGenerator",
    "__version__",
    "audit",
    "counters",
    "datasets",
    "load",
    "metrics",
    "noise",
    "partition",
    "save",
    "sketch",
    "streams",
    "tabular",
]

#: Imported on first use: evaluation, not needed to synthesize.
_LAZY = frozenset({"audit", "datasets", "metrics", "streams"})


def __getattr__(name: str) -> ModuleType:
    if name in _LAZY:
        return importlib.import_module(f"dpstream.{name}")
    raise AttributeError(f"module 'dpstream' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
