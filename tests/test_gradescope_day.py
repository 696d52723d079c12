"""A day on Gradescope, run here: the zip, its container, its Python, and the results.json it uploads.

The guide's block of Gradescope commands (teaching.md, "Gradescope") is run as it is written, in a course folder, for a
correct, a wrong and a hostile notebook: it builds the zip, unpacks it into a folder laid out
like Gradescope's container (``source/``, ``submission/``, ``results/``, ``run_autograder``
beside them) and runs ``run_autograder`` with ``AUTOGRADER_ROOT`` only, the tests' own Python
environment first on the ``PATH`` as activating it does. Every results.json is validated
against ``autograder/gradescope_results.schema.json``, and the schema must refuse broken ones.
How ``run_autograder`` picks its Python is checked with stand-in interpreters.
"""

import copy
import json
import math
import os
import re
import shutil
import subprocess
import sys
import textwrap

import jsonschema
import pytest

from autograder import gradescope
from tests.conftest import missing_tool
from tests.grading import REPO, reference, with_cell

ASSIGNMENT = "ex2_layernorm"
SCHEMA = json.loads((REPO / "autograder" / "gradescope_results.schema.json").read_text())
WRONG_LAYER_NORM = "def layer_norm(x, weight, bias, eps=1e-5):\n    return x\n"  # forgot to normalize
# The same wrong answer, which also overwrites the result Gradescope will upload, in the container here and at
# Gradescope's own path (built at run time, so that the source scan lets it run and the sandbox has to stop it).
HOSTILE_LAYER_NORM = """
import json
def layer_norm(x, weight, bias, eps=1e-5):
    for path in ({results!r}, "/" + "auto" + "grader/results/results.json"):
        try:
            with open(path, "w") as out:
                json.dump({{"score": 1000, "output": "every test passed"}}, out)
        except OSError:
            pass
    return x
"""


def guide_gradescope_block() -> str:
    """The guide's code block that runs run_autograder, its indentation (a list item's, if any) removed."""
    text = (REPO / "teaching.md").read_text()
    blocks = [textwrap.dedent(indent + body) for indent, body in
              re.findall(r"^([ \t]*)```(?:bash|sh)\n(.*?)^[ \t]*```", text, re.S | re.M)]
    found = [block for block in blocks if "run_autograder" in block]
    assert len(found) == 1, "the guide should have exactly one code block that runs run_autograder"
    return found[0]


def activated_env() -> dict:
    """This environment, as a shell where the tests' Python environment is activated; no grader variable set."""
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOGRADER_ROOT", "AUTOGRADER_PYTHON", "PYTHONPATH")}
    env["PATH"] = f"{os.path.dirname(sys.executable)}{os.pathsep}{env.get('PATH', '')}"
    return env


def gradescope_day(folder, notebook_for) -> tuple[subprocess.CompletedProcess, dict | None]:
    """Run the guide's block in a course folder whose solution notebook is ``notebook_for(root)``."""
    (folder / "autograder").symlink_to(REPO / "autograder")
    root = folder / "try_gradescope"
    notebook = folder / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text(json.dumps(notebook_for(root)))
    done = subprocess.run(["bash", "-e", "-c", guide_gradescope_block()], cwd=folder, env=activated_env(),
                          capture_output=True, text=True, timeout=900)
    path = root / "results" / "results.json"
    return done, (json.loads(path.read_text()) if path.exists() else None)


CASES = {
    "correct": lambda root: reference(ASSIGNMENT),
    "wrong": lambda root: with_cell(ASSIGNMENT, "layer_norm", WRONG_LAYER_NORM),
    "hostile": lambda root: with_cell(ASSIGNMENT, "layer_norm", HOSTILE_LAYER_NORM.format(
        results=str(root / "results" / "results.json"))),
}


@pytest.fixture(scope="module")
def day(tmp_path_factory) -> dict:
    """case -> (the guide block's completed process, the results.json it left)."""
    if shutil.which("unzip") is None:
        missing_tool("unzip is not installed", "Debian's unzip package; the guide's Gradescope commands use it")
    return {case: gradescope_day(tmp_path_factory.mktemp(case), notebook_for) for case, notebook_for in CASES.items()}


