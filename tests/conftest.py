"""Shared fixtures: the repository, and one strict build of the book per test session."""

import json
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
from book_build import BookBuild, build_book  # noqa: E402


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
def book(tmp_path_factory) -> BookBuild:
    """The whole book, built strictly from a clean state (fresh output folder and cache)."""
    result = build_book(REPO, tmp_path_factory.mktemp("book"))
    if result.returncode != 0:
        pytest.fail(f"the book build failed (exit {result.returncode}):\n{result.log[-6000:]}")
    return result


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
