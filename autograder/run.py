"""Stage 3: run an assignment's hidden suite against one submission and score it.

The suite is collected once per grading run (``collect``): one module per contract part
in ``autograder/suites/<assignment>/test_<part>.py``, each test worth ``@points(n)``,
parametrized with ``pytest.mark.parametrize``. ``grade`` calls every test with a
``Submission`` and returns one ``Outcome`` per test. A part loses all its points when
the worker's monitor saw a built-in the part forbids, or saw its monitor switched off.
"""

from __future__ import annotations

import importlib
import itertools
import pkgutil
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from autograder.checks import StudentError, Submission, WorkerLost

SUITES = Path(__file__).resolve().parent / "suites"

# What a forbidden tag means, in the words a learner knows.
FORBIDDEN_NAMES = {
    "layer_norm": "a PyTorch layer-norm built-in (F.layer_norm, nn.LayerNorm, torch.layer_norm, ...)",
    "batch_norm": "a PyTorch batch-norm built-in (F.batch_norm, nn.BatchNorm1d, torch.batch_norm, ...)",
    "instance_norm": "a PyTorch instance-norm built-in (F.instance_norm)",
    "rms_norm": "a PyTorch RMSNorm built-in (F.rms_norm, nn.RMSNorm, torch.rms_norm)",
    "autograd": "autograd (.backward(), torch.autograd, or turning gradients back on)",
}


@dataclass
class Test:
    part: str
    name: str
    points: float
    func: object
    cases: list[dict]
    hint: str


@dataclass
class Part:
    name: str
    title: str
    forbidden: frozenset[str]
    tests: list[Test]

    @property
    def points(self) -> float:
        return sum(test.points for test in self.tests)


@dataclass
class Outcome:
    part: str
    name: str
    points: float
    max_points: float
    passed: bool
    message: str = ""
    hint: str = ""
    status: str = "passed"  # passed | failed | error | missing | forbidden | timeout | crashed | ...


@dataclass
class PartScore:
    name: str
    title: str
    score: float
    max_score: float
    outcomes: list[Outcome] = field(default_factory=list)
    note: str = ""


def assignments() -> list[str]:
    return sorted(p.name for p in SUITES.iterdir() if p.is_dir() and (p / "__init__.py").exists())


