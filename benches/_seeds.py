"""Reproducible seeds of the benchmark scripts."""

from __future__ import annotations


def derived_seed(base: int, *parts: int) -> int:
    """A distinct reproducible 64-bit seed for each tuple ``parts`` of small non-negative
    integers, under a script's ``base`` seed."""
    s = base
    for p in parts:
        s = s * 1_000_003 + p
    return s % (1 << 64)
