"""The graded exercises: one source per notebook, clean releases, working self-checks.

A solution notebook (solutions/<name>/<name>.ipynb) is generated from the MyST
file beside it, and nbgrader generates the release (exercises/<name>/) from the
solution notebook. These tests run the notebooks the way a learner and an
instructor do.
"""

import ast
import csv
import re
import shutil

import nbformat
import pytest
from nbclient import NotebookClient

from tools.release_exercises import assignments, run_nbgrader, stale_files

# The graded names and signatures fixed by the exercise contract.
CONTRACT = {
    "ex1_residual": [
        "class ResidualBlock(nn.Module):\n def __init__(self, sublayer): ...\n def forward(self, x): ...",
        "def make_mlp(depth, dim, residual): ...",
        "def input_grad_norm(model, x): ...",
    ],
    "ex2_layernorm": [
        "def layer_norm(x, weight, bias, eps=1e-5): ...",
        "class LayerNorm(nn.Module):\n def __init__(self, normalized_shape, eps=1e-5): ...\n def forward(self, x): ...",
        "def layer_norm_forward(x, weight, bias, eps=1e-5): ...",
        "def layer_norm_backward(dout, cache): ...",
    ],
    "ex3_batchnorm": [
        "def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5): ...",
        "class BatchNorm1d(nn.Module):\n def __init__(self, num_features, eps=1e-5, momentum=0.1): ...\n"
        " def forward(self, x): ...",
    ],
    "ex4_prepost": [
        "class PostNormBlock(nn.Module):\n def __init__(self, d_model, n_heads, d_ff): ...\n"
        " def forward(self, x, attn_mask=None): ...",
        "class PreNormBlock(nn.Module):\n def __init__(self, d_model, n_heads, d_ff): ...\n"
        " def forward(self, x, attn_mask=None): ...",
        "def make_stack(block_cls, depth, d_model, n_heads, d_ff): ...",
        "def ffn_grad_norms(stack, x, target): ...",
    ],
    "ex5_rmsnorm": [
        "def rms_norm(x, weight, eps=1e-6): ...",
        "class RMSNorm(nn.Module):\n def __init__(self, dim, eps=1e-6): ...\n def forward(self, x): ...",
    ],
    "ex6_beyond_norm": [
        "def batch_norm_forward(x, gamma, beta, eps=1e-5): ...",
        "def batch_norm_backward(dout, cache): ...",
        "class ReZeroBlock(nn.Module):\n def __init__(self, sublayer): ...\n def forward(self, x): ...",
        "class DyT(nn.Module):\n def __init__(self, dim, alpha_init=0.5): ...\n def forward(self, x): ...",
    ],
}
# The chapter each exercise goes with (ex6 goes with chapter 7: chapter 6 has no exercise).
CHAPTER = {"ex1_residual": 1, "ex2_layernorm": 2, "ex3_batchnorm": 3, "ex4_prepost": 4, "ex5_rmsnorm": 5,
           "ex6_beyond_norm": 7}
ASSIGNMENTS = sorted(CONTRACT)
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "BEGIN MARK SCHEME")

# What nbgrader_config.py has nbgrader put where each solution was.
STUB = 'raise NotImplementedError("not written yet: replace this line with your code")'


def solution_path(repo, name):
    return repo / "solutions" / name / f"{name}.ipynb"


def release_path(repo, name):
    return repo / "exercises" / name / f"{name}.ipynb"


def nbgrader_meta(cell):
    return cell.metadata.get("nbgrader", {})


def execute(path, allow_errors=False):
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=120, kernel_name="python3", allow_errors=allow_errors,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    return notebook


def errors_of(cell):
    return [out for out in cell.get("outputs", []) if out.output_type == "error"]


def stdout_of(cell):
    return "".join(out.get("text", "") for out in cell.get("outputs", []) if out.get("name") == "stdout")


@pytest.fixture(scope="session")
def executed_solutions(repo):
    return {name: execute(solution_path(repo, name)) for name in ASSIGNMENTS}


@pytest.fixture(scope="session")
def executed_releases(repo):
    return {name: execute(release_path(repo, name), allow_errors=True) for name in ASSIGNMENTS}


# --- one source of truth, regenerated releases -------------------------------------------------------------


def test_the_course_has_exactly_the_contract_assignments(repo):
    assert assignments(repo) == ASSIGNMENTS


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_each_assignment_folder_holds_its_source_and_one_generated_notebook(repo, name):
    files = sorted(p.name for p in (repo / "solutions" / name).iterdir() if p.name != ".ipynb_checkpoints")
    assert files == [f"{name}.ipynb", f"{name}.md"]


@pytest.mark.slow
@pytest.mark.nbgrader
def test_committed_solutions_and_releases_are_what_the_release_command_writes(repo):
    assert stale_files(repo) == [], "run: python -m tools.release_exercises"


