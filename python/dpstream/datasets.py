"""Data sets shipped with dpstream (see ``dpstream/data/README.md`` for provenance)."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np

__all__ = ["load_adult"]


def load_adult() -> tuple[np.ndarray, list[str], dict[str, int]]:
    """The integer-coded UCI Adult data set (48,842 rows x 14 columns).

    Returns:
        ``(codes, columns, domain)``: an ``int64`` array of category codes, the
        column names, and the public domain size of each column.
    """
    base = resources.files("dpstream") / "data"
    domain = json.loads((base / "adult-domain.json").read_text())
    with (base / "adult.csv").open("r") as f:
        columns = f.readline().strip().split(",")
        codes = np.loadtxt(f, delimiter=",", dtype=np.int64)
    if list(domain) != columns:
        raise RuntimeError("adult.csv columns do not match adult-domain.json")
    return codes, columns, {k: int(v) for k, v in domain.items()}
