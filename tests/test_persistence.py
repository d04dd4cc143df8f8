"""dpstream.load dispatches by kind through the loaders the classes register."""

from __future__ import annotations

from pathlib import Path

import dpstream
import pytest
from dpstream import persistence
from dpstream.counters import Counter


def test_every_kind_of_state_has_a_loader_after_import_dpstream() -> None:
    assert set(persistence._LOADERS) == {
        "ContinualPrivHP",
        "Counter",
        "EpochSynthesizer",
        "InhomogeneousSparseCounter",
        "OnlineSynthesizer",
        "PrivHP",
        "Sketch",
        "SparseCounter",
        "TabularStream",
        "TreeGenerator",
    }


def test_a_kind_without_a_loader_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.dpst"
    dpstream.save(Counter("simple", 1, 1), path)
    assert isinstance(dpstream.load(path), Counter)
    monkeypatch.delitem(persistence._LOADERS, "Counter")
    with pytest.raises(ValueError, match="cannot load objects of kind Counter: no loader"):
        dpstream.load(path)


def test_a_registered_prefix_selects_its_loader(tmp_path: Path) -> None:
    stream = dpstream.tabular.TabularStream(dpstream.tabular.Domain({"a": 2, "b": 2}), 1)
    path = tmp_path / "t.dpst"
    dpstream.save(stream, path)
    assert isinstance(dpstream.load(path), dpstream.tabular.TabularStream)
