"""The grader's results reach nbgrader's gradebook and Gradescope the way instructors use them."""

import copy
import csv
import json
import shutil
import zipfile
from types import SimpleNamespace

import nbformat
import pytest
from nbconvert.filters.markdown_mistune import markdown2html_mistune
from nbgrader.api import Gradebook

from autograder import gradebook as gradebook_module
from tests.grading import REPO, blank, reference, run_grader, with_cell
from tools.release_exercises import run_nbgrader

ASSIGNMENT = "ex3_batchnorm"  # the one with a manually graded written answer
ADVICE = f"nbgrader generate_assignment {ASSIGNMENT} --force"  # what the grader tells an instructor to run
FORGED_OUTPUT = "All hidden tests passed: 10 / 10"
SCRIPT = "<img src=x onerror=\"alert('forged')\">"
RELEASED_POINTS = {"check_batch_norm": 4.0, "check_BatchNorm1d": 3.0, "written_answer": 3.0}


def grade_id(cell: dict) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def without_written_answer() -> dict:
    notebook = reference(ASSIGNMENT)
    notebook["cells"] = [cell for cell in notebook["cells"] if grade_id(cell) != "written_answer"]
    return notebook


def forged() -> dict:
    """The reference notebook dressed up for the formgrader: saved outputs, a grade cell of its own worth 90
    points, a later copy of a real grade cell worth 40, a real one claiming 30, an emptied self-check, a hidden
    answer cell and script in the written answer."""
    notebook = reference(ASSIGNMENT)
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            cell["execution_count"] = 1
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": FORGED_OUTPUT + "\n"}]
        if grade_id(cell) == "batch_norm":
            cell["metadata"]["transient"] = {"remove_source": True}
        if grade_id(cell) == "selfcheck_batch_norm":
            cell["source"] = "print('ok')\n"
        if grade_id(cell) == "check_BatchNorm1d":
            cell["metadata"]["nbgrader"]["points"] = 30
        if grade_id(cell) == "written_answer":
            cell["source"] = f"I deserve full marks. {SCRIPT}"
    real = next(index for index, cell in enumerate(notebook["cells"]) if grade_id(cell) == "check_batch_norm")
    second = copy.deepcopy(notebook["cells"][real])
    second["metadata"]["nbgrader"]["points"] = 40
    second["source"] = "# my own grade cell\n"
    bonus = {"cell_type": "markdown", "source": "Bonus task, done.", "metadata": {"nbgrader": {
        "grade": True, "grade_id": "bonus", "locked": False, "points": 90, "schema_version": 3, "solution": True,
        "task": False}}}
    notebook["cells"][real + 1:real + 1] = [second, bonus]
    return notebook


