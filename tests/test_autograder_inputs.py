"""Bad input gets a result with a clear status, and nothing already graded is lost.

One class of malformed ex2_layernorm submissions is graded in one run; how stage 1 reads
a notebook (outputs, magics, hidden-test marks, scan findings) is checked without the
sandbox; then the tests check resuming, kill -9 in the middle of a run, and the
command-line contract.
"""

import copy
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from autograder import load
from tests.grading import REPO, max_scores, part_scores, reference, results_of, run_grader, with_cell, write_class

ASSIGNMENT = "ex2_layernorm"


def cells_without(grade_id):
    notebook = reference(ASSIGNMENT)
    notebook["cells"] = [c for c in notebook["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                         != grade_id]
    return notebook


def with_duplicated(grade_id):
    notebook = reference(ASSIGNMENT)
    index = next(i for i, c in enumerate(notebook["cells"])
                 if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)
    notebook["cells"].insert(index, copy.deepcopy(notebook["cells"][index]))
    return notebook


def with_renamed(grade_id):
    notebook = reference(ASSIGNMENT)
    for cell in notebook["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id:
            cell["metadata"]["nbgrader"]["grade_id"] = "my_own_name"
    return notebook


def with_huge_output():
    notebook = reference(ASSIGNMENT)
    cell = next(c for c in notebook["cells"] if c["cell_type"] == "code")
    cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x" * 8_000_000}]
    return notebook


def format_3():
    """The reference solution's code in an nbformat 3 notebook (worksheets)."""
    notebook = reference(ASSIGNMENT)
    cells = [{"cell_type": "code", "input": c["source"], "language": "python", "outputs": [], "metadata": {},
              "collapsed": False}
             for c in notebook["cells"] if c["cell_type"] == "code"
             and not c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    return {"nbformat": 3, "nbformat_minor": 0, "metadata": {"name": ""}, "worksheets": [{"cells": cells,
                                                                                         "metadata": {}}]}


# name -> (content, expected status, expected part scores: "full", "zero", or a dict of checks)
CASES = {
    "empty-file": (b"", "invalid"),
    "invalid-json": ('{"cells": [', "invalid"),
    "not-a-notebook": ('{"hello": "world"}', "invalid"),
    "a-python-script": ("def layer_norm(x, w, b, eps=1e-5):\n    return x\n", "invalid"),
    "nbformat-2": ('{"nbformat": 2, "worksheets": []}', "invalid"),
    "nbformat-3": (format_3(), "ok"),
    "non-utf8-bytes": (json.dumps(reference(ASSIGNMENT)).replace("# Self-check", "# Self-check \udcff").encode(
        "utf-8", "surrogateescape"), "ok"),
    "deleted-answer-cell": (cells_without("LayerNorm"), "ok"),
    "duplicated-answer-cell": (with_duplicated("layer_norm"), "ok"),
    "renamed-answer-cell": (with_renamed("layer_norm"), "ok"),
    "syntax-error": (with_cell(ASSIGNMENT, "LayerNorm", "class LayerNorm(nn.Module:\n    pass\n"), "cell_errors"),
    "missing-function": (with_cell(ASSIGNMENT, "layer_norm", "# I did not get to this one\n"), "cell_errors"),
    "huge-output": (with_huge_output(), "ok"),
}
# parts that must still get full marks
STILL_GRADED = {
    "nbformat-3": {"layer_norm", "LayerNorm", "layer_norm_forward_backward"},
    "non-utf8-bytes": {"layer_norm", "LayerNorm", "layer_norm_forward_backward"},
    "deleted-answer-cell": {"layer_norm", "layer_norm_forward_backward"},
    "duplicated-answer-cell": {"layer_norm", "LayerNorm", "layer_norm_forward_backward"},
    "renamed-answer-cell": {"layer_norm", "LayerNorm", "layer_norm_forward_backward"},
    "syntax-error": {"layer_norm", "layer_norm_forward_backward"},
    "missing-function": {"layer_norm_forward_backward"},
    "huge-output": {"layer_norm", "LayerNorm", "layer_norm_forward_backward"},
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inputs")
    write_class(folder / "class", {name: content for name, (content, _) in CASES.items()})
    (folder / "class" / "a-symlink.ipynb").symlink_to(REPO / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    with (folder / "class" / "too-large.ipynb").open("wb") as file:  # sparse: over the cap, yet nothing on disk
        file.truncate(load.MAX_NOTEBOOK_BYTES + 2**20)
    done = run_grader("grade", ASSIGNMENT, folder / "class", "--results", folder / "results")
    return done, results_of(folder / "results")


@pytest.mark.slow
def test_every_bad_input_gets_a_result_and_the_run_exits_0(graded):
    done, results = graded
    assert done.returncode == 0, done.stderr
    assert set(results) == set(CASES) | {"a-symlink", "too-large"}


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_bad_input_gets_the_expected_status(graded, case):
    _, results = graded
    assert results[case]["extra_data"]["status"] == CASES[case][1], results[case]["extra_data"]["problems"]


@pytest.mark.slow
@pytest.mark.parametrize("case", STILL_GRADED)
def test_parts_that_can_still_be_graded_get_their_points(graded, case):
    _, results = graded
    scores, full = part_scores(results[case]), max_scores(ASSIGNMENT)
    assert {part: scores[part] for part in STILL_GRADED[case]} == {part: full[part] for part in STILL_GRADED[case]}


@pytest.mark.parametrize("case, words", [
    ("invalid-json", "not valid JSON"), ("not-a-notebook", "not a Jupyter notebook"),
    ("nbformat-2", "unsupported notebook format"), ("nbformat-3", "old format 3"),
    ("non-utf8-bytes", "not valid UTF-8"), ("deleted-answer-cell", "'LayerNorm' is missing"),
    ("duplicated-answer-cell", "appears 2 times"), ("syntax-error", "SyntaxError"),
    ("a-symlink", "symbolic link"), ("too-large", "too big to read"), ("empty-file", "empty"),
])
@pytest.mark.slow
def test_problem_is_explained_in_the_result(graded, case, words):
    _, results = graded
    assert any(words in problem for problem in results[case]["extra_data"]["problems"])


@pytest.mark.slow
def test_missing_function_is_reported_as_missing_not_as_a_crash(graded):
    _, results = graded
    task1 = [t for t in results["missing-function"]["tests"] if t["name"].startswith("Task 1")]
    assert task1 and all("is not defined" in t["output"] for t in task1)


# --- reading a notebook (stage 1, without running it) ------------------------------------------------------


def cell_index(notebook: dict, grade_id: str) -> int:
    return next(i for i, c in enumerate(notebook["cells"])
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)


def loaded(tmp_path, notebook: dict | bytes) -> load.Entry:
    path = tmp_path / "learner.ipynb"
    if isinstance(notebook, dict):
        path.write_text(json.dumps(notebook))
    else:
        path.write_bytes(notebook)
    return load.read(ASSIGNMENT, load.Entry("learner", path))


@pytest.fixture
def answer_with_hidden_mark():
    source = "### BEGIN HIDDEN TESTS\ndef layer_norm(x, weight, bias, eps=1e-5):\n    return x\n"
    notebook = with_cell(ASSIGNMENT, "layer_norm", source)
    return notebook, str(cell_index(notebook, "layer_norm") + 1)


def test_answer_cell_with_the_hidden_tests_mark_in_a_comment_is_still_run(tmp_path, answer_with_hidden_mark):
    notebook, label = answer_with_hidden_mark
    assert label in [cell.label for cell in loaded(tmp_path, notebook).cells]


def test_answer_cell_with_the_hidden_tests_mark_gets_a_note(tmp_path, answer_with_hidden_mark):
    notebook, label = answer_with_hidden_mark
    assert any(problem.startswith(f"cell {label} contains '### BEGIN HIDDEN TESTS'")
               for problem in loaded(tmp_path, notebook).problems)


def test_graded_cell_that_lost_its_metadata_is_skipped_not_flagged(tmp_path):
    notebook = reference(ASSIGNMENT)
    index = cell_index(notebook, "check_layer_norm")
    notebook["cells"][index]["metadata"] = {}
    entry = loaded(tmp_path, notebook)
    assert (entry.findings, str(index + 1) in [c.label for c in entry.cells]) == ([], False)


def test_reference_solution_follows_the_notebook_format(tmp_path):
    assert [p for p in loaded(tmp_path, reference(ASSIGNMENT)).problems if "notebook format" in p] == []


def test_cells_without_ids_are_no_problem_as_jupyter_adds_them(tmp_path):
    notebook = reference(ASSIGNMENT)
    for cell in notebook["cells"]:
        del cell["id"]
    entry = loaded(tmp_path, notebook)
    assert (entry.problems, len(entry.cells)) == ([], len(loaded(tmp_path, reference(ASSIGNMENT)).cells))


@pytest.mark.parametrize("breakage, words", [
    (lambda cell: cell.update(source=[1, 2]), "source has the wrong type"),
    (lambda cell: cell.pop("source"), "'source' is a required property"),
    (lambda cell: cell.update(cell_type="python"), "not a code, Markdown or raw cell"),
    (lambda cell: cell.update(execution_count="three"), "execution_count"),
])
def test_cell_that_breaks_the_notebook_format_is_skipped_and_named(tmp_path, breakage, words):
    notebook = reference(ASSIGNMENT)
    index = cell_index(notebook, "layer_norm")
    breakage(notebook["cells"][index])
    entry = loaded(tmp_path, notebook)
    problem = next(p for p in entry.problems if "notebook format" in p)
    assert (problem.startswith(f"cell {index + 1} does not follow"), words in problem) == (True, True)
    assert str(index + 1) not in [c.label for c in entry.cells]


def test_a_cell_that_is_not_an_object_is_skipped_and_the_rest_is_read(tmp_path):
    notebook = reference(ASSIGNMENT)
    notebook["cells"].insert(0, "print('hello')")
    entry = loaded(tmp_path, notebook)
    assert any(p.startswith("cell 1 does not follow Jupyter's notebook format") for p in entry.problems)
    assert len(entry.cells) == len(loaded(tmp_path, reference(ASSIGNMENT)).cells)


def test_notebook_level_format_problem_is_noted_and_every_cell_still_read(tmp_path):
    notebook = reference(ASSIGNMENT)
    del notebook["metadata"]
    entry = loaded(tmp_path, notebook)
    assert entry.problems == ["the notebook does not follow Jupyter's notebook format ('metadata' is a required "
                              "property); its cells were read anyway"]
    assert len(entry.cells) == len(loaded(tmp_path, reference(ASSIGNMENT)).cells)


def test_notebook_with_more_cells_than_the_grader_reads_is_refused_with_the_count(tmp_path):
    notebook = reference(ASSIGNMENT)
    notebook["cells"] += [{"cell_type": "raw", "metadata": {}, "source": ""}] * load.MAX_CELLS
    entry = loaded(tmp_path, notebook)
    assert entry.readable is False
    assert entry.problems[0].startswith(f"the notebook has {len(notebook['cells']):,} cells")


@pytest.fixture
def only_outputs_make_it_30_mb():
    notebook = reference(ASSIGNMENT)
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x" * (3 * 2**20)}]
    notebook["cells"][0].setdefault("attachments", {})["plot.png"] = {"image/png": "A" * (2 * 2**20)}
    data = json.dumps(notebook).encode()
    assert len(data) > 30 * 2**20
    return data


def test_notebook_big_only_from_its_outputs_loads_every_cell(tmp_path, only_outputs_make_it_30_mb):
    entry = loaded(tmp_path, only_outputs_make_it_30_mb)
    plain = loaded(tmp_path, reference(ASSIGNMENT))
    assert (entry.readable, entry.problems, entry.cells) == (True, [], plain.cells)


def test_notebook_over_the_read_cap_is_refused_with_its_size_and_what_to_do(tmp_path):
    path = tmp_path / "learner.ipynb"
    with path.open("wb") as file:
        file.truncate(300 * 2**20)
    entry = load.read(ASSIGNMENT, load.Entry("learner", path))
    assert not entry.readable
    assert entry.problems == ["the notebook file is 300 MB, too big to read (the grader reads at most 256 MB): its "
                              "stored outputs make it this big. Clear them (Edit > Clear Outputs of All Cells), "
                              "save, and submit again"]


def test_magics_are_stored_as_the_python_ipython_runs(tmp_path):
    notebook = with_cell(ASSIGNMENT, "layer_norm", "%matplotlib inline\ndef layer_norm(x, weight, bias, eps=1e-5):\n"
                                                   "    return x\n")
    label = str(cell_index(notebook, "layer_norm") + 1)
    source = next(cell.source for cell in loaded(tmp_path, notebook).cells if cell.label == label)
    assert source.splitlines()[:2] == ["get_ipython().run_line_magic('matplotlib', 'inline')",
                                       "def layer_norm(x, weight, bias, eps=1e-5):"]


def test_shell_cell_magic_is_skipped_with_a_note(tmp_path):
    notebook = with_cell(ASSIGNMENT, "layer_norm", "%%bash\nls /\n")
    label = str(cell_index(notebook, "layer_norm") + 1)
    entry = loaded(tmp_path, notebook)
    assert (label in [c.label for c in entry.cells], f"cell {label} is a %%bash cell, not Python: skipped" in
            entry.problems) == (False, True)


def tampering(entry) -> list[str]:
    return [finding.what for finding in entry.findings if finding.kind == "tampering"]


def test_tampering_finding_names_its_cell_line_and_quotes_the_line(tmp_path):
    notebook = with_cell(ASSIGNMENT, "layer_norm", "%matplotlib inline\nwith torch._C.DisableTorchFunction():\n"
                                                   "    pass\n")
    label = str(cell_index(notebook, "layer_norm") + 1)
    (finding,) = loaded(tmp_path, notebook).findings
    assert (finding.what, finding.cell, finding.line, finding.quote, finding.group) == (
        f"cell {label}, line 2: reaches into PyTorch's dispatch internals (torch._C)", label, 2,
        "with torch._C.DisableTorchFunction():", "torch")


def test_tampering_after_many_review_findings_is_still_reported(tmp_path):
    notebook = reference(ASSIGNMENT)
    notebook["cells"] += [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                           "source": f"d{i} = x{i}.__dict__\n"} for i in range(200)]
    notebook["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                              "source": "core = torch._C\n"})
    assert tampering(loaded(tmp_path, notebook))


def test_review_finding_is_kept_apart_from_tampering(tmp_path):
    notebook = with_cell(ASSIGNMENT, "layer_norm", "def layer_norm(x, weight, bias, eps=1e-5):\n"
                                                   "    return getattr(F, name)(x)\n")
    entry = loaded(tmp_path, notebook)
    assert (tampering(entry), [f.kind for f in entry.findings]) == ([], ["review"])


def test_description_of_an_empty_search_names_the_paths_and_what_is_looked_for(tmp_path):
    assert load.find(ASSIGNMENT, [tmp_path]) == []
    text = load.describe_empty([tmp_path])
    assert str(tmp_path) in text and ".ipynb" in text and "submitted/<student>/<assignment>" in text


# --- resuming and interruptions ---------------------------------------------------------------------------


@pytest.fixture
def small_class(tmp_path):
    wrong = with_cell(ASSIGNMENT, "layer_norm", "def layer_norm(x, weight, bias, eps=1e-5):\n    return x\n")
    return write_class(tmp_path / "class", {f"s{i:02d}": reference(ASSIGNMENT) if i % 2 else wrong
                                           for i in range(8)})


@pytest.mark.slow
def test_rerun_skips_unchanged_submissions_and_regrades_changed_ones(small_class, tmp_path):
    results = tmp_path / "results"
    run_grader("grade", ASSIGNMENT, small_class, "--results", results)
    before = {p.name: p.stat().st_mtime_ns for p in results.glob("*.json")}
    (small_class / "s00.ipynb").write_text(json.dumps(reference(ASSIGNMENT)))
    again = run_grader("grade", ASSIGNMENT, small_class, "--results", results)
    after = {p.name: p.stat().st_mtime_ns for p in results.glob("*.json")}
    assert "7 unchanged since the last run" in again.stdout
    assert [name for name in before if before[name] != after[name]] == ["s00.json"]
    assert results_of(results)["s00"]["score"] == sum(max_scores(ASSIGNMENT).values())


@pytest.mark.slow
def test_kill_9_mid_run_loses_nothing_already_graded(small_class, tmp_path):
    results = tmp_path / "results"
    grader = subprocess.Popen([sys.executable, "-m", "autograder", "grade", ASSIGNMENT, str(small_class),
                               "--results", str(results), "--jobs", "1"], cwd=REPO, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(list(results.glob("*.json"))) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(grader.pid, signal.SIGKILL)
    grader.wait()
    survived = {p.name: p.read_text() for p in results.glob("*.json")}
    assert len(survived) >= 3
    assert all(json.loads(text)["tests"] for text in survived.values())  # complete files, never half-written
    resumed = run_grader("grade", ASSIGNMENT, small_class, "--results", results)
    assert f"{len(survived)} unchanged since the last run" in resumed.stdout
    assert len(results_of(results)) == 8
    assert all((results / name).read_text() == text for name, text in survived.items())


# --- the command line ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_unknown_assignment_exits_2_and_names_the_known_ones(tmp_path):
    done = run_grader("grade", "ex9_nothing", tmp_path)
    assert done.returncode == 2
    assert "unknown assignment 'ex9_nothing'" in done.stderr and "ex2_layernorm" in done.stderr


@pytest.mark.slow
def test_missing_path_exits_2(tmp_path):
    done = run_grader("grade", ASSIGNMENT, tmp_path / "nowhere")
    assert done.returncode == 2 and "no such file or folder" in done.stderr


@pytest.mark.slow
def test_grading_a_course_folder_writes_default_results_and_grades_csv(tmp_path):
    for student, notebook in (("alice", reference(ASSIGNMENT)), ("bob", {"cells": "broken"})):
        folder = tmp_path / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(notebook))
    done = run_grader("grade", ASSIGNMENT, tmp_path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = (tmp_path / "results" / ASSIGNMENT / "grades.csv").read_text().splitlines()
    assert rows == ["student_id,score,max_score,status,late,hours_late,penalty,grade", "alice,10.0,10.0,ok,no,,0,10.0",
                    "bob,0.0,10.0,invalid,no,,0,0.0"]  # no due date in the course: on time, nothing taken off
    assert "graded 2 submissions" in done.stdout and "mean 5.00" in done.stdout


@pytest.mark.slow
def test_feedback_lists_every_test_and_shows_no_suite_source(tmp_path):
    wrong = with_cell(ASSIGNMENT, "layer_norm", "def layer_norm(x, weight, bias, eps=1e-5):\n    return x * weight\n")
    write_class(tmp_path / "class", {"learner": wrong})
    run_grader("grade", ASSIGNMENT, tmp_path / "class", "--results", tmp_path / "results")
    feedback = (tmp_path / "results" / "feedback" / "learner.md").read_text()
    result = results_of(tmp_path / "results")["learner"]
    assert all(test["name"].split(" > ")[1] in feedback for test in result["tests"])
    assert "What to check:" in feedback
    suite_lines = {line.strip() for path in (REPO / "autograder" / "suites" / ASSIGNMENT).glob("test_*.py")
                   for line in path.read_text().splitlines() if len(line.strip()) > 25 and '"""' not in line}
    assert [line for line in suite_lines if line in feedback] == []
