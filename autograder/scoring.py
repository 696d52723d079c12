"""Scoring: run an assignment's hidden suite against a ``Submission`` and score its parts.

Nothing here knows how requests reach the submission (a sandboxed worker, or the
nbgrader kernel itself): that is the transport's business (``run.py``, ``kernel.py``).
The suite is collected once per grading run (``collect``): one module per contract part
in ``autograder/suites/<assignment>/test_<part>.py``, each test worth ``@points(n)``,
parametrized with ``pytest.mark.parametrize``. ``grade`` calls every test with a
``Submission`` and returns one ``Outcome`` per test. A part loses all its points when
the worker recorded, during the part's own calls, a use of something the part forbids.
"""

from __future__ import annotations

import importlib
import itertools
import pkgutil
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from autograder.checks import Diagnosis, StudentError, Submission, WorkerLost

SUITES = Path(__file__).resolve().parent / "suites"

# What a forbidden tag means, in the words a learner knows.
FORBIDDEN_NAMES = {
    "layer_norm": "a PyTorch layer-norm built-in (F.layer_norm, nn.LayerNorm, torch.layer_norm, ...)",
    "batch_norm": "a PyTorch batch-norm built-in (F.batch_norm, nn.BatchNorm1d, torch.batch_norm, ...)",
    "instance_norm": "a PyTorch instance-norm built-in (F.instance_norm)",
    "rms_norm": "a PyTorch RMSNorm built-in (F.rms_norm, nn.RMSNorm, torch.rms_norm)",
    "group_norm": "a PyTorch group-norm built-in (F.group_norm, nn.GroupNorm)",
    "autograd": "autograd (.backward(), torch.autograd, torch.func, or recording a graph with gradients turned on)",
}
NORM_TAGS = {"layer_norm", "batch_norm", "instance_norm", "rms_norm", "group_norm"}
# PyTorch errors that have one cause in a learner's code: the message adds what that cause is.
KNOWN_ERRORS = {
    "a leaf Variable that requires grad is being used in an in-place operation":
        "it changes in place a tensor it was given (x += ..., x.mul_(...)): compute a new tensor instead",
    "must have the same dtype": "it mixes float32 and float64 tensors: keep the dtype of the input (no .float() "
                                "inside)",
    "key_padded_mask": "it passes the mask as key_padding_mask: pass it as attn_mask=attn_mask",
}
# What ends a worker: the rest of that task's tests are not run, and the next task starts a fresh worker.
WORKER_ENDED = {"timeout", "crashed", "exited", "killed", "cpu_limit", "protocol_violation"}


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
    diagnosed: bool = False  # the message names the mistake (checks.Diagnosis): the part's hints would mislead


@dataclass
class PartScore:
    name: str
    title: str
    score: float
    max_score: float
    outcomes: list[Outcome] = field(default_factory=list)
    note: str = ""
    tampered: bool = False  # the monitor was not the sealed one while this part was graded
    held: float | None = None  # the measured score, while the part is held for review
    evidence: frozenset = frozenset()  # every tag the monitor recorded during this part's calls
    ran: tuple = ()  # the notebook code its calls ran, as the worker reported it ("cell:first:last")
    forbidden_used: tuple = ()  # the tags it forbids that its calls used: why it has 0


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


