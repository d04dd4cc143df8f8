"""``docs/bad-input.md`` is exactly what ``tests/bad_input_page.py`` generates from the tests'
tables of bad input (so every row is a case a test runs, and every case has a row)."""

from __future__ import annotations

import difflib

import bad_input_page


def test_the_page_is_generated_from_the_cases() -> None:
    want = bad_input_page.render()
    have = bad_input_page.PAGE.read_text(encoding="utf-8")
    diff = "".join(
        difflib.unified_diff(
            have.splitlines(keepends=True),
            want.splitlines(keepends=True),
            "docs/bad-input.md",
            "generated",
            n=1,
        )
    )
    assert have == want, (
        "docs/bad-input.md is out of date; rewrite it with\n"
        "    PYTHONPATH=python .venv/bin/python tests/bad_input_page.py\n" + diff
    )
