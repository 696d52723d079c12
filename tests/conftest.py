"""Shared fixtures: the repository, one strict build of the book per test session, and the system tools
some tests need (Chromium, bubblewrap).

A missing system tool skips only the tests that need it, with a one-line reason, except in CI
(``CI`` set to anything but ``false``/``0``), where nothing may be skipped and a missing tool fails them.
Tests that use the build, a browser or nbgrader are marked ``slow`` here, so ``pytest -m "not slow"`` is the
fast subset; each module can also mark itself.
"""

import ast
import json
import os
import re
import shutil
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
import torch
import yaml

from quiz import Quiz, parse_quiz  # _ext/ is on pytest's pythonpath (pyproject.toml)
from tools.book_build import BookBuild, build_editions

REPO = Path(__file__).resolve().parent.parent

QUIZ_BLOCK = re.compile(r"^:::\{quiz\}\n(.*?)^:::$", re.M | re.S)

# A test that uses one of these fixtures, directly or through another fixture, gets these markers.
FIXTURE_MARKERS = {
    "editions": ("slow", "build"),  # the session's build of both editions
    "failing_book_build": ("slow", "build"),  # a small book whose chapter raises (test_book_build.py)
    "chromium": ("slow", "browser"),
    "executed_solutions": ("slow",),  # every solution notebook run in a kernel (test_exercises.py)
    "executed_releases": ("slow",),
    "bubblewrap": ("sandbox",),
}


def pytest_collection_modifyitems(items):
    for item in items:
        for fixture, markers in FIXTURE_MARKERS.items():
            if fixture in item.fixturenames:
                for marker in markers:
                    item.add_marker(marker)
        if any(item.get_closest_marker(name) for name in ("build", "browser", "nbgrader")):
            item.add_marker("slow")


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing_tool(what: str, install: str) -> None:
    """Skip the test that needs ``what`` (fail it in CI), saying in one line how to install it."""
    reason = f"{what}: install with `sudo bash tools/install_system_packages.sh` ({install})"
    if in_ci():
        pytest.fail(f"{reason}; CI skips nothing", pytrace=False)
    pytest.skip(reason)


def say(config, line: str) -> None:
    """Print a progress line between test results, for the steps that take minutes."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        return
    with capture.global_and_fixture_disabled():  # fixtures run with output captured; this line is for the reader
        reporter.write_line(line)


@pytest.fixture(scope="session")
def chromium() -> str:
    """Path of Debian's Chromium (the browser tests never download one)."""
    path = shutil.which("chromium")
    if path is None:
        missing_tool("Chromium is not installed", "Debian's chromium package")
    return path


@pytest.fixture(scope="session")
def bubblewrap() -> None:
    """bubblewrap, able to create namespaces here: the autograder's sandbox."""
    from autograder.sandbox import bwrap_available

    if not bwrap_available():
        found = shutil.which("bwrap")
        missing_tool("bubblewrap cannot create namespaces here" if found else "bubblewrap is not installed",
                     "Debian's bubblewrap package; in a container, allow user namespaces")


def quizzes_in(source: Path) -> list[Quiz]:
    """The {quiz} blocks of a MyST chapter, in order, parsed by the book's own quiz extension."""
    return [parse_quiz(body) for body in QUIZ_BLOCK.findall(source.read_text())]


def make_mini_book(source, chapters=(), **sphinx_config):
    """A small book with this repository's configuration and extensions, plus ``sphinx_config``."""
    (source / "chapters").mkdir(parents=True)
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    config["sphinx"]["config"].update(sphinx_config)
    (source / "_config.yml").write_text(yaml.safe_dump(config))
    for folder in ("_ext", "tools"):  # _ext/learner_launch.py reads the learner's copy through tools/learner_copy.py
        shutil.copytree(REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for folder in ("_static", "_extra"):  # the favicon and what _config.yml names there
        shutil.copytree(REPO / folder, source / folder)
    (source / "intro.md").write_text("# Intro\n")
    entries = "".join(f"\n  - file: {chapter}" for chapter in chapters)
    (source / "_toc.yml").write_text("format: jb-book\nroot: intro\n" + (f"chapters:{entries}\n" if chapters else ""))
    return source


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def toc_chapters() -> list[str]:
    """Every chapter listed in _toc.yml, as a path without extension (not the glossary)."""
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    return [entry["file"] for part in toc["parts"] for entry in part["chapters"] if entry["file"].startswith("chapters/")]


@pytest.fixture(scope="session")
def repository() -> dict[str, str]:
    """The GitHub repository _config.yml names: org, name, branch."""
    config = yaml.safe_load((REPO / "_config.yml").read_text())["repository"]
    org, name = urlparse(config["url"]).path.strip("/").split("/")
    return {"org": org, "name": name, "branch": config["branch"]}


@pytest.fixture(scope="session")
def learner_copy() -> dict[str, str]:
    """The learner's copy _config.yml names (``learner_copy``), where launch buttons and links point: org, name, branch."""
    from tools.learner_copy import copy_repository

    repo, branch = copy_repository(REPO)
    org, name = repo.split("/")
    return {"org": org, "name": name, "branch": branch}


@pytest.fixture(scope="session")
def editions(tmp_path_factory, request) -> tuple[BookBuild, BookBuild]:
    """Both editions, built strictly from a clean state (fresh output folder and cache), English first.

    The Chinese site is copied into the English one's ``zh/`` folder, so the site under test is the
    site readers get, both editions side by side.
    """
    say(request.config, "\n[build] building both editions of the book strictly from a clean state (about 3 min on 2 cores)")
    start = time.monotonic()
    english, chinese = build_editions(REPO, tmp_path_factory.mktemp("book"))
    say(request.config, f"[build] done in {time.monotonic() - start:.0f} s")
    if english.returncode != 0:
        pytest.fail(f"the book build failed (exit {english.returncode}):\n{english.log[-6000:]}")
    if chinese.returncode != 0:
        pytest.fail(f"the Chinese build failed (exit {chinese.returncode}):\n{chinese.log[-6000:]}")
    return english, chinese


@pytest.fixture(scope="session")
def book(editions) -> BookBuild:
    """The English build; its site (``book.html``) holds the Chinese one under ``zh/``."""
    return editions[0]


@pytest.fixture(scope="session")
def zh_book(editions) -> BookBuild:
    """The Chinese build (its own folder, ``zh_book.output``); its site is ``book.html / "zh"``."""
    return editions[1]


@pytest.fixture(scope="session")
def glued_numbers(book):
    """chapter stem -> {glue name: plain-text value} of everything that chapter glues."""

    def read(stem: str) -> dict[str, str]:
        path = book.executed / "chapters" / f"{stem}.glue.json"
        data = json.loads(path.read_text())
        return {name: entry["data"]["text/plain"] for name, entry in data.items()}

    return read


def plain_value(text):
    """A glued value from its text/plain form: the number, or the string it shows."""
    try:
        value = ast.literal_eval(text)
    except (SyntaxError, ValueError):  # a glued Markdown table shows only its repr
        return text
    return float(value) if isinstance(value, (int, float)) else value


@pytest.fixture(scope="module")
def glued(glued_numbers, request):
    """What the chapter named by the test module's STEM glues: {name: plain-text value}."""
    return glued_numbers(request.module.STEM)


@pytest.fixture(scope="module")
def prose(request) -> str:
    """The MyST source of the chapter named by the test module's STEM."""
    return (REPO / "chapters" / f"{request.module.STEM}.md").read_text()


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models: one thread is faster, and much faster on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
