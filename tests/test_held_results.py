"""A task held for review is shown as held in every view of the grades, and ``release`` turns it into its score.

The results are made directly (``report.result`` with a ``PartScore`` whose ``held`` is the
measured score and whose score is 0, as grading leaves a held task), so these tests check the
views, not what decides a hold. The views: the results JSON as Gradescope shows it, the
learner's feedback, ``grades.csv``, nbgrader's gradebook (what the formgrader reads), the
formgrader's copy of the notebook (what ``nbgrader generate_feedback`` renders), ``nbgrader
export`` with the course's exporter and the LMS export. The last tests run nbgrader's own
commands in a course folder, before and after ``release``. Two small things of the ``grade``
command are here too: the summary's counts, and a folder with no notebook in it.
"""

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
from nbconvert.filters.markdown_mistune import markdown2html_mistune
from nbgrader.api import Gradebook

from autograder import cli, gradebook, gradescope, report, scoring
from tests.grading import REPO, reference, run_grader

EX2 = "ex2_layernorm"
HELD = "LayerNorm"  # the task held in these tests (2 points); layer_norm (3) and the backward task (5) are not
SCRIPT = "<img src=x onerror=alert(1)>"
WHY = f"cell 7, line 3: reaches into the autograd graph (grad_fn.next_functions): `g = y.grad_fn  # {SCRIPT}`"
NOTE = f"held for your instructor's review: {WHY} (measured: 2 / 2)"


def scored(assignment: str = EX2, held: tuple[str, ...] = (HELD,), failed: tuple[str, ...] = ()) -> list:
    """Every part of ``assignment`` with every test passed but the tests named in ``failed`` (part.test); the
    parts in ``held`` as grading leaves a held part: score 0, the measured score in ``held``, the tests at 0."""
    parts = []
    for part in scoring.collect(assignment):
        outcomes = []
        for test in part.tests:
            passed = f"{part.name}.{test.name}" not in failed
            outcomes.append(scoring.Outcome(part.name, test.name, test.points if passed else 0.0, test.points, passed,
                                            "" if passed else "the output differs from the expected one", test.hint,
                                            "passed" if passed else "failed"))
        measured = sum(outcome.points for outcome in outcomes)
        if part.name in held:
            for outcome in outcomes:
                outcome.points = 0.0
            parts.append(scoring.PartScore(part.name, part.title, 0.0, part.points, outcomes,
                                           note=f"held for your instructor's review: {WHY} (measured: {measured:g} / "
                                                f"{part.points:g})", held=measured))
        else:
            parts.append(scoring.PartScore(part.name, part.title, measured, part.points, outcomes))
    return parts


def held_result(student: str = "ada", digest: str = "digest", **options) -> dict:
    """The result grading writes for ``scored(**options)``: status ``review`` when a part is held."""
    status = "review" if options.get("held", (HELD,)) else "ok"
    problems = [f"held for review: {WHY}"] if status == "review" else []
    return report.result(EX2, student, digest, status, scored(**options), problems, 1.0, "namespaces")


@pytest.fixture
def results(tmp_path) -> Path:
    """ada: LayerNorm held (measured 2 / 2), a layer_norm test of 0.5 failed (7.5 counted); ben: 10, none held."""
    folder = tmp_path / "results" / EX2
    report.save(folder, held_result(failed=("layer_norm.works_for_any_number_of_leading_dimensions",)))
    report.save(folder, held_result("ben", held=()))
    report.grades_csv(folder)
    return folder


def saved(results: Path, student: str = "ada") -> dict:
    return json.loads((results / f"{student}.json").read_text())


def held_tests(data: dict) -> list[dict]:
    return [test for test in data["tests"] if test["name"].startswith("Task 2: LayerNorm >")]


# --- Gradescope: the results JSON ---------------------------------------------------------------------------


