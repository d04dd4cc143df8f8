"""NOT PRIVATE figures of ``--evaluate DIR --plot``: the releases against the real data.

Each writes ``NOT-PRIVATE-evaluation.png`` in the evaluation directory (never
``--out``) and returns its path. Needs matplotlib (``pip install dpstream[plots]``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dpstream.cli.lazy import pyplot

_TITLE = "NOT PRIVATE evaluation: compares the releases with the real data"
_FILE = "NOT-PRIVATE-evaluation.png"


def plot_points(table: Any, real: Any, synth: Any, release: Path, directory: Path) -> Path:
    """The real and the synthetic points of the last release evaluated (the first two
    coordinates, in the unit cube) and W1 at every release evaluated."""
    plt = pyplot()
    g = np.random.default_rng(0)
    two_d = real.shape[1] >= 2
    fig, axes = plt.subplots(1, 3 if two_d else 1, figsize=(14 if two_d else 6, 4.2))
    axes = np.atleast_1d(axes)
    if two_d:
        k = min(3000, len(real))
        r = real[g.choice(len(real), k, replace=False)] if k else real
        axes[0].scatter(r[:, 0], r[:, 1], s=2, alpha=0.4)
        axes[0].set_title("NOT PRIVATE: the real records")
        s = synth[g.choice(len(synth), min(k, len(synth)), replace=False)] if len(synth) else synth
        axes[1].scatter(s[:, 0], s[:, 1], s=2, alpha=0.4, color="C1")
        axes[1].set_title(f"synthetic ({release.stem})")
        for ax in axes[:2]:
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
    if "w1" in table:
        axes[-1].plot(range(len(table)), table["w1"], marker="o")
    axes[-1].set_xticks(range(len(table)), table["release"], rotation=60, fontsize=6)
    axes[-1].set_title("NOT PRIVATE: W1 to the real data (scaled units)")
    return _save(plt, fig, directory)


def plot_table(metrics: Any, directory: Path) -> Path:
    """The workload errors (average and maximum, absolute and relative) of every release."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    for ax, key in zip(axes, ["avg_we", "max_we", "avg_rel_we", "max_rel_we"], strict=True):
        ax.plot(range(len(metrics)), metrics[key])
        ax.set_title(f"NOT PRIVATE: {key}")
        ax.set_xlabel("release")
    return _save(plt, fig, directory)


def _save(plt: Any, fig: Any, directory: Path) -> Path:
    fig.suptitle(_TITLE)
    fig.tight_layout()
    path = directory / _FILE
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
