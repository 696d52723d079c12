"""The public self-checks catch the classic mistakes and say what to fix.

Each case runs an exercise's code cells in order, as a learner would, with one
task cell replaced by a wrong implementation from ``mistakes.py``, up to that
task's self-check, which must fail with a message naming the mistake. Honest work,
written in any style, must be told ``ok`` by every self-check.
"""

import nbformat
import pytest

from tests.catalogue import variants
from tests.grading import with_cell
from tests.honest_corpus import CORPUS
from tests.mistakes import MISTAKES


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
        try:
            exec(compile(source, f"<{grade_id}>", "exec"), namespace)
        except AssertionError:
            # An earlier self-check may fail (a task-1 mistake seen from task 2): the learner reads it and runs on.
            if grade_id == check or not grade_id.startswith("selfcheck_"):
                raise
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


# --- honest work is told ok (issue 25) ----------------------------------------------------------------------------
# The self-checks of these exercises run on every honest implementation (tests/honest_corpus.py) and every right
# variant (tests/catalogue); ex4-ex6 take minutes up to their last self-check.
HONESTLY_CHECKED = ("ex1_residual", "ex2_layernorm", "ex3_batchnorm")


def honest_work():
    found = [pytest.param(entry.notebook(), id=entry.name) for entry in CORPUS if entry.assignment in HONESTLY_CHECKED]
    return found + [pytest.param(with_cell(right.assignment, right.cell, right.source),
                                 id=f"{right.assignment}-{right.what}")
                    for right in variants() if right.assignment in HONESTLY_CHECKED]


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
    namespace = {}
    for grade_id, cell in cells[:last + 1]:
        if not grade_id.startswith("check_"):  # the hidden tests are not what this checks
            exec(compile(python_of(cell), f"<{grade_id or 'extra'}>", "exec"), namespace)
        if grade_id.startswith("selfcheck_"):
            assert capsys.readouterr().out.splitlines()[-1] == "ok", grade_id