def test_on_gradescope_each_held_test_and_no_other_says_it_is_held_in_a_result_the_schema_accepts(results):
    data = saved(results)
    tests = held_tests(data)
    assert tests and all("held for your instructor's review" in test["name"].lower() for test in tests)
    assert all(test["output"].startswith("Held for your instructor's review: ") for test in tests)
    assert [test["score"] for test in tests] == [0] * len(tests)
    others = [test for test in data["tests"] if test not in tests]
    assert others and not [test for test in others if "held" in json.dumps(test).lower()]
    gradescope.checked_json(data)  # raises BadResults if Gradescope's schema refuses it


def test_on_gradescope_a_held_test_keeps_the_status_it_measured(results):
    assert {test["status"] for test in held_tests(saved(results))} == {"passed"}
    assert min(test["extra_data"]["held"] for test in held_tests(saved(results))) > 0


# --- the learner's feedback and grades.csv ------------------------------------------------------------------


def test_feedback_shows_a_held_test_as_held_not_as_failed_or_as_zero(results):
    task = (results / "feedback" / "ada.md").read_text().split("## Task 2: LayerNorm")[1].split("## ")[0]
    held = [line for line in task.splitlines() if line.startswith("- ")]
    assert held and all(line.startswith("- ⏸ held for review, measured passed (") for line in held)
    assert "(0 / " not in task and "❌" not in task


def test_feedback_names_each_held_task_and_its_measured_points_above_the_notes(results):
    page = (results / "feedback" / "ada.md").read_text()
    top = page.split("## Notes on your submission")[0]
    assert "Held for your instructor's review:** Task 2: LayerNorm (2 / 2 measured)" in top


def test_grades_csv_leaves_a_held_score_empty_with_status_review(results):
    rows = {row["student_id"]: row for row in csv.DictReader((results / "grades.csv").open())}
    assert (rows["ada"]["score"], rows["ada"]["status"]) == ("", "review")
    assert (rows["ben"]["score"], rows["ben"]["status"]) == ("10.0", "ok")


# --- release ------------------------------------------------------------------------------------------------


def release(results: Path, *students: str, gradebook_url: str | None = None) -> int:
    return cli.main(["release", EX2, *students, "--results", str(results)]
                    + (["--gradebook", gradebook_url] if gradebook_url else []))


def test_release_gives_the_held_part_its_measured_score_and_leaves_the_other_parts(results):
    before = saved(results)["extra_data"]["parts"]
    assert release(results, "ada") == 0
    after = saved(results)
    parts = after["extra_data"]["parts"]
    assert parts[HELD]["score"] == 2.0 and "held" not in parts[HELD]
    assert {name: parts[name] for name in parts if name != HELD} == {n: before[n] for n in before if n != HELD}
    assert after["score"] == sum(part["score"] for part in parts.values()) == 9.5
    assert after["extra_data"]["status"] == "ok"


@pytest.mark.parametrize("status", ["cell_errors", "timeout", "forbidden"])
def test_release_restores_the_status_the_submission_had_besides_the_hold(tmp_path, status):
    folder = tmp_path / "results" / EX2
    data = held_result()
    data["extra_data"]["status_after_release"] = status
    report.save(folder, data)
    assert release(folder, "ada") == 0
    assert saved(folder)["extra_data"]["status"] == status


def test_after_release_nothing_on_gradescope_says_held_and_each_test_has_its_measured_points(results):
    release(results, "ada")
    data = saved(results)
    assert data["output"].startswith("ada: 9.5 / 10 (graded)") and "released by the instructor" in data["output"]
    assert "held for your" not in json.dumps(data).lower()
    assert [test["score"] for test in held_tests(data)] == [test["max_score"] for test in held_tests(data)]


def test_release_turns_the_held_marks_of_the_feedback_into_the_measured_ones(results):
    before = (results / "feedback" / "ada.md").read_text()
    release(results, "ada")
    after = (results / "feedback" / "ada.md").read_text()
    assert "⏸ held" in before and "**Score: 7.5 / 10**" in before
    assert "⏸" not in after and "**Score: 9.5 / 10**" in after
    assert "- ✅ passed (0.5 / 0.5): has weight and bias parameters of the normalized shape" in after


