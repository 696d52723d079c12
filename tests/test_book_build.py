"""The book builds strictly, every chapter executes, and broken code breaks the build."""

import json
import textwrap

import pytest
from book_build import build_book
from conftest import REPO


def test_strict_build_has_zero_warnings(book):
    warnings = [line for line in book.log.splitlines() if "WARNING" in line and "IPKernelApp" not in line]
    assert warnings == []


@pytest.fixture(scope="module")
def executed_notebooks(book, toc_chapters):
    return {ch: book.executed / f"{ch}.ipynb" for ch in toc_chapters}


def test_every_chapter_in_the_toc_is_executed(executed_notebooks):
    missing = [ch for ch, path in executed_notebooks.items() if not path.exists()]
    assert missing == []


def test_every_code_cell_of_every_chapter_ran_without_error(executed_notebooks):
    for chapter, path in executed_notebooks.items():
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        assert cells, f"{chapter} has no code cells"
        assert all(c["execution_count"] is not None for c in cells), f"{chapter}: a cell did not run"
        errors = [o for c in cells for o in c["outputs"] if o["output_type"] == "error"]
        assert errors == [], f"{chapter} raised: {errors[0]['ename'] if errors else ''}"


def test_every_chapter_is_rendered_to_html(book, toc_chapters):
    for chapter in toc_chapters:
        assert (book.html / f"{chapter}.html").exists()


@pytest.fixture
def book_with_a_failing_chapter(tmp_path):
    """A copy of the book's configuration whose only chapter raises."""
    source = tmp_path / "src"
    (source / "chapters").mkdir(parents=True)
    for name in ("_config.yml", "intro.md"):
        (source / name).write_text((REPO / name).read_text())
    (source / "_ext").mkdir()
    (source / "_ext" / "offline_assets.py").write_text((REPO / "_ext" / "offline_assets.py").read_text())
    (source / "intro.md").write_text("# Intro\n")
    (source / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: chapters/broken\n")
    (source / "chapters" / "broken.md").write_text(
        textwrap.dedent(
            """\
            ---
            kernelspec:
              display_name: Python 3
              language: python
              name: python3
            ---
            # Broken

            ```{code-cell} ipython3
            raise RuntimeError("this chapter is broken on purpose")
            ```
            """
        )
    )
    return source


def test_a_chapter_that_raises_fails_the_build(book_with_a_failing_chapter, tmp_path):
    result = build_book(book_with_a_failing_chapter, tmp_path / "out")
    assert result.returncode != 0
    assert "broken" in result.log
