"""The run options most audits share."""

from __future__ import annotations

from typing import Any


def batched(runs: int, batch_size: int | None = None, epsilon: Any = 1) -> dict[str, Any]:
    """The options of an audit of ``runs`` runs per side, run in batches of
    ``batch_size`` (default: one batch), of the claim ε = ``epsilon``."""
    size = runs if batch_size is None else batch_size
    return {"epsilon": epsilon, "runs": runs, "batch_size": size}
