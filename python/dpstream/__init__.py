"""dpstream: differentially private synthetic data from streams.

The privacy-critical work (noise, counting, sketches, state) runs in the Rust
core ``dpstream._core``; this package validates input, converts it, and
presents the results. See the README for the privacy model.
"""

from dpstream import noise
from dpstream._core import __version__
from dpstream._rng import Rng

__all__ = ["Rng", "__version__", "noise"]
