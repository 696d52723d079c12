"""``python -m autograder export`` writes the CSV that Canvas's and Moodle's grade imports read.

The results are written by the grader's own writer (``report.save``) with chosen scores, so the
export is checked on exactly the files ``grade`` and ``release`` leave, without grading anything.
The expected files follow each importer's rules: Canvas reads a header of ``Student, ID, SIS
Login ID, Section`` and a ``Points Possible`` row; Moodle stops at any row that is not a student
and reads ``-`` as "no grade".
"""

import csv
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from autograder import cli, gradebook, report, scoring
from tests.conftest import REPO

EX2, EX3 = "ex2_layernorm", "ex3_batchnorm"


def save(results, assignment, student, fraction, status="ok"):
    """A result as the grader writes it: every task at ``fraction`` of its points (held, for ``review``)."""
    parts = [scoring.PartScore(p.name, p.title, round(p.points * fraction, 4), p.points)
             for p in scoring.collect(assignment)]
    if status == "review":
        parts = scoring.hold(parts, "held for your instructor's review: it calls a built-in by a name made at run time")
    report.save(results / assignment, report.result(assignment, student, "digest", status, parts, [], 1.0,
                                                    "namespaces"))


def graded_class(folder):
    """ada did both; ben did both, ex2 with a cell error; cy's ex2 is held for review and cy skipped ex3."""
    save(folder, EX2, "ada", 1.0)
    save(folder, EX2, "ben", 0.4, "cell_errors")
    save(folder, EX2, "cy", 0.5, "review")
    save(folder, EX3, "ada", 1.0)
    save(folder, EX3, "ben", 0.5)
    return folder


@pytest.fixture
def results(tmp_path):
    return graded_class(tmp_path / "results")


def export(*args):
    return cli.main(["export", *map(str, args)])


def test_canvas_csv_has_canvass_header_a_points_possible_row_and_a_row_per_student(results, tmp_path):
    assert export("--format", "canvas", "-o", tmp_path / "grades.csv", "--results", results) == 0
    assert (tmp_path / "grades.csv").read_text() == (
        "Student,ID,SIS Login ID,Section,ex2_layernorm,ex3_batchnorm\n"
        "Points Possible,,,,10,7\n"
        "ada,,ada,,10,7\n"
        "ben,,ben,,4,3.5\n"
        "cy,,cy,,,\n")


def test_moodle_csv_has_the_maximum_in_the_header_and_a_dash_for_no_grade(results, tmp_path):
    assert export("--format", "moodle", "-o", tmp_path / "grades.csv", "--results", results) == 0
    assert (tmp_path / "grades.csv").read_text() == (
        "student_id,ex2_layernorm (out of 10),ex3_batchnorm (out of 7)\n"
        "ada,10,7\n"
        "ben,4,3.5\n"
        "cy,-,-\n")


@pytest.mark.parametrize("fmt, no_grade", [("canvas", ""), ("moodle", "-")])
def test_a_missing_submission_gets_no_score_not_a_zero(results, tmp_path, fmt, no_grade):
    export("--format", fmt, "-o", tmp_path / "grades.csv", "--results", results)
    rows = list(csv.reader((tmp_path / "grades.csv").open()))
    cy = next(row for row in rows if row[0] == "cy")
    assert cy[-1] == no_grade  # ex3, the last column: never submitted


def test_the_summary_counts_students_assignments_and_missing_submissions(results, tmp_path, capsys):
    export("--format", "canvas", "-o", tmp_path / "grades.csv", "--results", results)
    out = capsys.readouterr().out
    assert "3 students x 2 assignments" in out and "1 missing submission left without a score" in out


def test_a_held_submission_gets_no_score_and_is_named_with_the_command_that_releases_it(results, tmp_path, capsys):
    export("--format", "canvas", "-o", tmp_path / "grades.csv", "--results", results)
    err = capsys.readouterr().err
    assert f"{EX2}, cy: no score yet, held for review" in err
    assert f"python -m autograder release {EX2} cy --results {results / EX2}" in err
    assert str(results / EX2 / "feedback" / "cy.md") in err


