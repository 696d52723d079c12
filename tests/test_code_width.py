"""Every code line of every chapter fits the book's code column, so no line end hides behind a scroll bar.

The page's code column holds about 88 characters; what goes further, often a shape comment
such as ``# (B, T, C)``, is only seen by scrolling sideways. The limit applies to every code
cell of every chapter in _toc.yml, hidden ones included: the notebook twins show them all.
"""

import re
import unicodedata

import jupytext
import pytest
import yaml
from tests.conftest import REPO

MAX_CHARS = 88
# A URL cannot be wrapped, and the Colab cell must hold the helpers' address verbatim
# (tests/test_notebook_twins.py): a line that is nothing but a quoted URL is exempt.
URL_ONLY = re.compile(r"""^\s*(["'])https?://\S+\1,?$""")


def chapters_in_toc():
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    return [REPO / f"{entry['file']}.md" for part in toc["parts"] for entry in part["chapters"]]


def code_lines(source):
    """(cell number, line) for every line of every code cell of a MyST notebook."""
    notebook = jupytext.read(source, fmt="md:myst")
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for number, cell in enumerate(code_cells, start=1):
        for line in cell.source.splitlines():
            yield number, line


def columns(line):
    """Width of a line in a monospaced font: a Chinese character (East Asian wide) takes two columns."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in line)


def too_long(source):
    return [
        f"code cell {number}: {columns(line)} columns: {line.strip()[:60]}..."
        for number, line in code_lines(source)
        if columns(line) > MAX_CHARS and not URL_ONLY.match(line)
    ]


@pytest.mark.parametrize("chapter", chapters_in_toc(), ids=lambda p: p.stem)
def test_every_code_line_fits_the_code_column(chapter):
    assert too_long(chapter) == []


def test_a_line_one_character_too_long_is_reported(tmp_path):
    source = tmp_path / "demo.md"
    line = "x = 1  # " + "a" * (MAX_CHARS - 8)
    source.write_text(f"# Demo\n\n```{{code-cell}} ipython3\n{line[:-1]}\n{line}\n```\n")
    assert len(too_long(source)) == 1


def test_a_chinese_character_takes_two_columns(tmp_path):
    source = tmp_path / "demo.md"
    fits = 'zh = "' + "归一化" * 27 + '"'  # 6 + 81 x 2 + 1 columns > 88, although only 88 characters
    source.write_text(f"# Demo\n\n```{{code-cell}} ipython3\n{fits}\n```\n")
    assert len(fits) == 88 and len(too_long(source)) == 1


def test_a_line_that_is_only_a_url_is_exempt(tmp_path):
    source = tmp_path / "demo.md"
    url = '    "https://example.org/' + "a" * MAX_CHARS + '.py",'
    source.write_text(f"# Demo\n\n```{{code-cell}} ipython3\nf(\n{url}\n)\n```\n")
    assert too_long(source) == []
