"""``python -m autograder export`` writes the CSV that Canvas's and Moodle's grade imports read.

The results are written by the grader's own writer (``report.save``) with chosen scores, so the
export is checked on exactly the files ``grade`` and ``release`` leave, without grading anything.
The expected files follow each importer's rules: Canvas reads a header of ``Student, ID, SIS
Login ID, Section`` and a ``Points Possible`` row; Moodle stops at any row that is not a student
and reads ``-`` as "no grade".
"""

import csv
import json

import pytest

from autograder import cli, report, scoring

EX2, EX3 = "ex2_layernorm", "ex3_batchnorm"


def save(results, assignment, student, fraction, status="ok"):
    """A result as the grader writes it: every task at ``fraction`` of its points (held, for ``review``)."""
    parts = [scoring.PartScore(p.name, p.title, round(p.points * fraction, 4), p.points)
             for p in scoring.collect(assignment)]
    if status == "review":
        parts = scoring.hold(parts, "held for your instructor's review: it calls a built-in by a name made at run time")
    report.save(results / assignment, report.result(assignment, student, "digest", status, parts, [], 1.0,
                                                    "namespaces"))


@pytest.fixture
def results(tmp_path):
    """ada did both; ben did both, ex2 with a cell error; cy's ex2 is held for review and cy skipped ex3."""
    folder = tmp_path / "results"
    save(folder, EX2, "ada", 1.0)
    save(folder, EX2, "ben", 0.4, "cell_errors")
    save(folder, EX2, "cy", 0.5, "review")
    save(folder, EX3, "ada", 1.0)
    save(folder, EX3, "ben", 0.5)
    return folder


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
