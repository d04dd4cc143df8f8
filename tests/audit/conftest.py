"""Shared fixture of the privacy audits: run an audit, time it, and list every result.

``audited(name, mechanism, neighbours, **kwargs)`` calls :func:`dpstream.audit.audit`
and records the lower bound, ε and the time taken; the table of all audits of the
session is printed at the end of the pytest report.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from dpstream.audit import AuditResult, audit

_RECORDS: list[tuple[str, AuditResult, float]] = []


@pytest.fixture
def audited() -> Callable[..., AuditResult]:
    def run(
        name: str, mechanism: Callable[..., Any], neighbours: Any, **kwargs: Any
    ) -> AuditResult:
        start = time.perf_counter()
        result = audit(mechanism, neighbours, **kwargs)
        _RECORDS.append((name, result, time.perf_counter() - start))
        return result

    return run


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _RECORDS:
        return
    tr = terminalreporter
    tr.section("privacy audits: high-confidence lower bound on the privacy loss vs ε")
    tr.write_line(f"{'audit':<52} {'bound':>8} {'ε':>7} {'verdict':>9} {'runs':>8} {'time':>7}")
    for name, r, seconds in _RECORDS:
        verdict = "passed" if r.passed else "FLAGGED"
        runs = r.runs + r.selection_runs
        tr.write_line(
            f"{name:<52} {r.lower_bound:>8.4f} {r.epsilon:>7.4g} {verdict:>9} {runs:>8} "
            f"{seconds:>6.2f}s"
        )
