"""Lateness, the Canvas user id and several notebooks from one student, through the real commands.

One course folder, graded once (module fixture): ``course.toml`` sets a due date for ex2 and a policy
of 10 % per started day after a 10-minute grace, at most 30 %, with Europe/Berlin for zip times. The
class:

- ada: ``timestamp.txt`` (as ``nbgrader zip_collect`` writes it, UTC) 25 hours after the due date;
- ben: ``timestamp.txt`` (as ``nbgrader collect`` writes it, with its zone) 5 minutes late, in the grace;
- cy: a blank ``ex2_layernorm.ipynb`` and a correct ``cy_final.ipynb`` in one folder;
- from a Canvas zip collected by ``nbgrader zip_collect`` with the course's plugins: okaforchi, marked
  ``LATE_``, whose zip entry is dated 03:00 Berlin time (02:00 UTC, 2 hours late);
- from the same zip, Moodle-named: Dana Smith, on time;
- eveeve, a Canvas file marked ``LATE_`` put loose beside the zip: no time is known.

Then the course is copied twice: once with the policy set to "none" and graded again (nothing is
regraded, only the penalty changes), once recorded in nbgrader's gradebook (``nbgrader export`` and
``python -m autograder export --gradebook`` must agree).
"""

import csv
import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from autograder import cli
from tests.grading import REPO, blank, reference, run_grader
from tests.test_lms_export import release_into

pytestmark = [pytest.mark.slow, pytest.mark.nbgrader]

EX2 = "ex2_layernorm"
COURSE_TOML = """[due]
ex2_layernorm = 2026-11-20T00:59:00+01:00

[lateness]
policy = "per_day"
penalty = 10
cap = 30
grace_minutes = 10
timezone = "Europe/Berlin"
"""
POLICY = "10 % of the maximum per started day late after a grace period of 10 minutes, at most 30 %"
CY_MARK = "# cy's final version"
CANVAS_CHI = "okaforchi_LATE_104_9004_ex2_layernorm.ipynb"
MOODLE_DANA = "Dana Smith_77_assignsubmission_file_ex2_layernorm.ipynb"
CANVAS_EVE = "eveeve_LATE_105_9005_ex2_layernorm.ipynb"


def env() -> dict:
    """The tests' environment activated, the course's plugins importable as from the course folder."""
    return {**os.environ, "PYTHONPATH": str(REPO),
            "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}"}