@pytest.mark.slow
@pytest.mark.nbgrader
def test_release_check_reports_a_hand_edited_release(repo, tmp_path):
    for folder in ("solutions", "exercises"):
        shutil.copytree(repo / folder, tmp_path / folder)
    shutil.copy(repo / "nbgrader_config.py", tmp_path)
    release = tmp_path / "exercises" / "ex1_residual" / "ex1_residual.ipynb"
    release.write_text(release.read_text().replace("raise NotImplementedError(", "print("))
    assert stale_files(tmp_path) == ["exercises/ex1_residual/ex1_residual.ipynb"]


def test_generated_nbgrader_files_are_git_ignored(repo):
    ignored = (repo / ".gitignore").read_text().split()
    for entry in ("gradebook.db", "submitted/", "autograded/", "feedback/", "grades.csv"):
        assert entry in ignored


def test_nbgrader_reads_solutions_as_source_and_writes_exercises_as_release(repo):
    config = (repo / "nbgrader_config.py").read_text()
    assert 'c.CourseDirectory.source_directory = "solutions"' in config
    assert 'c.CourseDirectory.release_directory = "exercises"' in config


# --- the solutions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_solution_runs_top_to_bottom_without_error(executed_solutions, name):
    failing = [cell.source.splitlines()[0] for cell in executed_solutions[name].cells if errors_of(cell)]
    assert failing == []


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_self_check_passes_on_the_solution(executed_solutions, name):
    checks = [c for c in executed_solutions[name].cells
              if c.cell_type == "code" and nbgrader_meta(c).get("grade_id", "").startswith("selfcheck_")]
    assert checks, "no self-check cell"
    for cell in checks:
        assert stdout_of(cell).strip() == "ok", nbgrader_meta(cell)["grade_id"]


@pytest.mark.slow
@pytest.mark.nbgrader
@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_nbgrader_validate_passes_on_the_solution(repo, name):
    result = run_nbgrader(["validate", str(solution_path(repo, name))], repo)
    assert "Success! Your notebook passes all the tests." in result.stdout, result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.nbgrader
def test_nbgrader_autograde_gives_the_solution_its_automatic_points_and_the_blank_release_none(repo, tmp_path):
    shutil.copy(repo / "nbgrader_config.py", tmp_path)
    shutil.copytree(repo / "solutions" / "ex3_batchnorm", tmp_path / "solutions" / "ex3_batchnorm")
    shutil.copytree(repo / "autograder", tmp_path / "autograder")  # the hidden tests the grade cells call
    for student, folder in (("complete", "solutions"), ("blank", "exercises")):
        submitted = tmp_path / "submitted" / student / "ex3_batchnorm"
        submitted.mkdir(parents=True)
        shutil.copy(repo / folder / "ex3_batchnorm" / "ex3_batchnorm.ipynb", submitted)
    for args in (["generate_assignment", "ex3_batchnorm"], ["autograde", "ex3_batchnorm", "--create"], ["export"]):
        result = run_nbgrader(args, tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
    rows = list(csv.DictReader((tmp_path / "grades.csv").open()))
    scores = {row["student_id"]: (float(row["score"]), float(row["max_score"])) for row in rows}
    # 7 automatic points; the written answer's 3 wait for a human grader
    assert scores == {"complete": (7.0, 10.0), "blank": (0.0, 10.0)}


# --- the releases ----------------------------------------------------------------------------------------


def solution_regions(notebook):
    """Lines inside BEGIN/END SOLUTION regions, and the lines outside them."""
    inside, outside = set(), set()
    for cell in notebook.cells:
        in_region = False
        for line in cell.source.splitlines():
            if "BEGIN SOLUTION" in line:
                in_region = True
            elif "END SOLUTION" in line:
                in_region = False
            elif line.strip():
                (inside if in_region else outside).add(line.strip())
    return inside, outside


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_release_contains_no_line_of_any_solution(repo, name):
    inside, outside = solution_regions(nbformat.read(solution_path(repo, name), as_version=4))
    secret = inside - outside  # a line also shown outside a region (a signature, say) is no secret
    release = nbformat.read(release_path(repo, name), as_version=4)
    release_lines = {line.strip() for cell in release.cells for line in cell.source.splitlines()}
    assert secret, "the solution has no solution region"
    assert sorted(secret & release_lines) == []


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_graded_cell_runs_the_hidden_tests_of_its_own_task_and_nothing_else(repo, name):
    notebook = nbformat.read(solution_path(repo, name), as_version=4)
    graded = [cell for cell in notebook.cells if cell.cell_type == "code" and nbgrader_meta(cell).get("grade")
              and not nbgrader_meta(cell).get("solution")]
    assert graded
    for cell in graded:
        task = nbgrader_meta(cell)["grade_id"].removeprefix("check_")
        code = [line for line in cell.source.splitlines() if line.strip() and not line.startswith("#")]
        assert code[-1] == f'grade_part("{name}", "{task}", globals())', nbgrader_meta(cell)["grade_id"]
        assert len(code) == 5, nbgrader_meta(cell)["grade_id"]  # the import lines, the call, nothing of a self-check


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_release_carries_no_nbgrader_markers_or_outputs(repo, name):
    release = nbformat.read(release_path(repo, name), as_version=4)
    for cell in release.cells:
        assert not any(marker in cell.source for marker in MARKERS), cell.source[:80]
        assert not cell.get("outputs")


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_code_task_in_the_release_raises_not_implemented(repo, name):
    release = nbformat.read(release_path(repo, name), as_version=4)
    tasks = [c for c in release.cells if c.cell_type == "code" and nbgrader_meta(c).get("solution")]
    assert tasks
    for cell in tasks:
        assert STUB in cell.source, nbgrader_meta(cell)["grade_id"]


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_release_fails_only_where_a_task_is_unimplemented(executed_releases, name):
    # The stub's NotImplementedError, or a self-check that says in its own words that the task is not written yet.
    errors = {(err.ename, "not written yet" in err.evalue) for cell in executed_releases[name].cells
              for err in errors_of(cell)}
    assert errors and errors <= {("NotImplementedError", True), ("AssertionError", True)}


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_release_set_up_cell_runs_cleanly(executed_releases, name):
    first_code = next(c for c in executed_releases[name].cells if c.cell_type == "code")
    assert errors_of(first_code) == []


def signatures(source):
    """{qualified name: (argument names, default values)} of every def and class in ``source``."""
    found = {}

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef):
                args = child.args
                defaults = [ast.literal_eval(d) for d in args.defaults]
                found[prefix + child.name] = ([a.arg for a in args.args], defaults)
            elif isinstance(child, ast.ClassDef):
                found[prefix + child.name] = ([ast.unparse(b) for b in child.bases], [])
                visit(child, f"{prefix}{child.name}.")

    visit(ast.parse(source), "")
    return found