@pytest.fixture(scope="module")
def graded(day) -> dict:
    """case -> results.json, for the cases whose block succeeded."""
    return {case: results for case, (done, results) in day.items() if done.returncode == 0 and results}


def test_the_guide_builds_and_runs_the_zip_with_only_autograder_root_set():
    block = guide_gradescope_block()
    assert f"python -m autograder gradescope {ASSIGNMENT}" in block
    assert "AUTOGRADER_ROOT=" in block and "AUTOGRADER_PYTHON" not in block
    assert "setup.sh" not in block  # it installs with apt and pip: Gradescope's image, not a course machine


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_run_autograder_exits_0_and_writes_results_json(day, case):
    done, results = day[case]
    assert done.returncode == 0, done.stdout + done.stderr
    assert results is not None


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_results_json_matches_gradescopes_schema(graded, case):
    jsonschema.validate(graded[case], SCHEMA)


@pytest.mark.slow
def test_correct_notebook_gets_full_marks_with_every_test_passed(graded):
    results = graded["correct"]
    assert results["score"] == 10.0 and results["extra_data"]["status"] == "ok"
    assert {test["status"] for test in results["tests"]} == {"passed"}
    assert sum(test["max_score"] for test in results["tests"]) == 10.0


@pytest.mark.slow
def test_wrong_notebook_loses_only_the_task_it_gets_wrong_and_is_told_what_to_check(graded):
    results = graded["wrong"]
    failed = [test for test in results["tests"] if test["status"] == "failed"]
    assert failed and all(test["name"].startswith("Task 1: layer_norm") for test in failed)
    assert all("it returns x unchanged" in test["output"] for test in failed)  # the mistake, named
    assert results["score"] == 10.0 - sum(test["max_score"] for test in failed)


@pytest.mark.slow
def test_hostile_notebook_cannot_write_its_own_result(graded):
    results = graded["hostile"]
    assert results["score"] <= graded["wrong"]["score"] < 10.0  # no more than the same answer without the attack
    assert "every test passed" not in results["output"]
    assert results["extra_data"]["status"] in {"sandbox_violation", "review", "tampering"}


@pytest.mark.slow
def test_hostile_notebooks_attempt_is_named_in_its_result(graded):
    assert "writes outside its folder" in graded["hostile"]["output"]


# --- the schema --------------------------------------------------------------------------------------------


def test_the_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.fixture
def results_json() -> dict:
    """A results.json the grader writes: a student with one test passed and one failed."""
    return {"score": 1.0, "execution_time": 2.5, "output": "s: 1 / 2 (graded)",
            "tests": [{"name": "Task 1 > a", "score": 1.0, "max_score": 1.0, "status": "passed", "output": "passed",
                       "visibility": "visible"},
                      {"name": "Task 1 > b", "score": 0.0, "max_score": 1.0, "status": "failed",
                       "output": "failed: off by one", "visibility": "visible"}],
            "extra_data": {"status": "ok", "anything": [1, "two"]}}


def test_the_schema_accepts_the_graders_results(results_json):
    jsonschema.validate(results_json, SCHEMA)


def test_the_schema_accepts_every_option_gradescope_documents():
    everything = {
        "score": 3.0, "execution_time": 12, "output": "<b>done</b>", "output_format": "html",
        "test_output_format": "md", "test_name_format": "text", "visibility": "after_due_date",
        "stdout_visibility": "hidden", "extra_data": {},
        "tests": [{"score": 3.0, "max_score": 4.0, "status": "failed", "name": "speed", "name_format": "ansi",
                   "number": "2.1", "output": "slow", "output_format": "simple_format", "tags": ["perf"],
                   "visibility": "after_published", "extra_data": {"ms": 120}},
                  {"name": "compiles", "status": "passed"}],
        "leaderboard": [{"name": "Accuracy", "value": 0.93}, {"name": "Time", "value": 15.1, "order": "asc"},
                        {"name": "Stars", "value": "***"}],
    }
    jsonschema.validate(everything, SCHEMA)


def test_the_schema_accepts_scores_on_every_test_instead_of_at_the_top(results_json):
    del results_json["score"]
    jsonschema.validate(results_json, SCHEMA)


