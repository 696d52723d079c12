"""Honest work keeps full marks, status ``ok`` and no note, whatever its style (issue 21, item 5).

The corpus (``tests/honest_corpus.py``) holds implementations of all six exercises in the styles
real code uses and student notebooks that print, inspect and debug. Each exercise's entries are
graded in one run of ``python -m autograder grade`` in the sandbox; every entry must then get
every point, status ``ok``, no part held and no note at all, as a learner who did nothing wrong
should see. A failure message quotes what the grader said, so it reads as a to-do item.
"""

import json
import re

import pytest

from tests.grading import max_scores, part_scores, results_of, run_grader, write_class
from tests.honest_corpus import ASSIGNMENTS, BY_NAME, CORPUS

ENTRIES = [entry.name for entry in CORPUS]


@pytest.fixture(scope="module")
def graded(tmp_path_factory, bubblewrap):
    """assignment -> (the grader's completed process, {entry name -> result}), one sandboxed run per assignment."""
    found = {}
    for assignment in ASSIGNMENTS:
        folder = tmp_path_factory.mktemp(assignment)
        write_class(folder / "class", {entry.name: entry.notebook() for entry in CORPUS
                                       if entry.assignment == assignment})
        done = run_grader("grade", assignment, folder / "class", "--results", folder / "results", "--jobs", 2)
        found[assignment] = done, results_of(folder / "results")
    return found


@pytest.fixture
def result(graded, request) -> dict:
    """The result JSON of the entry named by the test's ``name`` parameter."""
    name = request.getfixturevalue("name")
    _, results = graded[BY_NAME[name].assignment]
    assert name in results, f"no result for {name}"
    return results[name]


def said(result: dict) -> str:
    """What the grader told this learner: status, problems and part notes, for a failure message."""
    extra = result["extra_data"]
    notes = {part: info["note"] for part, info in extra["parts"].items() if info["note"]}
    return json.dumps({"status": extra["status"], "problems": extra["problems"], "notes": notes}, indent=1)


# --- the corpus itself -------------------------------------------------------------------------------------------

def test_the_corpus_holds_at_least_30_honest_implementations():
    assert len(CORPUS) >= 30
    assert len(set(ENTRIES)) == len(ENTRIES), "two entries share a name"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_exercise_has_at_least_three_entries(assignment):
    assert sum(entry.assignment == assignment for entry in CORPUS) >= 3


def test_at_least_eight_entries_print_inspect_and_debug_as_students_do():
    assert sum(entry.student for entry in CORPUS) >= 8


# Where a style comes from: a site, repository or file named in parentheses.
SOURCE = re.compile(r"\(.*[\w-]\.(com|ai|io|org|edu|py|md|c)\b")


@pytest.mark.parametrize("name", ENTRIES)
def test_every_entry_names_its_style_and_where_it_comes_from(name):
    entry = BY_NAME[name]
    if entry.student:
        assert entry.style.startswith("student notebook: "), f"{name}: say what this student notebook does"
    else:
        assert SOURCE.search(entry.style), f"{name}: name the style and where it is from, e.g. (github.com/...)"


# --- graded in the sandbox ---------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_the_class_is_graded_with_status_0_and_a_result_for_every_entry(graded, assignment):
    done, results = graded[assignment]
    assert done.returncode == 0, done.stderr[-3000:]
    assert set(results) == {entry.name for entry in CORPUS if entry.assignment == assignment}


@pytest.mark.slow
@pytest.mark.parametrize("name", ENTRIES)
def test_honest_entry_gets_full_marks(result, name):
    assert part_scores(result) == max_scores(BY_NAME[name].assignment), said(result)
    assert result["score"] == result["extra_data"]["max_score"], said(result)


@pytest.mark.slow
@pytest.mark.parametrize("name", ENTRIES)
def test_honest_entry_has_status_ok(result, name):
    assert result["extra_data"]["status"] == "ok", said(result)


@pytest.mark.slow
@pytest.mark.parametrize("name", ENTRIES)
def test_honest_entry_has_no_part_held_for_review(result, name):
    held = {part: info["held"] for part, info in result["extra_data"]["parts"].items() if "held" in info}
    assert held == {}, said(result)


@pytest.mark.slow
@pytest.mark.parametrize("name", ENTRIES)
def test_honest_entry_gets_no_note_at_all(result, name):
    notes = [info["note"] for info in result["extra_data"]["parts"].values() if info["note"]]
    assert result["extra_data"]["problems"] == [] and notes == [], said(result)
