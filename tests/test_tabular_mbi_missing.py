"""Without the ``mbi`` package, the test oracle (``_mbi_oracle``) says how to install it.

Runs only where mbi is *not* installed (the project's .venv); with mbi,
``test_tabular_mbi.py`` runs instead.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from dpstream.tabular import Domain, Measurement, Paper, TabularStream

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mbi") is not None, reason="mbi is installed"
)


def test_mbi_is_not_a_stream_option() -> None:
    d = Domain({"a": 3, "b": 2})
    with pytest.raises(TypeError, match="estimator"):
        TabularStream(d, 1, policy=Paper(k=1), estimator="mbi")  # type: ignore[call-arg]


def test_the_adapter_imports_and_fails_only_when_fitting() -> None:
    from _mbi_oracle import estimate_mbi, load_mbi

    with pytest.raises(ImportError, match=r"pip install mbi"):
        load_mbi()
    with pytest.raises(ImportError, match=r"pip install mbi"):
        estimate_mbi((2, 2), [Measurement((0, 1), np.ones(4), 1.0)], 4.0)
    # Bad arguments are still refused first, with the usual ValueError.
    with pytest.raises(ValueError, match="iters"):
        estimate_mbi((2, 2), [], 4.0, iters=-1)
