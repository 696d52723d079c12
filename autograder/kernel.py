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

from autograder.checks import Submission
from autograder.sandboxed import guard, wire
from autograder.sandboxed.executor import Executor
from autograder.scoring import blocked, collect, grade_part as score_part


def local_transport(executor: Executor, refuse=frozenset()):
    """Carry requests in-process, through the same wire format the sandbox uses.

    No kernel is removed in the student's own kernel: a monitor per request refuses the
    built-ins of ``refuse`` and records what the request used, as the sandbox's trailer does.
    """

    def transport(request: dict) -> dict:
        inbound = executor.decode(wire.encode(request))
        with guard.Monitor(refuse=refuse) as monitor:
            answer = executor.handle(inbound)
            record = monitor.drain()
        return wire.decode(executor.encode({**answer, "monitor": record}))

    return transport


def refuse_tags(assignment: str) -> frozenset[str]:
    """The built-ins refused in-process: the whole normalization family where the assignment forbids a norm."""
    tags = blocked(assignment)
    return frozenset(guard.NORM_TAGS) if tags & set(guard.NORM_TAGS) else tags


def grade_part(assignment: str, part: str, namespace: dict) -> float:
    """Run one part's hidden tests on ``namespace``; print a line per test; return the score."""
    parts = collect(assignment)
    (found,) = [p for p in parts if p.name == part]
    executor = Executor()
    executor.namespace = namespace
    with warnings.catch_warnings(), contextlib.redirect_stderr(sys.stdout):
        warnings.simplefilter("ignore")  # nbgrader scores a grade cell that writes to stderr as 0
        score = score_part(found, Submission(local_transport(executor, refuse_tags(assignment))))
    for outcome in score.outcomes:
        mark = "passed" if outcome.passed else f"{outcome.status}: {outcome.message}"
        print(f"{outcome.name} ({outcome.max_points:g} pt): {mark}")
    if score.note:
        print(score.note)
    return score.score
