"""dpstream: differentially private synthetic data from streams.

The privacy-critical work (noise, counting, sketches, state) runs in the Rust
core ``dpstream._core``; this package validates input, converts it, and
presents the results. See the README for the privacy model.
"""

from dpstream import audit, counters, metrics, noise, partition, sketch, streams
from dpstream._core import __version__
from dpstream._rng import Rng
from dpstream.online import OnlineSynthesizer
from dpstream.persistence import load, save
from dpstream.privhp import PrivHP, TreeGenerator

__all__ = [
    "OnlineSynthesizer",
    "PrivHP",
    "Rng",
    "TreeGenerator",
    "__version__",
    "audit",
    "counters",
    "load",
    "metrics",
    "noise",
    "partition",
    "save",
    "sketch",
    "streams",
]
