"""Shared fixtures: the repository, and one strict build of the book per test session."""

import json
import re
import shutil
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import torch
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(REPO / "_ext"))
sys.path.insert(0, str(REPO / "chapters"))
from book_build import BookBuild, build_editions  # noqa: E402
from quiz import Quiz, parse_quiz  # noqa: E402

QUIZ_BLOCK = re.compile(r"^:::\{quiz\}\n(.*?)^:::$", re.M | re.S)


def quizzes_in(source: Path) -> list[Quiz]:
    """The {quiz} blocks of a MyST chapter, in order, parsed by the book's own quiz extension."""
    return [parse_quiz(body) for body in QUIZ_BLOCK.findall(source.read_text())]


def make_mini_book(source, chapters=(), **sphinx_config):
    """A small book with this repository's configuration and extensions, plus ``sphinx_config``."""
    (source / "chapters").mkdir(parents=True)
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    config["sphinx"]["config"].update(sphinx_config)
    (source / "_config.yml").write_text(yaml.safe_dump(config))
    shutil.copytree(REPO / "_ext", source / "_ext", ignore=shutil.ignore_patterns("__pycache__"))
    (source / "intro.md").write_text("# Intro\n")
    entries = "".join(f"\n  - file: {chapter}" for chapter in chapters)
    (source / "_toc.yml").write_text("format: jb-book\nroot: intro\n" + (f"chapters:{entries}\n" if chapters else ""))
    return source


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def toc_chapters() -> list[str]:
    """Every chapter listed in _toc.yml, as a path without extension."""
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    return [entry["file"] for part in toc["parts"] for entry in part["chapters"]]


@pytest.fixture(scope="session")
def repository() -> dict[str, str]:
    """The GitHub repository _config.yml names: org, name, branch."""
    config = yaml.safe_load((REPO / "_config.yml").read_text())["repository"]
    org, name = urlparse(config["url"]).path.strip("/").split("/")
    return {"org": org, "name": name, "branch": config["branch"]}


@pytest.fixture(scope="session")
def editions(tmp_path_factory) -> tuple[BookBuild, BookBuild]:
    """Both editions, built strictly from a clean state (fresh output folder and cache), English first.

    The Chinese site is copied into the English one's ``zh/`` folder, so the site under test is the
    site readers get, both editions side by side.
    """
    english, chinese = build_editions(REPO, tmp_path_factory.mktemp("book"))
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