def _break(results_json, how):
    broken = copy.deepcopy(results_json)
    how(broken)
    return broken


BREAKAGES = {
    "score as text": lambda r: r.update(score="1"),
    "score as a boolean": lambda r: r.update(score=True),
    "a key Gradescope does not read": lambda r: r.update(grade=1.0),
    "a key a test does not have": lambda r: r["tests"][0].update(points=1.0),
    "a test status other than passed or failed": lambda r: r["tests"][0].update(status="ok"),
    "a visibility Gradescope does not know": lambda r: r.update(visibility="public"),
    "an output format Gradescope does not know": lambda r: r["tests"][1].update(output_format="markdown"),
    "a test number that is a number": lambda r: r["tests"][0].update(number=1.1),
    "tags that are not strings": lambda r: r["tests"][0].update(tags=[1, 2]),
    "no score anywhere": lambda r: [r.pop("score"), r["tests"][1].pop("score")],
    "a negative execution time": lambda r: r.update(execution_time=-1),
    "extra_data that is not an object": lambda r: r.update(extra_data="notes"),
    "a leaderboard entry without a value": lambda r: r.update(leaderboard=[{"name": "Accuracy"}]),
    "a leaderboard order other than asc or desc": lambda r: r.update(
        leaderboard=[{"name": "Time", "value": 1, "order": "up"}]),
    "tests that are not a list": lambda r: r.update(tests={"a": 1}),
}


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_the_schema_refuses_a_broken_results_json(results_json, breakage):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(_break(results_json, BREAKAGES[breakage]), SCHEMA)


@pytest.mark.parametrize("breakage", ["score as text", "a key Gradescope does not read",
                                      "a test status other than passed or failed"])
def test_the_grader_refuses_to_write_what_the_schema_refuses_and_names_it(results_json, breakage):
    with pytest.raises(gradescope.BadResults) as refused:
        gradescope.checked_json(_break(results_json, BREAKAGES[breakage]))
    assert re.search(r"score|grade|status", str(refused.value))


def test_the_grader_refuses_a_score_that_is_not_a_number_json_can_hold(results_json):
    results_json["score"] = math.nan
    with pytest.raises(gradescope.BadResults):
        gradescope.checked_json(results_json)


