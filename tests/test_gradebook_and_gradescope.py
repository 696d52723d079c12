"""The grader's results reach nbgrader's gradebook and Gradescope the way instructors use them."""

import csv
import json
import os
import shutil
import subprocess
import zipfile

import pytest
from nbgrader.api import Gradebook

from grading import REPO, blank, reference, run_grader, with_cell
from release_exercises import run_nbgrader

ASSIGNMENT = "ex3_batchnorm"  # the one with a manually graded written answer


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course folder: the assignment released, three submissions, graded with --gradebook."""
    folder = tmp_path_factory.mktemp("course")
    shutil.copy(REPO / "nbgrader_config.py", folder)
    shutil.copytree(REPO / "solutions" / ASSIGNMENT, folder / "solutions" / ASSIGNMENT)
    assert run_nbgrader(["generate_assignment", ASSIGNMENT], folder).returncode == 0
    wrong = with_cell(ASSIGNMENT, "batch_norm", "def batch_norm(x, weight, bias, running_mean, running_var, "
                                                "training, momentum=0.1, eps=1e-5):\n    return x\n")
    for student, notebook in (("ada", reference(ASSIGNMENT)), ("ben", blank(ASSIGNMENT)), ("cy", wrong)):
        target = folder / "submitted" / student / ASSIGNMENT
        target.mkdir(parents=True)
        (target / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(notebook))
    done = run_grader("grade", ASSIGNMENT, folder, "--gradebook", f"sqlite:///{folder / 'gradebook.db'}",
                      cwd=folder)
    assert done.returncode == 0, done.stderr
    return folder


def test_gradebook_holds_each_parts_score_in_its_grade_cell(course):
    ours = json.loads((course / "results" / ASSIGNMENT / "cy.json").read_text())["extra_data"]["parts"]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        notebook = gradebook.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, "cy")
        cells = {g.name: g.auto_score for g in notebook.grades if g.name.startswith("check_")}
    assert cells == {f"check_{part}": scored["score"] for part, scored in ours.items()}


def test_written_answer_waits_for_manual_grading(course):
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        grade = gradebook.find_grade("written_answer", ASSIGNMENT, ASSIGNMENT, "ada")
        assert grade.needs_manual_grade
        assert gradebook.find_submission(ASSIGNMENT, "ada").needs_manual_grade


def test_nbgrader_export_reports_the_automatic_scores(course):
    assert run_nbgrader(["export"], course).returncode == 0
    rows = {row["student_id"]: float(row["score"]) for row in csv.DictReader((course / "grades.csv").open())}
    assert rows["ada"] == 7.0 and rows["ben"] == 0.0 and 0 < rows["cy"] < 7.0


def test_formgrader_finds_the_submission_in_autograded(course):
    assert (course / "autograded" / "ada" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file()


def test_gradebook_without_the_assignment_is_a_usage_error(tmp_path):
    done = run_grader("grade", ASSIGNMENT, tmp_path, "--gradebook", f"sqlite:///{tmp_path / 'none.db'}")
    assert done.returncode == 2 and "nbgrader generate_assignment" in done.stderr


# --- Gradescope -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gradescope_zip(tmp_path_factory):
    path = tmp_path_factory.mktemp("gs") / "ex2.zip"
    done = run_grader("gradescope", "ex2_layernorm", "-o", path)
    assert done.returncode == 0, done.stderr
    return path


def container(tmp_path, archive, notebooks: dict):
    """A folder laid out like Gradescope's /autograder, with the zip unpacked into source/."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(archive) as zipped:
        zipped.extractall(root / "source")
    (root / "source" / "run_autograder").chmod(0o755)
    (root / "submission").mkdir()
    for name, notebook in notebooks.items():
        (root / "submission" / name).write_text(json.dumps(notebook))
    return root


def run_autograder(root):
    import sys

    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    return subprocess.run([str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=600)


def test_zip_holds_the_scripts_the_grader_and_only_this_assignments_suite(gradescope_zip):
    names = zipfile.ZipFile(gradescope_zip).namelist()
    assert {"setup.sh", "run_autograder", "requirements.txt", "autograder/cli.py",
            "autograder/suites/ex2_layernorm/test_layer_norm.py"} <= set(names)
    assert not [n for n in names if "ex3_batchnorm" in n or n.startswith("solutions/")]


def test_run_autograder_writes_results_json_for_the_submission(tmp_path, gradescope_zip):
    root = container(tmp_path, gradescope_zip, {"ex2_layernorm.ipynb": reference("ex2_layernorm")})
    done = run_autograder(root)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 10.0 and len(results["tests"]) > 10


def test_run_autograder_without_a_notebook_still_writes_a_result(tmp_path, gradescope_zip):
    root = container(tmp_path, gradescope_zip, {})
    assert run_autograder(root).returncode == 0
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 0 and "no .ipynb file was submitted" in results["output"]


def test_setup_script_installs_pinned_cpu_torch(gradescope_zip):
    setup = zipfile.ZipFile(gradescope_zip).read("setup.sh").decode()
    assert "torch==2.13.0" in setup and "whl/cpu" in setup
    requirements = zipfile.ZipFile(gradescope_zip).read("requirements.txt").decode().split()
    assert all("==" in line for line in requirements) and "hypothesis==6.170.15" in requirements