def test_release_turns_the_empty_held_score_of_grades_csv_into_the_released_score(results):
    def ada() -> tuple[str, str]:
        row = next(row for row in csv.DictReader((results / "grades.csv").open()) if row["student_id"] == "ada")
        return row["score"], row["status"]

    before = ada()
    release(results, "ada")
    assert (before, ada()) == (("", "review"), ("9.5", "ok"))


# --- the summary that `grade` prints, and folders without notebooks -----------------------------------------


STATUSES = ["ok"] * 6 + ["cell_errors", "review", "timeout"]  # the class of the issue: 9 submissions


@pytest.fixture
def summary(capsys) -> str:
    entries = [SimpleNamespace(student_id=f"s{i}") for i in range(len(STATUSES))]
    rows = [{"student_id": f"s{i}", "score": 0.0 if status == "review" else 10.0, "max_score": 10.0,
             "status": status, "held": status == "review"} for i, status in enumerate(STATUSES)]
    cli.summarize(EX2, entries, 0, rows, Path("results"), 9.0, 1, "namespaces")
    return capsys.readouterr().out


def status_lines(summary: str) -> dict[str, tuple[int, str]]:
    """status -> (count, what it means) from the summary's table of statuses."""
    lines = summary.split("by status:\n")[1].splitlines()
    table = [line.split(maxsplit=2) for line in lines if line.startswith("    ")]
    return {status: (int(count), meaning) for count, status, meaning in table}


def test_summary_counts_of_each_status_add_up_to_the_submissions(summary):
    assert "9 submissions by status:" in summary
    assert sum(count for count, _ in status_lines(summary).values()) == 9
    assert {status: count for status, (count, _) in status_lines(summary).items()} == \
        {"ok": 6, "cell_errors": 1, "review": 1, "timeout": 1}


def test_summary_says_what_each_status_count_is(summary):
    meanings = {status: meaning for status, (_, meaning) in status_lines(summary).items()}
    assert meanings["timeout"] == report.STATUS_TEXT["timeout"] and "held" in meanings["review"]
    assert "errors:" not in summary


def test_summary_mean_leaves_held_scores_out(summary):
    assert "mean 10.00 / 10.0" in summary and "of the 8 with nothing held" in summary


def test_summary_names_the_students_held_for_review_and_where_their_notes_are(summary):
    assert "held for review: s7 (read the notes in results/feedback/STUDENT_ID.md, then `python -m autograder " \
           f"release {EX2} STUDENT_ID`" in summary


def test_summary_names_at_most_ten_held_students_and_counts_the_rest(capsys):
    entries = [SimpleNamespace(student_id=f"s{i:02d}") for i in range(12)]
    rows = [{"student_id": f"s{i:02d}", "score": 0.0, "max_score": 10.0, "status": "review", "held": True}
            for i in range(12)]
    cli.summarize(EX2, entries, 0, rows, Path("results"), 9.0, 1, "namespaces")
    assert "held for review: s00, s01, s02, s03, s04, s05, s06, s07, s08, s09 and 2 more (grades.csv: status " \
           "review)" in capsys.readouterr().out


def empty_folder(tmp_path: Path) -> Path:
    (tmp_path / "empty").mkdir()
    return tmp_path / "empty"


def course_without_the_assignment(tmp_path: Path) -> Path:
    (tmp_path / "course" / "submitted" / "ada" / "ex3_batchnorm").mkdir(parents=True)
    return tmp_path / "course"


