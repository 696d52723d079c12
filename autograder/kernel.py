"""The same hidden suite, run the standard nbgrader way: inside the student's kernel.

Each graded part's grade cell holds, between ``### BEGIN HIDDEN TESTS`` and
``### END HIDDEN TESTS``, a call to ``grade_part``. It runs that part's tests against the
kernel's own globals and returns the score as the cell's value, which nbgrader records as
partial credit. The student's code shares this process, so this mode has nbgrader's
weaker isolation; ``python -m autograder grade`` runs the same tests in a sandbox.
"""

from __future__ import annotations

import contextlib
import sys
import warnings

from autograder import wire
from autograder.checks import Submission
from autograder.run import blocked, collect, grade_part as score_part
from autograder.sandboxed.executor import Executor


def local_transport(executor: Executor):
    """Carry requests in-process, through the same wire format the sandbox uses."""

    def transport(request: dict) -> dict:
        inbound = executor.decode(wire.encode(request))
        return wire.decode(executor.encode(executor.handle(inbound)))

    return transport


def grade_part(assignment: str, part: str, namespace: dict) -> float:
    """Run one part's hidden tests on ``namespace``; print a line per test; return the score."""
    parts = collect(assignment)
    (found,) = [p for p in parts if p.name == part]
    executor = Executor(block=blocked(assignment))
    executor.namespace = namespace
    with warnings.catch_warnings(), contextlib.redirect_stderr(sys.stdout):
        warnings.simplefilter("ignore")  # nbgrader scores a grade cell that writes to stderr as 0
        score = score_part(found, Submission(local_transport(executor)))
    for outcome in score.outcomes:
        mark = "passed" if outcome.passed else f"{outcome.status}: {outcome.message}"
        print(f"{outcome.name} ({outcome.max_points:g} pt): {mark}")
    if score.note:
        print(score.note)
    return score.score
