"""Type stubs for the compiled Rust extension ``dpstream._core`` (checked by mypy.stubtest)."""

from typing import final

import numpy as np
import numpy.typing as npt

__all__ = ["Rng", "__version__", "discrete_gaussian", "discrete_laplace", "permute_and_flip"]
__version__: str

@final
class Rng:
    """ChaCha12 CSPRNG; see ``dpstream.Rng``."""

    def __new__(cls, seed: bytes | None = None) -> Rng: ...
    @property
    def seeded(self) -> bool: ...
    def integers(self, size: int) -> npt.NDArray[np.uint64]: ...

def discrete_laplace(
    num: int, den: int, size: int, rng: Rng | None = None
) -> npt.NDArray[np.int64]: ...
def discrete_gaussian(
    num: int, den: int, size: int, rng: Rng | None = None
) -> npt.NDArray[np.int64]: ...
def permute_and_flip(
    scores: npt.NDArray[np.float64],
    eps_num: int,
    eps_den: int,
    sens_num: int,
    sens_den: int,
    rng: Rng | None = None,
) -> int: ...