@pytest.mark.parametrize("make, words", [
    (empty_folder, "it holds no .ipynb file"),
    (course_without_the_assignment, f"has an {EX2}/ folder"),
])
def test_a_path_with_no_notebook_is_named_among_others_that_have_one(tmp_path, capsys, make, words):
    folder = make(tmp_path)
    (tmp_path / "fay.ipynb").write_text("{not a notebook")  # graded as invalid, with no sandbox to start
    assert cli.main(["grade", EX2, str(tmp_path / "fay.ipynb"), str(folder), "--results", str(tmp_path / "out"),
                     "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"warning: passed over {folder}: " in err and words in err


# --- nbgrader's gradebook, the formgrader's copy, the exports -----------------------------------------------


def release_into(opened: Gradebook, assignment: str) -> None:
    """Record the release's graded cells as `nbgrader generate_assignment` does (nbgrader's API, no command)."""
    notebook = json.loads((REPO / "exercises" / assignment / f"{assignment}.ipynb").read_text())
    opened.update_or_create_assignment(assignment)
    opened.update_or_create_notebook(assignment, assignment)
    for cell in notebook["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("grade"):
            opened.update_or_create_grade_cell(meta["grade_id"], assignment, assignment, max_score=meta["points"],
                                               cell_type=cell["cell_type"])
        if meta.get("solution") or meta.get("grade") or meta.get("locked"):
            opened.update_or_create_source_cell(meta["grade_id"], assignment, assignment,
                                                cell_type=cell["cell_type"], locked=bool(meta.get("locked")),
                                                source="".join(cell["source"]))
        if meta.get("solution"):
            opened.update_or_create_solution_cell(meta["grade_id"], assignment, assignment)


def gradebook_of(folder: Path, *assignments: str) -> Path:
    """A gradebook in ``folder`` that knows the releases of ``assignments``."""
    activated = f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", activated)  # a new gradebook runs `alembic`, on the activated environment's PATH
        with Gradebook(f"sqlite:///{folder / 'gradebook.db'}") as opened:
            for assignment in assignments:
                release_into(opened, assignment)
    return folder / "gradebook.db"


@pytest.fixture(scope="module")
def empty_gradebook(tmp_path_factory) -> Path:
    """A gradebook that knows ex2's release (made once: a new gradebook runs nbgrader's migrations)."""
    return gradebook_of(tmp_path_factory.mktemp("gradebook"), EX2)


@pytest.fixture
def course(results, empty_gradebook, tmp_path) -> str:
    """A course folder (tmp_path): the gradebook, ada's and ben's notebooks, ``results`` recorded there as
    ``grade --gradebook`` records them; the gradebook's URL."""
    shutil.copy(empty_gradebook, tmp_path / "gradebook.db")
    for student in ("ada", "ben"):
        (tmp_path / "submitted" / student / EX2).mkdir(parents=True)
        (tmp_path / "submitted" / student / EX2 / f"{EX2}.ipynb").write_text(json.dumps(reference(EX2)))
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url) as opened:
        gradebook.record(opened, EX2, results, ["ada", "ben"])
    return url


@pytest.fixture
def remembered(course, results) -> str:
    """``course``, whose gradebook the results remember, as ``grade --gradebook`` leaves them for ``release``."""
    report.remember_gradebook(results, course)
    return course


def grade_of(url: str, cell: str, student: str = "ada") -> dict:
    """What the formgrader's page gets for one score box (its /formgrader/api/grades answer)."""
    with Gradebook(url) as opened:
        return opened.find_grade(cell, EX2, EX2, student).to_dict()


def test_only_the_held_task_needs_a_manual_grade_in_the_gradebook_with_no_automatic_score(course):
    graded = {cell: grade_of(course, cell) for cell in ("check_layer_norm", f"check_{HELD}")}
    assert {cell: (grade["auto_score"], grade["manual_score"], grade["needs_manual_grade"])
            for cell, grade in graded.items()} == {"check_layer_norm": (2.5, None, False),
                                                   f"check_{HELD}": (None, None, True)}


def test_the_formgrader_lists_a_submission_with_a_held_task_as_needing_a_manual_grade(course):
    with Gradebook(course) as opened:  # what the formgrader's table of submissions shows
        flags = {row["student"]: row["needs_manual_grade"] for row in opened.notebook_submission_dicts(EX2, EX2)}
    assert flags == {"ada": True, "ben": False}


def formgrader_cells(course: str, student: str = "ada") -> list:
    import nbformat

    folder = Path(course[len("sqlite:///"):]).parent
    return nbformat.read(folder / "autograded" / student / EX2 / f"{EX2}.ipynb", as_version=4).cells


def test_the_formgrader_copy_has_a_note_above_the_held_grade_cell_only_with_the_measured_score(course):
    cells = formgrader_cells(course)
    (index,) = [i for i, cell in enumerate(cells) if cell.metadata.get("nbgrader", {}).get("grade_id")
                == f"check_{HELD}"]
    notes = [i for i, cell in enumerate(cells) if "Held for your instructor's review" in cell.source]
    assert notes == [index - 1] and cells[index - 1].cell_type == "markdown"
    assert "measured 2 / 2 points" in cells[index - 1].source
    assert not [cell for cell in formgrader_cells(course, "ben") if "Held for your" in cell.source]


def test_the_held_note_shows_the_results_words_as_text_never_as_markup(course):
    (note,) = [cell for cell in formgrader_cells(course) if "Held for your instructor's review" in cell.source]
    html = markdown2html_mistune(note.source)
    assert "<img" not in html and "&lt;img" in html


def test_release_records_the_measured_score_in_the_gradebook_that_grade_remembered(remembered, results, capsys):
    assert release(results, "ada") == 0
    graded = grade_of(remembered, f"check_{HELD}")
    assert (graded["auto_score"], graded["needs_manual_grade"]) == (2.0, False)
    assert f"recorded in the gradebook {remembered}" in capsys.readouterr().out


def test_release_records_the_measured_score_in_the_gradebook_it_is_given(course, results):
    assert release(results, "ada", gradebook_url=course) == 0
    graded = grade_of(course, f"check_{HELD}")
    assert (graded["auto_score"], graded["needs_manual_grade"]) == (2.0, False)


def test_release_takes_the_held_note_out_of_the_formgrader_copy(remembered, results):
    release(results, "ada")
    assert not [cell for cell in formgrader_cells(remembered) if "Held for your" in cell.source]


def test_release_removes_nbgraders_feedback_that_showed_the_held_score(remembered, results, capsys):
    page = Path(remembered[len("sqlite:///"):]).parent / "feedback" / "ada" / EX2 / f"{EX2}.html"
    page.parent.mkdir(parents=True)
    page.write_text("<h4>ex2_layernorm (Score: 7.5 / 10.0)</h4>")
    release(results, "ada")
    assert not page.parent.exists()  # `nbgrader generate_feedback` passes over a submission whose folder exists
    assert f"`nbgrader generate_feedback {EX2}` writes it again" in capsys.readouterr().out


def test_lms_export_takes_nbgraders_total_once_each_held_task_has_a_score_typed_in_the_formgrader(course, results,
                                                                                                tmp_path):
    with Gradebook(course) as opened:
        typed = opened.find_grade(f"check_{HELD}", EX2, EX2, "ada")
        typed.manual_score, typed.needs_manual_grade = 1.0, False  # what the formgrader saves
        opened.db.commit()
        gradebook.record(opened, EX2, results, ["ada"])  # `grade --gradebook` again keeps what was typed
    assert cli.main(["export", EX2, "--format", "moodle", "-o", str(tmp_path / "lms.csv"), "--results",
                     str(results.parent), "--gradebook", course]) == 0
    rows = {row[0]: row[1:] for row in csv.reader((tmp_path / "lms.csv").open())}
    assert rows["ada"] == ["8.5"]  # 7.5 automatic + 1 typed by hand


def test_nbgraders_export_with_the_course_exporter_names_the_held_cell(course, tmp_path):
    exporter = gradebook.CsvExport(to=str(tmp_path / "grades.csv"))
    with Gradebook(course) as opened:
        exporter.export(opened)
    rows = {row["student_id"]: row for row in csv.DictReader((tmp_path / "grades.csv").open())}
    assert rows["ada"]["needs_manual_grade"] == f"check_{HELD} (held for review)"
    assert rows["ben"]["needs_manual_grade"] == "" and float(rows["ben"]["score"]) == 10.0


# --- with nbgrader's own commands, in a course folder, before and after `release` ---------------------------


def nbgrader(args: list[str], course: Path) -> subprocess.CompletedProcess:
    """An nbgrader command run in the course folder, the grader importable as it is from the repository's top."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"nbgrader {' '.join(args)}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done


@dataclass
class View:
    """What nbgrader showed of ada's submission at one moment."""

    feedback_page: str
    export: dict[str, dict]  # student -> row of grades.csv (nbgrader export with the course's exporter)
    grade: dict  # check_LayerNorm's grade, as the formgrader's page gets it


@dataclass
class Day:
    held: View
    released: View
    release: subprocess.CompletedProcess
    feedback_again: subprocess.CompletedProcess


def view(folder: Path) -> View:
    nbgrader(["export", "--exporter", "autograder.gradebook.CsvExport"], folder)
    rows = {row["student_id"]: row for row in csv.DictReader((folder / "grades.csv").open())}
    page = (folder / "feedback" / "ada" / EX2 / f"{EX2}.html").read_text()
    return View(page, rows, grade_of(f"sqlite:///{folder / 'gradebook.db'}", f"check_{HELD}"))


@pytest.fixture(scope="module")
def day(tmp_path_factory) -> Day:
    """ex2 released into a course folder; ada's LayerNorm held, ben's nothing; `grade --gradebook` records their
    (current) results; nbgrader's feedback and export; `release ada`; nbgrader's feedback (no --force), export."""
    folder = tmp_path_factory.mktemp("course")
    shutil.copy(REPO / "nbgrader_config.py", folder)
    shutil.copytree(REPO / "solutions" / EX2, folder / "solutions" / EX2)
    nbgrader(["generate_assignment", EX2, "--force"], folder)
    for student in ("ada", "ben"):
        notebook = folder / "submitted" / student / EX2 / f"{EX2}.ipynb"
        notebook.parent.mkdir(parents=True)
        notebook.write_text(json.dumps(reference(EX2)))
        digest = hashlib.sha256(notebook.read_bytes()).hexdigest()  # current: `grade` records without grading
        report.save(folder / "results" / EX2, held_result(student, digest, held=(HELD,) if student == "ada" else ()))
    graded = run_grader("grade", EX2, ".", "--gradebook", "sqlite:///gradebook.db", "--quiet", cwd=folder)
    assert graded.returncode == 0 and "2 unchanged since the last run" in graded.stdout, graded.stderr
    nbgrader(["generate_feedback", EX2], folder)
    held = view(folder)
    released = run_grader("release", EX2, "ada", cwd=folder)
    assert released.returncode == 0, released.stderr
    again = nbgrader(["generate_feedback", EX2], folder)
    return Day(held, view(folder), released, again)


nbgrader_day = pytest.mark.slow(pytest.mark.nbgrader)


@nbgrader_day
def test_nbgraders_feedback_page_says_the_task_is_held_with_its_measured_score(day):
    assert "Held for your instructor's review" in day.held.feedback_page
    assert "measured 2 / 2 points" in day.held.feedback_page


@nbgrader_day
def test_nbgraders_feedback_page_is_written_again_after_release_without_force(day):
    assert "Held for your instructor's review" not in day.released.feedback_page
    assert "(Score: 10.0 / 10.0)" in day.released.feedback_page


@nbgrader_day
def test_nbgraders_export_names_the_held_cell_then_counts_its_released_score(day):
    assert day.held.export["ada"]["needs_manual_grade"] == f"check_{HELD} (held for review)"
    assert float(day.held.export["ada"]["score"]) == 8.0
    assert (day.released.export["ada"]["needs_manual_grade"], float(day.released.export["ada"]["score"])) == \
        ("", 10.0)


@nbgrader_day
def test_the_formgrader_score_box_of_the_held_task_needs_a_grade_then_shows_the_released_one(day):
    assert (day.held.grade["auto_score"], day.held.grade["needs_manual_grade"]) == (None, True)
    assert (day.released.grade["auto_score"], day.released.grade["needs_manual_grade"]) == (2.0, False)