def drawn_once(func, cases: list[dict]):
    """A Hypothesis test as a plain function over the examples Hypothesis draws for it.

    Hypothesis runs the test here once, with a body that only records each example: derandomized and seeded
    from the test's own source, exactly as in any run, so the examples are the ones every run would draw.
    Each submission then runs the real body on them in order and stops at the first failure, as Hypothesis
    without shrinking does, without its bookkeeping per example (a third of the grader's own time) and
    without running the failing example a second time to report it.
    """
    handle = getattr(func, "hypothesis", None)
    if handle is None:
        return func
    from hypothesis import seed
    from hypothesis.internal.compat import int_from_bytes
    from hypothesis.internal.reflection import function_digest

    body, given_by_case = handle.inner_test, set(cases[0]) | {"sub"}
    examples: list[dict] = []

    def record(**arguments):
        examples.append({name: value for name, value in arguments.items() if name not in given_by_case})

    handle.inner_test = record
    try:
        seed(int_from_bytes(function_digest(body)))(func)  # the seed derandomize takes from the body
        func(sub=None, **cases[0])
    finally:
        handle.inner_test, func._hypothesis_internal_use_seed = body, None

    def run(sub, **case):
        for example in examples:
            body(sub=sub, **case, **example)

    run.examples = examples
    return run


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
        tests = [Test(module.PART, attr[len("test_"):], float(getattr(func, "points")),
                      drawn_once(func, cases_of(func)), cases_of(func), " ".join((func.__doc__ or "").split()))
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
        outcome.diagnosed = isinstance(error, Diagnosis)
    except StudentError as error:
        if error.kind == "MemoryError" or "allocate memory" in error.message:
            outcome.status, outcome.message = "memory_limit", "it ran out of memory (the grader's memory limit)"
        elif error.kind == "NotImplementedError":
            outcome.status, outcome.message = "missing", "not implemented yet (it raises NotImplementedError)"
        elif error.kind == "NameError" and "is not defined" in error.message:
            outcome.status, outcome.message = "missing", f"{error.message}: keep the name from the exercise"
        else:
            outcome.status, outcome.message = "error", f"your code raised {error}"[:300]
            cause = next((cause for known, cause in KNOWN_ERRORS.items() if known in error.message), None)
            if cause:
                outcome.message = f"{outcome.message[:290 - len(cause)].rstrip('. ')}: {cause}"
                outcome.diagnosed = True
    except WorkerLost as error:
        outcome.status, outcome.message = error.status, str(error)
    except Exception as error:  # a suite bug, or an answer the suite could not interpret
        outcome.status, outcome.message = "error", f"the answer could not be checked ({type(error).__name__})"
    else:
        outcome.passed, outcome.points, outcome.status = True, test.points, "passed"
    return outcome


def grade_part(part: Part, sub: Submission, on_crash=lambda what: None) -> PartScore:
    """Every test of ``part``; a worker that ends costs the tests of this part it had left, no more.

    The part loses its points when the monitor recorded a use of what it forbids during its own
    graded calls: run-time evidence, never a name. What else the monitor recorded (a subclass
    handler, a changed monitor) and the code the calls ran are kept for ``evidence``.
    """
    sub.used, sub.tampered, sub.ran = set(), False, set()
    sub.watch_autograd = "autograd" in part.forbidden  # the worker watches autograd itself around these calls
    outcomes = []
    for test in part.tests:
        if outcomes and outcomes[-1].status in WORKER_ENDED:
            outcomes.append(Outcome(part.name, test.name, 0.0, test.points, False,
                                    "not run: the worker ended earlier in this task", test.hint, outcomes[-1].status))
            continue
        outcomes.append(run_test(test, sub))
        if outcomes[-1].status in WORKER_ENDED:
            on_crash(f"in {part.title} ({outcomes[-1].message})")
    score = PartScore(part.name, part.title, sum(o.points for o in outcomes), part.points, outcomes,
                      tampered=sub.tampered, evidence=frozenset(sub.used), ran=tuple(sorted(sub.ran)))
    used = sorted(forbidden_uses(part.forbidden, sub.used))
    if used:
        reason = "it uses " + " and ".join(FORBIDDEN_NAMES.get(tag, tag) for tag in used)
        score.note = f"0 points: {reason}, which this task forbids"
        score.score, score.forbidden_used = 0.0, tuple(used)
        for outcome in outcomes:
            outcome.points, outcome.passed = 0.0, False
            outcome.status, outcome.message = "forbidden", score.note
    return score


def forbidden_uses(forbidden, used) -> set[str]:
    """The recorded uses a part forbids: any norm of the family counts where the part forbids a norm."""
    found = set(forbidden) & set(used)
    if set(forbidden) & NORM_TAGS:
        found |= set(used) & NORM_TAGS
    return found


def hold(part, note: str):
    """The part (or each part of a list) at 0 for now, its measured score kept in ``held`` for the
    instructor to release."""
    if isinstance(part, list):
        return [hold(one, note) for one in part]
    part.held, part.score = part.score, 0.0
    part.note = note + f" (measured: {part.held:g} / {part.max_score:g})" + (f"; {part.note}" if part.note else "")
    for outcome in part.outcomes:
        outcome.points = 0.0
    return part


def blocked(assignment: str) -> frozenset[str]:
    """Built-ins every part of the assignment forbids: they fail outright when student code calls them."""
    return frozenset.intersection(*(part.forbidden for part in collect(assignment))) - {"autograd"}


def zero(assignment: str, status: str, message: str) -> list[PartScore]:
    """Every part at 0, each test failed with ``message`` (unreadable or tampering submissions)."""
    return [PartScore(p.name, p.title, 0.0, p.points,
                      [Outcome(p.name, t.name, 0.0, t.points, False, message, t.hint, status) for t in p.tests],
                      note=message if status == "tampering" else "")
            for p in collect(assignment)]


def grade(assignment: str, sub: Submission, parts: list[str] | None = None, on_crash=lambda what: None) \
        -> list[PartScore]:
    return [grade_part(part, sub, on_crash) for part in collect(assignment) if parts is None or part.name in parts]