def cases_of(func) -> list[dict]:
    """Expand stacked pytest.mark.parametrize marks into keyword-argument dicts."""
    axes = []
    for mark in getattr(func, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names, values = mark.args[0], mark.args[1]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        rows = []
        for value in values:
            if hasattr(value, "values") and hasattr(value, "marks"):  # pytest.param(...)
                value = value.values if len(names) > 1 else value.values[0]
            rows.append({names[0]: value} if len(names) == 1 else dict(zip(names, value)))
        axes.append(rows)
    return [dict(itertools.chain.from_iterable(d.items() for d in combo)) for combo in itertools.product(*axes)] or [{}]


@cache
def collect(assignment: str) -> tuple[Part, ...]:
    """The assignment's parts, in the order of its ORDER list (or file names)."""
    if assignment not in assignments():
        raise KeyError(assignment)
    package = importlib.import_module(f"autograder.suites.{assignment}")
    names = getattr(package, "ORDER", None) or sorted(
        m.name[len("test_"):] for m in pkgutil.iter_modules(package.__path__) if m.name.startswith("test_"))
    parts = []
    for name in names:
        module = importlib.import_module(f"autograder.suites.{assignment}.test_{name}")
        tests = [Test(module.PART, attr[len("test_"):], float(getattr(func, "points")), func, cases_of(func),
                      " ".join((func.__doc__ or "").split()))
                 for attr, func in vars(module).items()
                 if attr.startswith("test_") and callable(func) and hasattr(func, "points")]
        parts.append(Part(module.PART, getattr(module, "TITLE", module.PART),
                          frozenset(getattr(module, "FORBIDDEN", ())), tests))
    return tuple(parts)


def run_test(test: Test, sub: Submission) -> Outcome:
    outcome = Outcome(test.part, test.name, 0.0, test.points, False, hint=test.hint)
    try:
        for case in test.cases:
            test.func(sub=sub, **case)
    except AssertionError as error:
        outcome.status, outcome.message = "failed", str(error).split("\n")[0][:300] or "a check failed"
    except StudentError as error:
        if error.kind == "MemoryError" or "allocate memory" in error.message:
            outcome.status, outcome.message = "memory_limit", "it ran out of memory (the grader's memory limit)"
        elif error.kind == "NotImplementedError":
            outcome.status, outcome.message = "missing", "not implemented yet (it raises NotImplementedError)"
        elif error.kind == "NameError" and "is not defined" in error.message:
            outcome.status, outcome.message = "missing", f"{error.message}: keep the name from the exercise"
        else:
            outcome.status, outcome.message = "error", f"your code raised {error}"[:300]
    except WorkerLost as error:
        outcome.status, outcome.message = error.status, str(error)
    except Exception as error:  # a suite bug, or an answer the suite could not interpret
        outcome.status, outcome.message = "error", f"the answer could not be checked ({type(error).__name__})"
    else:
        outcome.passed, outcome.points, outcome.status = True, test.points, "passed"
    return outcome


def grade_part(part: Part, sub: Submission) -> PartScore:
    sub.used, sub.tampered = set(), False
    outcomes = []
    for test in part.tests:
        if outcomes and outcomes[-1].status == "timeout":  # don't wait out the same endless loop again
            outcomes.append(Outcome(part.name, test.name, 0.0, test.points, False,
                                    "not run: an earlier test of this task ran out of time", test.hint, "timeout"))
            continue
        outcomes.append(run_test(test, sub))
    score = PartScore(part.name, part.title, sum(o.points for o in outcomes), part.points, outcomes)
    used = sorted(part.forbidden & sub.used)
    if used or sub.tampered:
        reason = ("it switched off the grader's monitor of built-ins" if sub.tampered
                  else "it uses " + " and ".join(FORBIDDEN_NAMES.get(tag, tag) for tag in used))
        score.note = f"0 points: {reason}, which this task forbids"
        score.score = 0.0
        for outcome in outcomes:
            outcome.points, outcome.passed = 0.0, False
            outcome.status, outcome.message = "forbidden", score.note
    return score


def blocked(assignment: str) -> frozenset[str]:
    """Built-ins every part of the assignment forbids: they fail outright when student code calls them."""
    return frozenset.intersection(*(part.forbidden for part in collect(assignment))) - {"autograd"}


def zero(assignment: str, status: str, message: str) -> list[PartScore]:
    """Every part at 0, each test failed with ``message`` (unreadable or tampering submissions)."""
    return [PartScore(p.name, p.title, 0.0, p.points,
                      [Outcome(p.name, t.name, 0.0, t.points, False, message, t.hint, status) for t in p.tests],
                      note=message if status == "tampering" else "")
            for p in collect(assignment)]


def grade(assignment: str, sub: Submission, parts: list[str] | None = None) -> list[PartScore]:
    return [grade_part(part, sub) for part in collect(assignment) if parts is None or part.name in parts]




# --- one submission, in a sandboxed worker -------------------------------------------------

@dataclass
class Graded:
    """Everything the report needs about one graded submission."""

    parts: list[PartScore]
    events: list[str] = field(default_factory=list)  # limit hits, as statuses
    cell_errors: list[str] = field(default_factory=list)
    output_chars: int = 0
    seconds: float = 0.0
    attempts: list[str] = field(default_factory=list)  # what the sandbox stopped or limited


def exec_request(cells: list) -> dict:
    """The request that runs a submission's cells (``load.Cell``s) in order in an executor."""
    return {"op": "exec", "cells": [{"label": cell.label, "source": cell.source} for cell in cells]}


class Session:
    """The transport of one submission: a worker, restarted (cells re-run) if it dies."""

    def __init__(self, sandbox, slot: int, cells: list, limits, block=()):
        self.sandbox, self.slot, self.cells, self.limits, self.block = sandbox, slot, cells, limits, block
        self.deadline = time.monotonic() + limits.submission_seconds
        self.worker = None
        self.restarts = 0
        self.events: list[str] = []
        self.cell_errors: list[str] = []
        self.attempts: list[str] = []  # what the sandbox stopped or limited, as the worker recorded it

    def start(self) -> None:
        self.worker = self.sandbox.spawn(self.slot, self.block)
        answer = self.worker.request(exec_request(self.cells), self.remaining())
        self.note_attempts(answer)
        if not self.cell_errors:
            for cell in answer.get("cells", []):
                if type(cell) is dict and not cell.get("ok"):
                    error = cell.get("error") if type(cell.get("error")) is dict else {}
                    line = f", line {cell['line']}" if type(cell.get("line")) is int else ""
                    self.cell_errors.append(f"cell {cell.get('label')}{line} raised {error.get('type', 'an error')}: "
                                            f"{str(error.get('message', ''))[:200]}")

    def remaining(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise WorkerLost("timeout", "the submission used up its whole time budget "
                                        f"({self.limits.submission_seconds:g} s)")
        return min(left, self.limits.request_seconds)

    def __call__(self, request: dict) -> dict:
        if self.worker is None or not self.worker.alive:
            if self.worker is not None:
                if self.restarts >= self.limits.restarts:
                    raise WorkerLost("crashed", "the worker kept dying; the remaining tests were not run")
                self.restarts += 1
            try:
                self.start()
            except WorkerLost as error:
                self.events.append(error.status)
                raise
        try:
            answer = self.worker.request(request, self.remaining())
        except WorkerLost as error:
            self.events.append(error.status)
            raise
        self.note_attempts(answer)
        return answer

    def note_attempts(self, answer: dict) -> None:
        attempts = answer.get("attempts")
        if type(attempts) is list:
            for what in attempts[:20]:
                if type(what) is str and what[:120] not in self.attempts:
                    self.attempts.append(what[:120])

    def close(self) -> int:
        output = 0
        if self.worker is not None:
            output = self.worker.output_total
            self.worker.close()
        return output


def grade_submission(assignment: str, cells: list, sandbox, slot: int, limits) -> Graded:
    start = time.monotonic()
    session = Session(sandbox, slot, cells, limits, blocked(assignment))
    try:
        try:
            session.start()
        except WorkerLost as error:
            session.events.append(error.status)
        parts = grade(assignment, Submission(session))
    finally:
        output = session.close()
    return Graded(parts, session.events, session.cell_errors, output, time.monotonic() - start, session.attempts)
