"""The public self-checks catch the classic mistakes and say what to fix.

Each case runs an exercise's code cells in order, as a learner would, with one
task cell replaced by a wrong implementation from ``mistakes.py``, up to that
task's self-check, which must fail with a message naming the mistake.
"""

import contextlib

import nbformat
import pytest

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
