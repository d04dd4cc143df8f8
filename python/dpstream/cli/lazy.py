"""The heavy third-party modules of the command line, imported when first needed.

pandas (the release and evaluation tables) and matplotlib (``--plot``) are loaded by
the command that uses them, so that ``dpstream --help`` and a refused option stay fast.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def pandas() -> ModuleType:
    """The ``pandas`` module."""
    return importlib.import_module("pandas")


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the non-interactive Agg backend (files only, no window)."""
    importlib.import_module("matplotlib").use("Agg")
    return importlib.import_module("matplotlib.pyplot")