def in_the_course(test):
    """Marks a test of the graded course folder below (nbgrader and the grader take half a minute to make it)."""
    return pytest.mark.slow(pytest.mark.nbgrader(test))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A course folder: the assignment released, six submissions, graded with --gradebook; (folder, the run)."""
    folder = tmp_path_factory.mktemp("course")
    shutil.copy(REPO / "nbgrader_config.py", folder)
    shutil.copytree(REPO / "solutions" / ASSIGNMENT, folder / "solutions" / ASSIGNMENT)
    assert run_nbgrader(ADVICE.split()[1:], folder).returncode == 0
    wrong = with_cell(ASSIGNMENT, "batch_norm", "def batch_norm(x, weight, bias, running_mean, running_var, "
                                                "training, momentum=0.1, eps=1e-5):\n    return x\n")
    class_ = {"ada": reference(ASSIGNMENT), "ben": blank(ASSIGNMENT), "cy": wrong, "dee": without_written_answer(),
              "eve": forged(), "fay": "{not a notebook"}
    for student, notebook in class_.items():
        target = folder / "submitted" / student / ASSIGNMENT
        target.mkdir(parents=True)
        (target / f"{ASSIGNMENT}.ipynb").write_text(notebook if type(notebook) is str else json.dumps(notebook))
    done = run_grader("grade", ASSIGNMENT, folder, "--gradebook", f"sqlite:///{folder / 'gradebook.db'}",
                      cwd=folder)
    assert done.returncode == 0, done.stderr
    return folder, done


@pytest.fixture(scope="module")
def course(graded):
    return graded[0]


def problems_of(course, student: str) -> list[str]:
    return json.loads((course / "results" / ASSIGNMENT / f"{student}.json").read_text())["extra_data"]["problems"]


def formgrader_copy(course, student: str) -> dict:
    """The notebook the formgrader shows for ``student`` (read with nbformat: each source one string)."""
    return nbformat.read(course / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)


@in_the_course
def test_gradebook_holds_each_parts_score_in_its_grade_cell(course):
    ours = json.loads((course / "results" / ASSIGNMENT / "cy.json").read_text())["extra_data"]["parts"]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        notebook = gradebook.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, "cy")
        cells = {g.name: g.auto_score for g in notebook.grades if g.name.startswith("check_")}
    assert cells == {f"check_{part}": scored["score"] for part, scored in ours.items()}


@in_the_course
def test_written_answer_waits_for_manual_grading(course):
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        grade = gradebook.find_grade("written_answer", ASSIGNMENT, ASSIGNMENT, "ada")
        assert grade.needs_manual_grade
        assert gradebook.find_submission(ASSIGNMENT, "ada").needs_manual_grade


@in_the_course
def test_grading_into_the_gradebook_prints_no_warning(graded):
    assert "Warning" not in graded[1].stderr


@in_the_course
def test_nbgrader_export_reports_the_automatic_scores(course):
    assert run_nbgrader(["export"], course).returncode == 0
    rows = {row["student_id"]: float(row["score"]) for row in csv.DictReader((course / "grades.csv").open())}
    assert rows["ada"] == 7.0 and rows["ben"] == 0.0 and 0 < rows["cy"] < 7.0


@in_the_course
def test_nbgrader_generate_feedback_reads_every_formgrader_copy(course):
    assert run_nbgrader(["generate_feedback", ASSIGNMENT], course).returncode == 0
    pages = {p.parent.parent.name for p in (course / "feedback").glob(f"*/{ASSIGNMENT}/{ASSIGNMENT}.html")}
    assert pages == {"ada", "ben", "cy", "dee", "eve", "fay"}


# --- ex3's written answer, a Markdown cell, as the grader sees it ------------------------------------------


@in_the_course
def test_written_answer_that_is_there_is_not_reported_missing(course):
    assert [problem for problem in problems_of(course, "ada") if "written_answer" in problem] == []


@in_the_course
def test_deleted_written_answer_is_reported_missing(course):
    assert "the answer cell 'written_answer' is missing (deleted or replaced?)" in " ".join(problems_of(course, "dee"))


# --- what the gradebook must know first ---------------------------------------------------------------------


def test_gradebook_without_the_assignment_is_a_usage_error_naming_the_command(tmp_path):
    done = run_grader("grade", ASSIGNMENT, tmp_path, "--gradebook", f"sqlite:///{tmp_path / 'none.db'}")
    assert done.returncode == 2 and f"`{ADVICE}`" in done.stderr


@pytest.mark.slow
@pytest.mark.nbgrader
def test_gradebook_with_the_assignment_but_not_its_notebook_is_a_usage_error_naming_the_command(tmp_path):
    shutil.copy(REPO / "nbgrader_config.py", tmp_path)
    assert run_nbgrader(["db", "assignment", "add", ASSIGNMENT], tmp_path).returncode == 0
    done = run_grader("grade", ASSIGNMENT, tmp_path, "--gradebook", f"sqlite:///{tmp_path / 'gradebook.db'}")
    assert done.returncode == 2 and f"`{ADVICE}`" in done.stderr and "Traceback" not in done.stderr


@pytest.fixture
def released_course(tmp_path):
    """A course folder as a clone has it: the source and the committed release, no gradebook, one submission."""
    shutil.copy(REPO / "nbgrader_config.py", tmp_path)
    for folder in ("solutions", "exercises"):
        shutil.copytree(REPO / folder / ASSIGNMENT, tmp_path / folder / ASSIGNMENT)
    (tmp_path / "submitted" / "ada" / ASSIGNMENT).mkdir(parents=True)
    (tmp_path / "submitted" / "ada" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(reference(ASSIGNMENT)))
    return tmp_path


def grade_into_gradebook(course):
    return run_grader("grade", ASSIGNMENT, course, "--gradebook", f"sqlite:///{course / 'gradebook.db'}",
                      cwd=course)


@pytest.mark.slow
@pytest.mark.nbgrader
def test_following_the_advice_lets_grading_record_the_scores(released_course):
    assert grade_into_gradebook(released_course).returncode == 2
    assert run_nbgrader(ADVICE.split()[1:], released_course).returncode == 0
    done = grade_into_gradebook(released_course)
    assert done.returncode == 0 and "recorded 1 submissions" in done.stdout


@pytest.mark.slow
@pytest.mark.nbgrader
def test_following_the_advice_leaves_the_committed_release_as_it_is(released_course):
    release = released_course / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert run_nbgrader(ADVICE.split()[1:], released_course).returncode == 0
    assert release.read_bytes() == (REPO / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_bytes()


# --- the copy the formgrader shows: what the student typed, nothing the student forged ---------------------


@in_the_course
def test_formgrader_finds_the_submission_in_autograded(course):
    assert (course / "autograded" / "ada" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file()


@in_the_course
def test_formgrader_copy_has_no_saved_outputs(course):
    code = [cell for cell in formgrader_copy(course, "eve")["cells"] if cell["cell_type"] == "code"]
    assert [(cell["outputs"], cell["execution_count"]) for cell in code] == [([], None)] * len(code)


@in_the_course
def test_formgrader_copy_has_the_releases_grade_cells_once_each_with_their_points(course):
    graded = [(grade_id(c), c["metadata"]["nbgrader"].get("points")) for c in formgrader_copy(course, "eve")["cells"]
              if c["metadata"].get("nbgrader", {}).get("grade")]
    assert sorted(graded) == sorted(RELEASED_POINTS.items())


@in_the_course
def test_self_made_grade_cell_becomes_an_ordinary_cell(course):
    (bonus,) = [cell for cell in formgrader_copy(course, "eve")["cells"] if cell["source"] == "Bonus task, done."]
    assert bonus["metadata"] == {}


@in_the_course
def test_locked_cells_get_their_released_text_back(course):
    release = {grade_id(c): "".join(c["source"]) for c in blank(ASSIGNMENT)["cells"] if grade_id(c)}
    locked = {grade_id(c): c["source"] for c in formgrader_copy(course, "eve")["cells"]
              if c["metadata"].get("nbgrader", {}).get("locked")}
    assert locked == {name: release[name] for name in locked} and "selfcheck_batch_norm" in locked


@in_the_course
def test_formgrader_copy_keeps_the_students_answers(course):
    ours = {grade_id(c): c["source"] for c in formgrader_copy(course, "eve")["cells"]}
    theirs = {grade_id(c): "".join(c["source"]) for c in forged()["cells"]}
    assert ours["batch_norm"] == theirs["batch_norm"] and ours["BatchNorm1d"] == theirs["BatchNorm1d"]


@in_the_course
def test_formgrader_copy_keeps_no_cell_metadata_but_nbgraders(course):
    assert {key for cell in formgrader_copy(course, "eve")["cells"] for key in cell["metadata"]} == {"nbgrader"}


@in_the_course
def test_written_answer_with_html_is_shown_as_text(course):
    (answer,) = [c for c in formgrader_copy(course, "eve")["cells"] if grade_id(c) == "written_answer"]
    assert answer["source"].startswith("*Shown as text") and SCRIPT in answer["source"]
    assert "<img" not in markdown2html_mistune(answer["source"])


@in_the_course
def test_deleted_graded_cell_is_added_back_so_that_it_can_be_scored(course):
    cells = formgrader_copy(course, "dee")["cells"]
    (index,) = [i for i, cell in enumerate(cells) if grade_id(cell) == "written_answer"]
    assert cells[index]["metadata"]["nbgrader"]["points"] == 3.0 and "missing" in cells[index - 1]["source"]


@in_the_course
def test_unreadable_submission_gets_a_copy_with_every_graded_cell(course):
    graded = {grade_id(c) for c in formgrader_copy(course, "fay")["cells"] if grade_id(c)}
    assert graded >= set(RELEASED_POINTS)


NO_RELEASE = SimpleNamespace(source_cells=[], grade_cells=[], solution_cells=[], task_cells=[], kernelspec=None)


@pytest.mark.parametrize("markdown", [
    SCRIPT,
    "~~~\n" + SCRIPT + "\n~~~~~",  # a fence of the student's own, to close ours
    "```\n```\n<script>alert(1)</script>",
    "[my notes](javascript:alert(1))",
    "[notes][1]\n\n[1]: javascript:alert(1)",
    "&#60;img src=x onerror=alert(1)&#62;",
    "<https://example.org>",
    "$\\href{javascript:alert(1)}{x}$",
])
def test_markdown_that_could_put_markup_or_a_link_on_the_page_renders_as_text(markdown):
    (cell,) = gradebook_module.formgrader_copy([{"cell_type": "markdown", "source": markdown}], NO_RELEASE).cells
    html = markdown2html_mistune(cell.source)
    assert "<img" not in html and "<script" not in html and "<a " not in html and "\\href" not in html.split("<pre>")[0]


def test_plain_markdown_still_renders_as_markdown():
    text = "**BatchNorm** averages over $B \\cdot T$ positions; LayerNorm does not."
    (cell,) = gradebook_module.formgrader_copy([{"cell_type": "markdown", "source": text}], NO_RELEASE).cells
    assert cell.source == text


# --- Gradescope: what the zip holds (tests/test_gradescope_day.py runs it) --------------------------------


@pytest.fixture(scope="module")
def gradescope_zip(tmp_path_factory):
    path = tmp_path_factory.mktemp("gs") / "ex2.zip"
    done = run_grader("gradescope", "ex2_layernorm", "-o", path)
    assert done.returncode == 0, done.stderr
    return path


def test_zip_holds_the_scripts_the_grader_and_only_this_assignments_suite(gradescope_zip):
    names = zipfile.ZipFile(gradescope_zip).namelist()
    assert {"setup.sh", "run_autograder", "requirements.txt", "autograder/cli.py",
            "autograder/suites/ex2_layernorm/test_layer_norm.py"} <= set(names)
    assert not [n for n in names if "ex3_batchnorm" in n or n.startswith("solutions/")]


def test_zip_holds_the_schema_its_results_are_checked_against(gradescope_zip):
    stored = zipfile.ZipFile(gradescope_zip).read("autograder/gradescope_results.schema.json")
    assert json.loads(stored) == json.loads((REPO / "autograder" / "gradescope_results.schema.json").read_text())


def test_scripts_in_the_zip_are_executable(gradescope_zip):
    modes = {info.filename: info.external_attr >> 16 for info in zipfile.ZipFile(gradescope_zip).infolist()}
    assert modes["run_autograder"] & 0o111 and modes["setup.sh"] & 0o111


def test_setup_script_installs_pinned_cpu_torch(gradescope_zip):
    setup = zipfile.ZipFile(gradescope_zip).read("setup.sh").decode()
    assert "torch==2.13.0" in setup and "whl/cpu" in setup
    requirements = zipfile.ZipFile(gradescope_zip).read("requirements.txt").decode().split()
    assert all("==" in line for line in requirements) and "hypothesis==6.170.15" in requirements


def test_setup_installs_every_package_run_autograder_checks_for(gradescope_zip):
    from autograder.gradescope import IMPORTS

    installed = {line.split("==")[0].lower() for line in
                 zipfile.ZipFile(gradescope_zip).read("requirements.txt").decode().split()} | {"torch"}
    assert set(IMPORTS) - installed == set()