@pytest.mark.parametrize("folder", ["solutions", "exercises"])
@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_notebook_keeps_every_contract_name_and_signature(repo, folder, name):
    notebook = nbformat.read(repo / folder / name / f"{name}.ipynb", as_version=4)
    code = "\n".join(c.source for c in notebook.cells if c.cell_type == "code")
    found = signatures(code)
    for entry in CONTRACT[name]:
        for qualified, signature in signatures(entry).items():
            assert found.get(qualified) == signature, f"{qualified}: expected {signature}"


# --- what the notebook announces -------------------------------------------------------------------------


def announced_points(notebook):
    """The points column of the task table in the notebook's introduction, and its total."""
    intro = notebook.cells[0].source
    rows = re.findall(r"^\|\s*(\d+)\s*\|.*\|\s*(\d+)\s*\|$", intro, flags=re.MULTILINE)
    total = re.search(r"\*\*total\*\*\s*\|\s*\*\*(\d+)\*\*", intro)
    return [int(points) for _, points in rows], int(total.group(1))


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_points_announced_in_the_notebook_equal_its_graded_cells(repo, name):
    release = nbformat.read(release_path(repo, name), as_version=4)
    per_task, total = announced_points(release)
    graded = [nbgrader_meta(c)["points"] for c in release.cells if nbgrader_meta(c).get("grade")]
    assert graded == per_task
    assert sum(per_task) == total


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_introduction_links_to_the_chapter_that_exists(repo, name, repository):
    intro = nbformat.read(release_path(repo, name), as_version=4).cells[0].source
    prefix = f"https://github.com/{repository['org']}/{repository['name']}/blob/{repository['branch']}/"
    links = re.findall(re.escape(prefix) + r"(chapters/[^)\s]+)", intro)
    assert links, "no link to the chapter"
    assert all(link.startswith(f"chapters/0{CHAPTER[name]}_") for link in links)
    assert all((repo / link).exists() for link in links), links


@pytest.fixture
def ex3_answer_cells(repo):
    def answer(folder):
        notebook = nbformat.read(repo / folder / "ex3_batchnorm" / "ex3_batchnorm.ipynb", as_version=4)
        (cell,) = [c for c in notebook.cells if nbgrader_meta(c).get("grade_id") == "written_answer"]
        return cell

    return answer


def test_written_answer_is_a_manually_graded_markdown_cell_worth_3_points(ex3_answer_cells):
    meta = nbgrader_meta(ex3_answer_cells("exercises"))
    assert ex3_answer_cells("exercises").cell_type == "markdown"
    assert (meta["grade"], meta["solution"], meta["points"]) == (True, True, 3)


def test_rubric_is_in_the_solution_only(ex3_answer_cells):
    assert "Rubric for the grader" in ex3_answer_cells("solutions").source
    assert ex3_answer_cells("exercises").source.strip() == "YOUR ANSWER HERE"
