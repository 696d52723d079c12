"""The instructor's guide (teaching.md and its Chinese twin) and what it promises about the repository.

The guide's week is played in a fresh copy of the repository by tests/test_instructor_week.py, which
also takes the guide's screenshots; these tests read the sources and need no build.
"""

import re
import subprocess

import pytest

from tests.conftest import REPO
from tools import guide_screenshots

EDITIONS = [REPO / "teaching.md", REPO / "zh" / "teaching.md"]
FIGURE = re.compile(r"^```\{figure\} (\S+)", re.M)


def the_week(page):
    """The commands of the block named the-week, comments left out (each edition writes its own)."""
    found = re.search(r"^```\{code-block\} bash\n:name: the-week\n(.*?)^```", page.read_text(), re.S | re.M)
    assert found, f"{page} has no code block named the-week"
    return [line.split("#")[0].strip() for line in found[1].splitlines() if line.split("#")[0].strip()]


def test_both_editions_of_the_guide_give_the_same_commands_for_the_week():
    english, chinese = (the_week(page) for page in EDITIONS)
    assert chinese == english and len(english) >= 6


@pytest.mark.parametrize("page", EDITIONS, ids=["English", "Chinese"])
def test_every_image_the_guide_shows_exists(page):
    images = FIGURE.findall(page.read_text())
    assert images and [image for image in images if not (page.parent / image).is_file()] == []


def test_every_screenshot_the_guide_shows_is_one_the_tools_refresh():
    """figures/teaching/ is guide_screenshots.COMMITTED: each picture there comes from a browser test."""
    images = FIGURE.findall(EDITIONS[0].read_text())
    shown = {REPO / image for image in images if image.startswith("figures/teaching/")}
    assert shown and {path.parent for path in shown} == {guide_screenshots.COMMITTED}


def commands_writing(page):
    """Every path the guide's commands are told to write: -o FILE, --results DIR and the try_gradescope/ folder."""
    blocks = re.findall(r"^```(?:bash|\{code-block\} bash)\n(.*?)^```", page.read_text(), re.S | re.M)
    text = "\n".join(blocks)
    named = set(re.findall(r"(?:-o|--results) ([^\s-]\S*)", text))  # unzip's -o -q is no path
    return sorted(named | set(re.findall(r"\b(try_gradescope/\S*)", text)))


# What nbgrader and the grader write by themselves, as the guide's "What the week writes" lists it.
WRITTEN_BY_THE_TOOLS = [
    "gradebook.db", ".nbgrader.log", "grades.csv", "exchange/inbound/x", "downloaded/ex3_batchnorm/archive/a.zip",
    "submitted/ada/ex3_batchnorm/ex3_batchnorm.ipynb", "submitted/ada/ex3_batchnorm/timestamp.txt",
    "autograded/ada/ex3_batchnorm/ex3_batchnorm.ipynb", "feedback/ada/ex3_batchnorm/ex3_batchnorm.html",
    "results/ex3_batchnorm/ada.json", "results/ex3_batchnorm/grades.csv", "results/ex3_batchnorm/feedback/ada.md",
    "results/ex3_batchnorm/handback/ada.html", "results/ex3_batchnorm/handback/ada.md",
    "results/ex3_batchnorm/similarity.html", "results/ex3_batchnorm/gradebook.url",
]


def test_every_path_the_guides_commands_write_is_git_ignored():
    paths = commands_writing(EDITIONS[0]) + WRITTEN_BY_THE_TOOLS
    assert {"canvas-grades.csv", "ex2_autograder.zip", "try_gradescope/source"} <= set(paths)
    done = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=REPO, input="\n".join(paths) + "\n",
                          capture_output=True, text=True)
    assert sorted(set(paths) - set(done.stdout.split())) == []
