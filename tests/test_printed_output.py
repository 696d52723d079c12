"""What the executed chapters print: values the text talks about, never noise."""

import json
import re

import pytest

from tests.conftest import REPO

CHAPTERS = sorted(path.stem for path in (REPO / "chapters").glob("[0-9][0-9]_*.md"))


@pytest.fixture(params=CHAPTERS)
def printed(book, request) -> list[str]:
    """Every line a chapter's code cells printed when the book was built."""
    notebook = json.loads((book.executed / "chapters" / f"{request.param}.ipynb").read_text())
    return [line for cell in notebook["cells"] if cell["cell_type"] == "code"
            for output in cell.get("outputs", []) if output["output_type"] == "stream"
            for line in "".join(output["text"]).splitlines()]


def test_no_chapter_prints_its_seeds(printed):
    """Seeds are named once in the text: a printed "seed = 3" tells the reader nothing."""
    assert not [line for line in printed if re.match(r"seeds? ?[=:]", line)]


def test_no_chapter_prints_a_table_it_also_shows(printed):
    """Tables are glued and shown once, rendered; their raw Markdown rows are not printed too."""
    assert not [line for line in printed if line.startswith("|")]
