"""The public self-checks catch the classic mistakes and say what to fix.

Each case runs an exercise's code cells in order, as a learner would, with one
task cell replaced by a wrong implementation from ``mistakes.py``, up to that
task's self-check, which must fail with a message naming the mistake. Honest work,
written in any style, must be told ``ok`` by every self-check.
"""

import contextlib

import nbformat
import pytest

from autograder.sandboxed.executor import remember_source
from tests.catalogue import variants
from tests.grading import with_cell
from tests.honest_corpus import CORPUS
from tests.mistakes import MISTAKES, release_cell


def code_cells(repo, assignment):
    notebook = nbformat.read(repo / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    return [(cell.metadata.get("nbgrader", {}).get("grade_id"), cell.source)
            for cell in notebook.cells if cell.cell_type == "code"]


def run_until_self_check(cells, task, replacement=None, check=None):
    """Execute cells in a fresh namespace, ``task`` replaced, up to and including ``check`` (its self-check)."""
    check = check or f"selfcheck_{task}"
    namespace = {}
    for grade_id, source in cells:
        if grade_id == task and replacement is not None:
            source = replacement
        if (grade_id or "").startswith("check_"):
            continue  # a learner's graded cells are comments: the release strips their hidden tests
        if grade_id != check and (grade_id or "").startswith("selfcheck_"):
            # An earlier task's self-check may fail (a knock-on entry): a learner reads it and runs on.
            with contextlib.suppress(AssertionError):
                exec(compile(source, f"<{grade_id}>", "exec"), namespace)
            continue
        exec(compile(source, f"<{grade_id}>", "exec"), namespace)
        if grade_id == check:
            return
    raise LookupError(f"no self-check cell {check}")


@pytest.mark.parametrize("mistake", MISTAKES, ids=lambda m: f"{m.assignment}-{m.what}")
def test_self_check_rejects_the_mistake_and_names_it(repo, mistake):
    cells = code_cells(repo, mistake.assignment)
    with pytest.raises(AssertionError) as failure:
        run_until_self_check(cells, mistake.task, mistake.source, mistake.self_check)
    assert mistake.hint in str(failure.value)


@pytest.mark.parametrize("task", sorted({(m.assignment, m.task) for m in MISTAKES}), ids="-".join)
def test_self_check_accepts_the_reference_solution(repo, task, capsys):
    assignment, grade_id = task
    run_until_self_check(code_cells(repo, assignment), grade_id)
    assert capsys.readouterr().out.splitlines()[-1] == "ok"


# --- a task not written yet -------------------------------------------------------------------------------------
# ex4-ex6's blank tasks, seen by their own self-check and by a later one: (assignment, task left as released, the
# self-check run, the message's start). Not catalogue entries: the blank release is graded already, and a blank
# ex4 block costs make_stack and ffn_grad_norms too, which build stacks of the learner's own blocks.
NOT_WRITTEN_YET = [
    ("ex4_prepost", "PostNormBlock", "PostNormBlock", "task 1 is not written yet"),
    ("ex4_prepost", "PreNormBlock", "PreNormBlock", "task 2 is not written yet"),
    ("ex4_prepost", "make_stack", "make_stack", "task 3 is not written yet"),
    ("ex4_prepost", "ffn_grad_norms", "ffn_grad_norms", "task 4 is not written yet"),
    ("ex4_prepost", "PreNormBlock", "make_stack", "fix task 2 first: task 2 is not written yet"),
    ("ex5_rmsnorm", "rms_norm", "rms_norm", "task 1 is not written yet"),
    ("ex5_rmsnorm", "RMSNorm", "RMSNorm", "task 2 is not written yet"),
    ("ex5_rmsnorm", "rms_norm", "RMSNorm", "fix task 1 first: task 1 is not written yet"),
    ("ex6_beyond_norm", "batch_norm_forward_backward", "batch_norm_forward_backward", "task 1 is not written yet"),
    ("ex6_beyond_norm", "ReZeroBlock", "ReZeroBlock", "task 2 is not written yet"),
    ("ex6_beyond_norm", "DyT", "DyT", "task 3 is not written yet"),
]


@pytest.mark.parametrize("assignment, task, check, message", NOT_WRITTEN_YET,
                         ids=[f"{a}-{t}" + (f"-seen-from-{c}" if c != t else "") for a, t, c, _ in NOT_WRITTEN_YET])
def test_self_check_says_a_task_is_not_written_yet(repo, assignment, task, check, message):
    with pytest.raises(AssertionError, match=f"^{message}"):
        run_until_self_check(code_cells(repo, assignment), task, release_cell(assignment, task), f"selfcheck_{check}")


# --- every exercise is covered ------------------------------------------------------------------------------------
ASSIGNMENTS = ["ex1_residual", "ex2_layernorm", "ex3_batchnorm", "ex4_prepost", "ex5_rmsnorm", "ex6_beyond_norm"]


def self_checked_tasks(repo, assignment):
    """The tasks of ``assignment`` that have a self-check cell, in order."""
    return [grade_id.removeprefix("selfcheck_") for grade_id, _ in code_cells(repo, assignment)
            if (grade_id or "").startswith("selfcheck_")]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_self_checked_task_has_a_named_mistake_and_a_not_written_yet_case(repo, assignment):
    tasks = self_checked_tasks(repo, assignment)
    assert tasks
    blank = {(a, t) for a, t, _, _ in NOT_WRITTEN_YET}
    for task in tasks:
        entries = [m for m in MISTAKES if (m.assignment, m.task) == (assignment, task)]
        assert any(m.source != release_cell(assignment, task) for m in entries), f"{task}: no mistake in the catalogue"
        assert (assignment, task) in blank or any(m.source == release_cell(assignment, task) for m in entries), (
            f"{task}: no case of the task not written yet"
        )


# --- honest work is told ok (issue 25) ----------------------------------------------------------------------------
# Every honest implementation (tests/honest_corpus.py) and every right variant (tests/catalogue), through every
# self-check of its exercise, as a learner runs the notebook: the graded cells are skipped (a learner's copy has no
# hidden tests in them).
# Honest work the public self-checks still reject: they compare exact types (``type(m) is nn.Linear``) where the
# grader now asks ``isinstance`` and behaviour. A known false alarm of the self-check, left to issue 34; strict, so
# this list must shrink when the self-checks are fixed.
SELF_CHECK_TOO_STRICT = {"ex1-casted-linear-and-config-dataclass": "make_mlp's self-check rejects an nn.Linear subclass"}


def honest_work():
    found = [pytest.param(entry.notebook(), id=entry.name,
                          marks=[pytest.mark.xfail(strict=True, reason=SELF_CHECK_TOO_STRICT[entry.name])]
                          if entry.name in SELF_CHECK_TOO_STRICT else [])
             for entry in CORPUS]
    return found + [pytest.param(with_cell(right.assignment, right.cell, right.source),
                                 id=f"{right.assignment}-{right.what}") for right in variants()]


def python_of(cell: dict) -> str:
    """A code cell's source without the lines only IPython runs: magics, shell commands, help (name?)."""
    source = "".join(cell["source"])
    return "\n".join(line for line in source.split("\n")
                     if not line.lstrip().startswith(("%", "!")) and not line.rstrip().endswith("?"))


@pytest.mark.parametrize("notebook", honest_work())
def test_every_self_check_tells_honest_work_ok(notebook, capsys):
    cells = [(cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", ""), cell)
             for cell in notebook["cells"] if cell["cell_type"] == "code"]
    last = max(at for at, (grade_id, _) in enumerate(cells) if grade_id.startswith("selfcheck_"))
    namespace = {"__name__": "__main__"}  # as in a kernel, where TorchScript finds a module name and the sources
    for number, (grade_id, cell) in enumerate(cells[:last + 1]):
        if not grade_id.startswith("check_"):  # the hidden tests are not what this checks
            source, filename = python_of(cell), f"<cell {number + 1}>"
            remember_source(filename, source)
            exec(compile(source, filename, "exec"), namespace)
        if grade_id.startswith("selfcheck_"):
            assert capsys.readouterr().out.splitlines()[-1] == "ok", grade_id