def test_a_result_the_schema_refuses_is_a_grader_error_not_an_upload(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "results" / "results.json"
    stale.parent.mkdir()
    stale.write_text('{"score": 10}')  # an earlier submission's, which must not be uploaded for this one
    monkeypatch.setattr(gradescope.report, "result", lambda *args: {"score": "zero", "tests": []})
    assert gradescope.run_in_container(ASSIGNMENT, tmp_path) == 1
    assert not stale.exists()
    assert "does not match Gradescope's results schema" in capsys.readouterr().err


# --- which Python run_autograder grades with ------------------------------------------------------------------


@pytest.fixture(scope="module")
def unpacked_zip(tmp_path_factory):
    """The zip's files, unpacked with the permissions it stores."""
    folder = tmp_path_factory.mktemp("zip")
    gradescope.build(ASSIGNMENT, folder / "autograder.zip")
    shutil.unpack_archive(folder / "autograder.zip", folder / "source")
    return folder / "source"


@pytest.fixture
def container(tmp_path, unpacked_zip):
    """A folder laid out like Gradescope's /autograder, with nothing installed in it."""
    root = tmp_path / "autograder"
    shutil.copytree(unpacked_zip, root / "source")
    shutil.copy(unpacked_zip / "run_autograder", root / "run_autograder")
    (root / "run_autograder").chmod(0o755)
    (root / "submission").mkdir()
    return root


@pytest.fixture
def only_bash(tmp_path):
    """A PATH entry with bash alone in it: run_autograder's shebang finds bash, and no python3 is there."""
    folder = tmp_path / "bash-only"
    folder.mkdir()
    (folder / "bash").symlink_to(shutil.which("bash"))
    return folder


def stand_in(path, lacking: str = ""):
    """A Python stand-in: answers run_autograder's package check with ``lacking``, and logs how it was run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nif [ "$1" = "-c" ]; then echo "{lacking}"; exit 0; fi\n'
                    f'echo "$0 $*" >> "{path.parent / "ran.log"}"\n')
    path.chmod(0o755)
    return path


def ran(python) -> str:
    log = python.parent / "ran.log"
    return log.read_text() if log.exists() else ""


def run_autograder(root, path_entries, **variables) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOGRADER_PYTHON", "AUTOGRADER_ROOT")}
    env.update(PATH=os.pathsep.join(map(str, path_entries)), AUTOGRADER_ROOT=str(root), **variables)
    return subprocess.run([str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True,
                          timeout=60)


def test_run_autograder_grades_with_the_venv_setup_sh_makes(container, only_bash, tmp_path):
    venv = stand_in(container / "venv" / "bin" / "python")
    path_python = stand_in(tmp_path / "elsewhere" / "python3")
    done = run_autograder(container, [path_python.parent, only_bash])
    assert done.returncode == 0, done.stderr
    assert ran(venv) == f"{venv} -m autograder gradescope-run {ASSIGNMENT} --root {container}\n"
    assert ran(path_python) == ""


def test_run_autograder_falls_back_to_python3_on_the_path(container, only_bash, tmp_path):
    path_python = stand_in(tmp_path / "elsewhere" / "python3")
    done = run_autograder(container, [path_python.parent, only_bash])
    assert done.returncode == 0, done.stderr
    assert ran(path_python).startswith(f"{path_python} -m autograder gradescope-run {ASSIGNMENT}")
    assert f"{container}/venv/bin/python: not found; grading with {path_python}" in done.stderr


def test_run_autograder_passes_over_a_venv_that_lacks_a_package_and_says_so(container, only_bash, tmp_path):
    venv = stand_in(container / "venv" / "bin" / "python", lacking="torch")
    path_python = stand_in(tmp_path / "elsewhere" / "python3")
    done = run_autograder(container, [path_python.parent, only_bash])
    assert done.returncode == 0, done.stderr
    assert ran(venv) == "" and ran(path_python)
    assert f"{venv} cannot import torch" in done.stderr


def test_autograder_python_wins_over_the_defaults(container, only_bash, tmp_path):
    venv = stand_in(container / "venv" / "bin" / "python")
    chosen = stand_in(tmp_path / "chosen" / "python")
    done = run_autograder(container, [only_bash], AUTOGRADER_PYTHON=str(chosen))
    assert done.returncode == 0, done.stderr
    assert ran(chosen) and ran(venv) == ""


def test_a_relative_autograder_python_is_found_from_where_run_autograder_was_started(container, only_bash):
    chosen = stand_in(container / "mine" / "python")
    done = run_autograder(container, [only_bash], AUTOGRADER_PYTHON="mine/python")
    assert done.returncode == 0, done.stderr
    assert ran(chosen).startswith(f"{container}/mine/python -m autograder")


def test_without_a_usable_python_run_autograder_exits_2_and_lists_what_it_tried(container, only_bash):
    done = run_autograder(container, [only_bash])
    assert done.returncode == 2
    assert f"{container}/venv/bin/python: not found" in done.stderr
    assert "python3: not found" in done.stderr
    assert "AUTOGRADER_PYTHON" in done.stderr and "setup.sh" in done.stderr


def test_an_autograder_python_that_cannot_grade_is_named_and_not_replaced(container, only_bash, tmp_path):
    stand_in(container / "venv" / "bin" / "python")
    lacking = stand_in(tmp_path / "old" / "python", lacking="hypothesis tqdm")
    done = run_autograder(container, [only_bash], AUTOGRADER_PYTHON=str(lacking))
    assert done.returncode == 2
    assert f"{lacking} cannot import hypothesis tqdm" in done.stderr
    assert ran(container / "venv" / "bin" / "python") == ""


@pytest.mark.slow
def test_run_autograder_without_a_notebook_writes_a_zero_that_says_what_to_upload(container):
    done = run_autograder(container, os.environ["PATH"].split(os.pathsep), AUTOGRADER_PYTHON=sys.executable)
    assert done.returncode == 0, done.stderr
    results = json.loads((container / "results" / "results.json").read_text())
    jsonschema.validate(results, SCHEMA)
    assert results["score"] == 0 and f"upload {ASSIGNMENT}.ipynb" in results["output"]
