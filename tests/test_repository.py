"""Repository conventions: one test command shared by README and CI, exact pins."""

import re

from conftest import REPO


def readme_commands():
    """The shell commands in the README's first code block."""
    text = (REPO / "README.md").read_text()
    block = re.search(r"```(?:bash|sh)\n(.*?)```", text, re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_readme_opens_with_a_build_command_and_a_test_command():
    build, test = readme_commands()[:2]
    assert build.endswith(".venv/bin/python tools/book_build.py")  # both editions, strictly
    assert "pytest" in test
    for command in (build, test):
        assert "python3 -m venv" in command and "requirements.txt" in command


def test_the_build_command_builds_strictly():
    import book_build  # tools/ is on sys.path (see conftest.py)

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