def nbgrader(*args, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def put(folder: Path, name: str, notebook: dict, timestamp: str | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(notebook))
    if timestamp is not None:
        (folder / "timestamp.txt").write_text(timestamp)


def lms_download(archive: Path) -> None:
    """Canvas's and Moodle's names in one zip, each entry dated in Berlin time; a loose file beside it."""
    archive.mkdir(parents=True)
    with zipfile.ZipFile(archive / "submissions.zip", "w") as download:
        download.writestr(zipfile.ZipInfo(CANVAS_CHI, (2026, 11, 20, 3, 0, 0)), json.dumps(reference(EX2)))
        download.writestr(zipfile.ZipInfo(MOODLE_DANA, (2026, 11, 19, 12, 0, 0)), json.dumps(reference(EX2)))
    (archive / CANVAS_EVE).write_text(json.dumps(reference(EX2)))


@dataclass
class Graded:
    course: Path
    collected: subprocess.CompletedProcess
    graded: subprocess.CompletedProcess

    def result(self, student: str) -> dict:
        return json.loads((self.course / "results" / EX2 / f"{student}.json").read_text())

    def row(self, student: str) -> dict:
        rows = csv.DictReader((self.course / "results" / EX2 / "grades.csv").open())
        return next(row for row in rows if row["student_id"] == student)

    def feedback(self, student: str) -> str:
        return (self.course / "results" / EX2 / "feedback" / f"{student}.md").read_text()

    def export(self, fmt: str, *extra: str) -> dict[str, list[str]]:
        out = self.course / f"{fmt}{len(extra)}.csv"
        assert cli.main(["export", EX2, "--format", fmt, "-o", str(out), "--results",
                         str(self.course / "results"), *extra]) == 0
        return {row[0]: row[1:] for row in csv.reader(out.open())}


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Graded:
    course = tmp_path_factory.mktemp("late") / "course"
    course.mkdir()
    shutil.copy(REPO / "nbgrader_config.py", course)
    shutil.copytree(REPO / "exercises" / EX2, course / "exercises" / EX2)
    (course / "course.toml").write_text(COURSE_TOML)
    submitted = course / "submitted"
    put(submitted / "ada" / EX2, f"{EX2}.ipynb", reference(EX2), "2026-11-21 00:59:00")
    put(submitted / "ben" / EX2, f"{EX2}.ipynb", reference(EX2), "2026-11-20 00:04:00.000000 UTC")
    put(submitted / "cy" / EX2, f"{EX2}.ipynb", blank(EX2))
    final = reference(EX2)
    final["cells"].append({"cell_type": "code", "metadata": {}, "source": CY_MARK, "outputs": [],
                           "execution_count": None})
    put(submitted / "cy" / EX2, "cy_final.ipynb", final)
    lms_download(course / "downloaded" / EX2 / "archive")
    collected = nbgrader("zip_collect", EX2, cwd=course)
    done = run_grader("grade", EX2, ".", "--jobs", "2", "--quiet", cwd=course)
    assert done.returncode == 0, done.stdout + done.stderr
    return Graded(course, collected, done)


# ---- submission times and the Canvas user id from the LMS's zip ------------------------------------------


def test_zip_collect_writes_the_zip_entrys_time_in_the_course_time_zone_to_timestamp_txt(graded):
    # 03:00 in Berlin (UTC+1 in November) is 02:00 UTC; nbgrader's timestamp.txt is UTC without a zone
    assert (graded.course / "submitted" / "okaforchi" / EX2 / "timestamp.txt").read_text() == "2026-11-20 02:00:00"


def test_zip_collect_files_a_moodle_named_submission_under_the_full_name(graded):
    folder = graded.course / "submitted" / "danasmith" / EX2
    assert (folder / f"{EX2}.ipynb").is_file() and (folder / "timestamp.txt").read_text() == "2026-11-19 11:00:00"


def test_a_zip_time_is_the_lateness_source_and_gives_the_penalty(graded):
    late = graded.result("okaforchi")["extra_data"]["late"]
    assert (late["source"], late["submitted_at"], late["seconds_late"], late["penalty"]) == \
        ("zip", "2026-11-20T02:00:00+00:00", 2 * 3600 + 60, 1.0)


def test_the_canvas_user_id_is_kept_in_the_result_and_the_canvas_exports_id_column(graded):
    assert graded.result("okaforchi")["extra_data"]["lms"] == {"canvas_user_id": "104"}
    assert graded.export("canvas")["okaforchi"][:2] == ["104", "okaforchi"]


def test_a_canvas_late_mark_without_a_time_flags_the_submission_late_without_a_penalty(graded):
    late = graded.result("eveeve")["extra_data"]["late"]
    assert (late["source"], late["flagged"], late["penalty"], late["submitted_at"]) == ("canvas-name", True, 0.0, None)
    assert "no penalty was computed" in late["note"] and "no penalty was computed" in graded.feedback("eveeve")
    assert (graded.row("eveeve")["late"], graded.row("eveeve")["penalty"]) == ("yes", "0")


# ---- the penalty in every view ----------------------------------------------------------------------------


def test_a_timestamp_25_hours_late_loses_two_started_days_at_10_percent(graded):
    data = graded.result("ada")
    late = data["extra_data"]["late"]
    assert data["score"] == 10.0  # the automatic points, before the penalty
    assert (late["source"], late["seconds_late"], late["penalty"], late["flagged"], late["policy"]) == \
        ("timestamp.txt", 25 * 3600, 2.0, True, POLICY)


def test_grades_csv_has_the_late_flag_hours_penalty_and_grade_after_the_existing_columns(graded):
    header = (graded.course / "results" / EX2 / "grades.csv").read_text().splitlines()[0]
    assert header == "student_id,score,max_score,status,late,hours_late,penalty,grade"
    assert {k: graded.row("ada")[k] for k in ("score", "late", "hours_late", "penalty", "grade")} == \
        {"score": "10.0", "late": "yes", "hours_late": "25.00", "penalty": "2", "grade": "8.0"}


def test_the_feedback_says_how_late_the_policy_and_the_penalty(graded):
    text = graded.feedback("ada")
    assert "25.00 hours after the due date 2026-11-20T00:59:00+01:00" in text
    assert f"Policy: {POLICY}." in text and "Penalty: 2 points; your grade after it: 8 / 10." in text


@pytest.mark.parametrize("fmt", ["canvas", "moodle"])
def test_both_exports_give_the_score_less_the_penalty(graded, fmt):
    rows = graded.export(fmt)
    assert {student: rows[student][-1] for student in ("ada", "okaforchi", "ben", "eveeve")} == \
        {"ada": "8", "okaforchi": "9", "ben": "10", "eveeve": "10"}


def test_a_submission_within_the_grace_period_is_not_late_and_loses_nothing(graded):
    late = graded.result("ben")["extra_data"]["late"]
    assert (late["seconds_late"], late["flagged"], late["penalty"]) == (300, False, 0.0)
    assert (graded.row("ben")["late"], graded.row("ben")["grade"]) == ("no", "10.0")


def test_the_grade_summary_counts_late_submissions(graded):
    assert "late: 3 submissions (2 with a penalty" in graded.graded.stdout


# ---- several notebooks in one folder --------------------------------------------------------------------------


def test_of_a_blank_and_a_correct_notebook_the_correct_one_counts_and_both_are_listed(graded):
    extra = graded.result("cy")["extra_data"]
    assert graded.result("cy")["score"] == 10.0
    assert [(n["name"], n["score"], n["counted"]) for n in extra["notebooks"]] == \
        [("cy_final.ipynb", 10.0, True), (f"{EX2}.ipynb", 0.0, False)]
    assert extra["problems"][0].startswith("2 notebooks submitted; each was graded and the best one counts: "
                                           "cy_final.ipynb (10 / 10)")


def test_several_notebooks_are_named_in_the_summary_and_the_feedback(graded):
    assert "1 student submitted several notebooks; the best of each counted" in graded.graded.stdout
    assert "the best one counts: cy_final.ipynb" in graded.feedback("cy")


def test_the_results_folder_keeps_one_result_per_student(graded):
    assert sorted(p.name for p in (graded.course / "results" / EX2).iterdir()) == \
        ["ada.json", "ben.json", "cy.json", "danasmith.json", "eveeve.json", "feedback", "grades.csv",
         "handback", "okaforchi.json"]


# ---- course.toml edited, graded again ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def policy_none(graded, tmp_path_factory) -> Graded:
    course = tmp_path_factory.mktemp("none") / "course"
    shutil.copytree(graded.course, course, symlinks=True)
    (course / "course.toml").write_text(COURSE_TOML.replace('"per_day"', '"none"'))
    done = run_grader("grade", EX2, ".", "--jobs", "2", "--quiet", cwd=course)
    assert done.returncode == 0, done.stdout + done.stderr
    return Graded(course, graded.collected, done)


def test_editing_course_toml_and_grading_again_regrades_no_code(policy_none):
    assert "graded 0 submissions" in policy_none.graded.stdout and "6 unchanged" in policy_none.graded.stdout


def test_editing_course_toml_changes_only_the_lateness(graded, policy_none):
    before, after = graded.result("ada"), policy_none.result("ada")
    assert after["extra_data"]["late"]["penalty"] == 0.0
    del before["extra_data"]["late"], after["extra_data"]["late"]
    assert after == before


def test_policy_none_flags_a_late_submission_without_a_penalty(policy_none):
    late = policy_none.result("ada")["extra_data"]["late"]
    assert (late["flagged"], late["penalty"], late["policy"]) == (True, 0.0, "late submissions are flagged but lose "
                                                                              "no points")
    assert (policy_none.row("ada")["late"], policy_none.row("ada")["grade"]) == ("yes", "10.0")
    assert policy_none.export("moodle")["ada"] == ["10"]


# ---- nbgrader's gradebook agrees ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def recorded(graded, tmp_path_factory) -> Graded:
    """The graded course recorded with ``grade --gradebook`` (current results are recorded, not graded again),
    then nbgrader's own ``nbgrader export``."""
    course = tmp_path_factory.mktemp("gradebook") / "course"
    shutil.copytree(graded.course, course, symlinks=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", env()["PATH"])  # a new gradebook runs `alembic`
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as opened:
            release_into(opened, EX2)
    done = run_grader("grade", EX2, ".", "--quiet", "--gradebook", "sqlite:///gradebook.db", cwd=course)
    assert done.returncode == 0, done.stdout + done.stderr
    nbgrader("export", cwd=course)
    return Graded(course, graded.collected, done)


def nbgrader_rows(course: Path) -> dict[str, dict]:
    return {row["student_id"]: row for row in csv.DictReader((course / "grades.csv").open())}


def test_the_gradebook_holds_the_submission_time_and_nbgraders_late_penalty(recorded):
    ada = nbgrader_rows(recorded.course)["ada"]
    assert (ada["timestamp"], ada["duedate"], ada["raw_score"], ada["late_submission_penalty"], ada["score"]) == \
        ("2026-11-21 00:59:00", "2026-11-19 23:59:00", "10.0", "2.0", "8.0")


def test_nbgrader_export_and_the_lms_export_with_gradebook_give_the_same_grades(recorded):
    ours = recorded.export("moodle", "--gradebook", f"sqlite:///{recorded.course / 'gradebook.db'}")
    theirs = nbgrader_rows(recorded.course)
    assert {s: float(ours[s][0]) for s in theirs} == {s: float(row["score"]) for s, row in theirs.items()}
    assert ours["ada"] == ["8"] and ours["okaforchi"] == ["9"]


def test_the_formgraders_copy_is_the_notebook_that_counted(recorded):
    copy = (recorded.course / "autograded" / "cy" / EX2 / f"{EX2}.ipynb").read_text()
    assert CY_MARK in copy