def test_a_released_submission_gets_its_measured_points_in_the_next_export(results, tmp_path):
    assert cli.main(["release", EX2, "cy", "--results", str(results / EX2)]) == 0
    export("--format", "canvas", "-o", tmp_path / "grades.csv", "--results", results)
    assert "cy,,cy,,5,\n" in (tmp_path / "grades.csv").read_text()


def test_a_grader_error_gets_no_score_and_is_named_with_the_command_that_regrades_it(results, tmp_path, capsys):
    save(results, EX3, "dan", 0.0, "grader_error")
    export("--format", "moodle", "-o", tmp_path / "grades.csv", "--results", results)
    assert "dan,-,-\n" in (tmp_path / "grades.csv").read_text()
    assert f"{EX3}, dan: no score yet, not graded" in capsys.readouterr().err


def test_named_assignments_are_exported_in_the_order_given(results, tmp_path):
    export(EX3, EX2, "--format", "moodle", "-o", tmp_path / "grades.csv", "--results", results)
    assert (tmp_path / "grades.csv").read_text().splitlines()[0] == \
        "student_id,ex3_batchnorm (out of 7),ex2_layernorm (out of 10)"


def test_results_default_to_the_results_folder_of_the_course(results, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # results is tmp_path / "results"
    assert export(EX3, "--format", "canvas", "-o", "out.csv") == 0
    assert (tmp_path / "out.csv").read_text().splitlines()[0] == "Student,ID,SIS Login ID,Section,ex3_batchnorm"


# --- a results folder the export cannot trust: exit 2, the problem named, no CSV ------------------------------


def corrupt(results):
    (results / EX2 / "ben.json").write_text('{"score": 4, "tests": [')


def someone_elses(results):
    data = json.loads((results / EX2 / "ben.json").read_text())
    (results / EX2 / "eve.json").write_text(json.dumps(data))


def from_another_suite(results):
    data = json.loads((results / EX2 / "ben.json").read_text())
    data["extra_data"]["max_score"] = 12.0
    (results / EX2 / "ben.json").write_text(json.dumps(data))


def score_as_text(results):
    data = json.loads((results / EX2 / "ben.json").read_text())
    data["score"] = "4"
    (results / EX2 / "ben.json").write_text(json.dumps(data))


def not_json_results(results):
    (results / EX2 / "notes.json").write_text('["my own notes"]')


BAD_FOLDERS = {
    # name -> (what to do to the results folder, arguments, words the error must contain)
    "no such folder": (lambda r: None, ["--results", "{tmp}/nowhere"], ["no results folder", "--results"]),
    "no assignment folder in it": (lambda r: None, ["--results", "{tmp}"], ["no folder named after an assignment",
                                                                         "--results"]),
    "a named assignment without results": (lambda r: None, ["ex5_rmsnorm"], ["no results for ex5_rmsnorm",
                                                                            "grade it first"]),
    "an unknown assignment": (lambda r: None, ["ex9_nothing"], ["unknown assignment 'ex9_nothing'", EX2]),
    "a result that is not JSON": (corrupt, [], ["ben.json cannot be read as a result"]),
    "a result under another student's name": (someone_elses, [], ["eve.json", "student_id"]),
    "results that disagree on the maximum": (from_another_suite, [], ["disagree on the maximum (10 and 12",
                                                                      "grade ex2_layernorm again"]),
    "a score that is not a number": (score_as_text, [], ["ben.json", "score"]),
    "a JSON file the grader did not write": (not_json_results, [], ["notes.json", "not a result the grader wrote"]),
}


@pytest.mark.parametrize("case", BAD_FOLDERS)
def test_a_results_folder_it_cannot_trust_is_an_error_that_names_the_problem(results, tmp_path, capsys, case):
    spoil, arguments, words = BAD_FOLDERS[case]
    spoil(results)
    arguments = [a.format(tmp=tmp_path / "empty") for a in arguments]
    (tmp_path / "empty").mkdir()
    if "--results" not in arguments:
        arguments += ["--results", str(results)]
    assert export(*arguments, "--format", "canvas", "-o", tmp_path / "grades.csv") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    assert all(word in err for word in words), err
    assert not (tmp_path / "grades.csv").exists()


def test_a_format_neither_importer_reads_is_refused_by_the_command_line(results, tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        export("--format", "blackboard", "-o", tmp_path / "grades.csv", "--results", results)
    assert stopped.value.code == 2 and "invalid choice: 'blackboard'" in capsys.readouterr().err


# --- --gradebook: nbgrader's totals, automatic plus manual points ------------------------------------------


def release_into(gradebook, assignment):
    """Record the release's graded cells in ``gradebook`` as `nbgrader generate_assignment` does."""
    notebook = json.loads((REPO / "exercises" / assignment / f"{assignment}.ipynb").read_text())
    gradebook.update_or_create_assignment(assignment)
    gradebook.update_or_create_notebook(assignment, assignment)
    for cell in notebook["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("grade"):
            gradebook.update_or_create_grade_cell(meta["grade_id"], assignment, assignment,
                                                  max_score=meta["points"], cell_type=cell["cell_type"])
        if meta.get("solution"):
            gradebook.update_or_create_solution_cell(meta["grade_id"], assignment, assignment)


@pytest.fixture(scope="module")
def recorded_gradebook(tmp_path_factory) -> Path:
    """The class above recorded with `grade --gradebook`; ada's written answer got 2.5 points in the formgrader,
    ben's is not graded yet. Made once (a new gradebook runs nbgrader's migrations), copied for each test."""
    folder = tmp_path_factory.mktemp("course")
    results = graded_class(folder / "results")
    activated = f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", activated)  # a new gradebook runs `alembic`, on the activated environment's PATH
        with Gradebook(f"sqlite:///{folder / 'gradebook.db'}") as opened:
            for assignment, students in ((EX2, ["ada", "ben", "cy"]), (EX3, ["ada", "ben"])):
                release_into(opened, assignment)
                gradebook.record(opened, assignment, results / assignment, students)
            graded = opened.find_grade("written_answer", EX3, EX3, "ada")
            graded.manual_score, graded.needs_manual_grade = 2.5, False  # what the formgrader saves
            opened.db.commit()
    return folder / "gradebook.db"


@pytest.fixture
def course(results, recorded_gradebook, tmp_path):
    """The ``results`` recorded in a gradebook of their own: its URL."""
    shutil.copy(recorded_gradebook, tmp_path / "gradebook.db")
    return f"sqlite:///{tmp_path / 'gradebook.db'}"


def exported_rows(path):
    return {row[0]: row[1:] for row in csv.reader(path.open())}


def test_gradebook_export_gives_automatic_plus_manual_points_out_of_the_assignments_maximum(results, course,
                                                                                           tmp_path):
    assert export("--format", "moodle", "-o", tmp_path / "lms.csv", "--results", results, "--gradebook", course) == 0
    rows = exported_rows(tmp_path / "lms.csv")
    assert rows["student_id"] == ["ex2_layernorm (out of 10)", "ex3_batchnorm (out of 10)"]
    assert rows["ada"] == ["10", "9.5"]


def test_gradebook_export_leaves_a_written_answer_not_graded_yet_without_a_score_and_says_so(results, course,
                                                                                            tmp_path, capsys):
    export("--format", "canvas", "-o", tmp_path / "lms.csv", "--results", results, "--gradebook", course)
    assert exported_rows(tmp_path / "lms.csv")["ben"] == ["", "ben", "", "4", ""]
    err = capsys.readouterr().err
    assert f"{EX3}, ben: no score yet, not graded by hand yet: grade the written answer written_answer of ben " \
           "in the formgrader first" in err


def test_gradebook_export_leaves_a_missing_submission_empty(results, course, tmp_path):
    export("--format", "moodle", "-o", tmp_path / "lms.csv", "--results", results, "--gradebook", course)
    assert exported_rows(tmp_path / "lms.csv")["cy"][1] == "-"


def test_gradebook_export_keeps_a_held_submission_without_a_score(results, course, tmp_path, capsys):
    export("--format", "moodle", "-o", tmp_path / "lms.csv", "--results", results, "--gradebook", course)
    assert exported_rows(tmp_path / "lms.csv")["cy"][0] == "-"
    assert f"python -m autograder release {EX2} cy --results {results / EX2}" in capsys.readouterr().err


def test_gradebook_export_refuses_points_recorded_before_a_release(results, course, tmp_path, capsys):
    cli.main(["release", EX2, "cy", "--results", str(results / EX2)])  # 5 points now; the gradebook still has 0
    export("--format", "moodle", "-o", tmp_path / "lms.csv", "--results", results, "--gradebook", course)
    assert exported_rows(tmp_path / "lms.csv")["cy"][0] == "-"
    err = capsys.readouterr().err
    assert f"{EX2}, cy: no score yet, the gradebook has 0 automatic points, its result 5" in err
    assert f"--gradebook {course}" in err


def test_gradebook_export_refuses_a_result_never_recorded_in_the_gradebook(results, course, tmp_path, capsys):
    save(results, EX3, "dan", 1.0)  # graded after the last --gradebook run
    export("--format", "moodle", "-o", tmp_path / "lms.csv", "--results", results, "--gradebook", course)
    assert exported_rows(tmp_path / "lms.csv")["dan"] == ["-", "-"]
    assert f"{EX3}, dan: no score yet, graded, but not in the gradebook" in capsys.readouterr().err


def test_gradebook_export_takes_a_submission_only_the_gradebook_has(results, course, tmp_path):
    with Gradebook(course) as opened:  # autograded by plain nbgrader, not by this grader
        opened.add_student("eve")
        with opened.db.no_autoflush:
            opened.add_submission(EX2, "eve")
        for name, points in (("check_layer_norm", 2.0), ("check_LayerNorm", 2.0),
                             ("check_layer_norm_forward_backward", 0.0)):
            graded = opened.find_grade(name, EX2, EX2, "eve")
            graded.auto_score, graded.needs_manual_grade = points, False
        opened.db.commit()
    export(EX2, "--format", "moodle", "-o", tmp_path / "lms.csv", "--results", results, "--gradebook", course)
    assert exported_rows(tmp_path / "lms.csv")["eve"] == ["4"]


def test_gradebook_export_needs_no_results_folder(results, course, tmp_path, monkeypatch):
    (tmp_path / "empty_course").mkdir()
    monkeypatch.chdir(tmp_path / "empty_course")  # no results/ here
    assert export("--format", "canvas", "-o", "lms.csv", "--gradebook", course) == 0
    rows = exported_rows(tmp_path / "empty_course" / "lms.csv")
    assert rows["Points Possible"][-2:] == ["10", "10"] and rows["ada"][-2:] == ["10", "9.5"]


def test_gradebook_export_never_writes_to_the_gradebook(results, course, tmp_path):
    before = (tmp_path / "gradebook.db").read_bytes()
    export("--format", "canvas", "-o", tmp_path / "lms.csv", "--results", results, "--gradebook", course)
    assert (tmp_path / "gradebook.db").read_bytes() == before


def test_export_without_gradebook_says_the_written_answers_points_are_left_out(results, tmp_path, capsys):
    export("--format", "canvas", "-o", tmp_path / "lms.csv", "--results", results)
    err = capsys.readouterr().err
    assert f"{EX3}: the points graded by hand (written_answer: 3 points) are not in" in err
    assert "--gradebook sqlite:///gradebook.db" in err and f"{EX2}:" not in err


def test_export_with_gradebook_says_nothing_about_left_out_points(results, course, tmp_path, capsys):
    export("--format", "canvas", "-o", tmp_path / "lms.csv", "--results", results, "--gradebook", course)
    assert "graded by hand (" not in capsys.readouterr().err


def a_text_file(tmp_path):
    (tmp_path / "notes.db").write_text("not a database\n" * 100)
    return f"sqlite:///{tmp_path / 'notes.db'}"


BAD_GRADEBOOKS = {
    # name -> (the --gradebook value, extra arguments, words the error must contain)
    "no such file": (lambda t: f"sqlite:///{t / 'nowhere.db'}", [], ["no gradebook at", "nowhere.db",
                                                                      "--gradebook sqlite:///gradebook.db"]),
    "a path, not a URL": (lambda t: str(t / "gradebook.db"), [], ["cannot read", "as nbgrader's gradebook",
                                                                 "--gradebook sqlite:///gradebook.db"]),
    "a file that is not a database": (a_text_file, [], ["cannot read", "notes.db", "as nbgrader's gradebook"]),
    "an assignment it does not have": (lambda t: f"sqlite:///{t / 'gradebook.db'}", ["ex5_rmsnorm"],
                                       ["has no assignment ex5_rmsnorm", "nbgrader generate_assignment ex5_rmsnorm"]),
}


@pytest.mark.parametrize("case", BAD_GRADEBOOKS)
def test_a_gradebook_it_cannot_use_is_an_error_that_names_the_fix(results, course, tmp_path, capsys, case):
    url, arguments, words = BAD_GRADEBOOKS[case]
    save(results, "ex5_rmsnorm", "ada", 1.0)
    assert export(*arguments, "--format", "canvas", "-o", tmp_path / "lms.csv", "--results", results,
                  "--gradebook", url(tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    assert all(word in err for word in words), err
    assert not (tmp_path / "lms.csv").exists()


# --- lateness: the penalty comes off the exported score -----------------------------------------------------


def late(results, assignment, student, percent):
    """What `grade` writes for a submission late by two started days under 10 % per day: ``percent`` of the
    maximum, capped at the score."""
    path = results / assignment / f"{student}.json"
    data = json.loads(path.read_text())
    penalty = min(data["score"], percent / 100 * data["extra_data"]["max_score"])
    data["extra_data"]["late"] = {"submitted_at": "2026-11-21T00:59:00+00:00", "source": "timestamp.txt",
                                  "due": "2026-11-20T00:59:00+01:00", "seconds_late": 90000.0, "penalty": penalty,
                                  "policy": "10 % of the maximum per started day late, at most 30 %",
                                  "flagged": True, "percent": percent}
    report.save(results / assignment, data)


def test_a_late_penalty_capped_at_a_held_score_is_taken_again_from_the_released_score(results, tmp_path):
    late(results, EX2, "cy", 20)  # held: 0 points counted, so the penalty is 0 until release
    assert cli.main(["release", EX2, "cy", "--results", str(results / EX2)]) == 0
    assert json.loads((results / EX2 / "cy.json").read_text())["extra_data"]["late"]["penalty"] == 2
    export("--format", "canvas", "-o", tmp_path / "grades.csv", "--results", results)
    assert "cy,,cy,,3,\n" in (tmp_path / "grades.csv").read_text()


def test_a_penalty_the_gradebook_does_not_have_leaves_the_grade_empty_with_the_command_that_records_it(
        results, course, tmp_path, capsys):
    late(results, EX2, "ada", 20)  # course.toml changed after the last `grade --gradebook`
    export("--format", "moodle", "-o", tmp_path / "lms.csv", "--results", results, "--gradebook", course)
    assert exported_rows(tmp_path / "lms.csv")["ada"][0] == "-"
    err = capsys.readouterr().err
    assert f"{EX2}, ada: no score yet, the gradebook has a late penalty of 0, its result 2" in err
    assert f"--gradebook {course}" in err
