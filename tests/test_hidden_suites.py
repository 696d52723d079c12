"""The hidden suites, graded through the real grader: right answers pass, wrong ones lose points.

For each assignment one class is graded with ``python -m autograder grade``: the reference
solution, the blank release, every correct variant and every entry of the catalogue of
wrong implementations (``tests/catalogue``). A wrong implementation must lose points on
its own part and on no other (as measured: a wrong implementation that reaches for a
built-in by a computed name is held for review, with the scores its tests measured).
"""

import pytest

from tests.catalogue import ASSIGNMENTS, catalogue, variants
from tests.grading import (blank, max_scores, measured_scores, part_scores, reference, results_of, run_grader, with_cell,
                     write_class)

pytestmark = pytest.mark.slow  # grades the catalogue of every assignment in the sandbox

WRONG = catalogue()
RIGHT = variants()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """assignment -> {student id -> result JSON}, one grading run per assignment."""
    found = {}
    for assignment in ASSIGNMENTS:
        folder = tmp_path_factory.mktemp(assignment)
        notebooks = {"reference": reference(assignment), "blank": blank(assignment)}
        notebooks |= {f"wrong-{w.what}": with_cell(assignment, w.cell, w.source) for w in WRONG
                      if w.assignment == assignment}
        notebooks |= {f"right-{r.what}": with_cell(assignment, r.cell, r.source) for r in RIGHT
                      if r.assignment == assignment}
        write_class(folder / "class", notebooks)
        done = run_grader("grade", assignment, folder / "class", "--results", folder / "results", "--jobs", 2)
        assert done.returncode == 0, done.stderr
        found[assignment] = results_of(folder / "results")
    return found


def test_catalogue_names_are_unique_within_an_assignment():
    names = [(entry.assignment, entry.what) for entry in [*WRONG, *RIGHT]]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_reference_solution_scores_full_marks(graded, assignment):
    result = graded[assignment]["reference"]
    assert part_scores(result) == max_scores(assignment)
    assert result["extra_data"]["status"] == "ok"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_suite_points_equal_the_notebooks_graded_cells(assignment):
    import nbformat

    from tests.grading import REPO

    notebook = nbformat.read(REPO / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)
    cells = {c.metadata["nbgrader"]["grade_id"][len("check_"):]: c.metadata["nbgrader"]["points"]
             for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"}
    assert max_scores(assignment) == cells


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_blank_release_scores_zero_and_every_test_reports_missing_work(graded, assignment):
    result = graded[assignment]["blank"]
    assert result["score"] == 0
    assert result["extra_data"]["status"] in ("ok", "cell_errors")
    assert result["tests"] and all(t["output"].startswith("missing:") for t in result["tests"])


@pytest.mark.parametrize("right", RIGHT, ids=lambda r: f"{r.assignment}-{r.what}")
def test_correct_variant_scores_full_marks(graded, right):
    assert part_scores(graded[right.assignment][f"right-{right.what}"]) == max_scores(right.assignment)


@pytest.mark.parametrize("wrong", WRONG, ids=lambda w: f"{w.assignment}-{w.what}")
def test_wrong_implementation_loses_points_on_its_part_only(graded, wrong):
    result = graded[wrong.assignment][f"wrong-{wrong.what}"]
    assert result["extra_data"]["status"] not in ("tampering", "grader_error")
    scores = measured_scores(result)
    full = max_scores(wrong.assignment)
    assert scores[wrong.loses] < full[wrong.loses]
    assert {p: s for p, s in scores.items() if p != wrong.loses} == {p: s for p, s in full.items() if p != wrong.loses}
