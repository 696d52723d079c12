"""A catalogue of wrong implementations, one module per assignment.

Each ``Wrong`` replaces one solution cell of an exercise (``cell``: its grade_id) with a
plausible mistake or an attempt to game the grader. The hidden suite must take points
off ``part`` (the contract part the mistake belongs to) and leave every other part at
full marks. ``tests/mistakes.py`` (the public self-checks' catalogue) is included too.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Wrong:
    assignment: str
    cell: str  # grade_id of the solution cell it replaces
    what: str  # the mistake in a few words (the test id)
    source: str  # the replacement cell
    part: str = ""  # the part that must lose points (default: the cell's own part)

    @property
    def loses(self) -> str:
        return self.part or self.cell


@dataclass(frozen=True)
class Right:
    """A correct implementation written differently from the reference: it must score full marks."""

    assignment: str
    cell: str
    what: str
    source: str


ASSIGNMENTS = ["ex1_residual", "ex2_layernorm", "ex3_batchnorm", "ex4_prepost", "ex5_rmsnorm", "ex6_beyond_norm"]


def catalogue() -> list[Wrong]:
    """Every wrong cell once: a self-check's mistake that repeats another entry's cell (a task-1 mistake seen from
    task 2's self-check, a task left as the release hands it out) adds nothing to what the hidden suites grade."""
    from tests.mistakes import MISTAKES, release_cell

    entries, seen = [], set()
    for m in MISTAKES:
        if (m.assignment, m.task, m.source) in seen or m.source == release_cell(m.assignment, m.task):
            continue
        seen.add((m.assignment, m.task, m.source))
        entries.append(Wrong(m.assignment, m.task, m.what, m.source))
    for assignment in ASSIGNMENTS:
        try:
            module = importlib.import_module(f".{assignment}", __name__)
        except ModuleNotFoundError:
            continue
        # A self-check's mistake may also reuse a cell of this catalogue (tests/mistakes.py says which).
        entries += [w for w in module.WRONG if (w.assignment, w.cell, w.source) not in seen]
    return entries


def variants() -> list[Right]:
    entries = []
    for assignment in ASSIGNMENTS:
        try:
            module = importlib.import_module(f".{assignment}", __name__)
        except ModuleNotFoundError:
            continue
        entries += getattr(module, "RIGHT", [])
    return entries
