"""Repository conventions: one test command shared by README and CI, exact pins."""

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest
from tests.conftest import REPO


def readme_commands():
    """The shell commands in the README's first code block."""
    text = (REPO / "README.md").read_text()
    block = re.search(r"```(?:bash|sh)\n(.*?)```", text, re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_readme_opens_with_a_build_command_and_a_test_command():
    build, test = readme_commands()[:2]
    assert build.endswith(".venv/bin/python -m tools.book_build")  # both editions, strictly
    assert "pytest" in test
    for command in (build, test):
        assert "python3 -m venv" in command and "requirements.txt" in command


def test_the_build_command_builds_strictly():
    from tools import book_build

    assert set(book_build.STRICT_FLAGS) == {"-W", "-n", "--keep-going"}


def test_ci_runs_exactly_the_readme_test_command():
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.startswith("#") and not line.startswith("set ")]
    assert ci == [readme_commands()[1]]


def test_every_requirement_is_pinned_exactly():
    lines = [l for l in (REPO / "requirements.txt").read_text().splitlines() if l and not l.startswith("#")]
    unpinned = [l for l in lines if not re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[A-Za-z0-9_.\-+]+", l)]
    assert unpinned == []


def test_required_packages_are_pinned_at_the_decided_versions():
    pins = dict(l.split("==") for l in (REPO / "requirements.txt").read_text().splitlines() if "==" in l)
    assert pins["jupyter-book"] == "1.0.4.post1"
    assert pins["torch"] == "2.13.0"
    assert pins["nbgrader"] == "0.9.6"
    for name in ("jupytext", "matplotlib", "pytest", "numpy"):
        assert name in pins


def test_pytest_is_configured_in_pyproject_alone():
    assert [name for name in ("pytest.ini", "setup.cfg", "tox.ini") if (REPO / name).exists()] == []
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    registered = {line.split(":")[0] for line in config["markers"]}
    assert {"slow", "build", "browser", "nbgrader", "sandbox"} <= registered
    assert "--strict-markers" in config["addopts"]


def collected(*args) -> set[str]:
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts=", "-p", "no:cacheprovider",
                           *args],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return {line for line in done.stdout.splitlines() if "::" in line}


def test_fast_subset_leaves_out_every_build_browser_and_nbgrader_test():
    fast = collected("-m", "not slow")
    heavy = collected("-m", "build or browser or nbgrader")
    assert len(fast) > 500 and len(heavy) > 300
    assert fast & heavy == set()
    files = {test.split("::")[0] for test in fast}
    assert not files & {"tests/test_browser.py", "tests/test_built_site.py", "tests/test_nbgrader_agreement.py",
                         "tests/test_phone_layout.py", "tests/test_instructor_week.py"}


SYS_PATH_EDIT = re.compile(r"sys\.path(\.insert|\.append|\.extend|\[[^\]]*\]\s*=)")


def test_no_test_tool_or_benchmark_edits_sys_path():
    """They import the repository's packages (tools, tests, benchmarks, autograder) from the top folder."""
    sources = [p for folder in ("tests", "tools", "benchmarks") for p in (REPO / folder).rglob("*.py")]
    offenders = [str(p.relative_to(REPO)) for p in sources
                 if p.name != "test_repository.py" and SYS_PATH_EDIT.search(p.read_text())]
    assert offenders == []


@pytest.mark.slow
def test_the_project_builds_a_wheel_with_the_autograder_its_suites_and_schema(tmp_path):
    source = tmp_path / "source"  # a copy: setuptools writes build/ and *.egg-info/ beside pyproject.toml
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".venv", "_build", ".git", "__pycache__", "*.ipynb"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(tmp_path), str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = tmp_path.glob("add_and_norm-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"autograder/gradescope_results.schema.json", "autograder/suites/ex2_layernorm/test_layer_norm.py",
            "autograder/sandboxed/zygote.py", "tools/editions.py"} <= names
    assert not any(name.startswith(("chapters/", "tests/", "solutions/")) for name in names)


def test_every_file_the_readme_names_exists():
    named = set(re.findall(r"`((?:tests|tools|benchmarks|autograder|_ext|_static|chapters|zh)/[\w./-]+\.\w+)`",
                           (REPO / "README.md").read_text()))
    assert len(named) > 10
    placeholders = re.compile(r"\bNN\b|NN_|\bNAME\b")  # chapters/NN_topic.md stands for every chapter
    assert sorted(path for path in named if not placeholders.search(path) and not (REPO / path).exists()) == []
