"""The book builds strictly, every chapter executes, and broken code breaks the build."""

import json
import textwrap

import pytest
from tools.book_build import build_book
from tests.conftest import make_mini_book


def test_strict_build_has_zero_warnings(book):
    warnings = [line for line in book.log.splitlines() if "WARNING" in line and "IPKernelApp" not in line]
    assert warnings == []


@pytest.fixture(scope="module")
def executed_notebooks(book, toc_chapters):
    return {ch: book.executed / f"{ch}.ipynb" for ch in toc_chapters}


def test_every_chapter_in_the_toc_is_executed(executed_notebooks):
    missing = [ch for ch, path in executed_notebooks.items() if not path.exists()]
    assert missing == []


def code_cells(path):
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def tags(cell):
    return cell["metadata"].get("tags", [])


def test_every_code_cell_of_every_chapter_ran_without_error(executed_notebooks):
    for chapter, path in executed_notebooks.items():
        cells = code_cells(path)
        assert cells, f"{chapter} has no code cells"
        to_run = [c for c in cells if "skip-execution" not in tags(c)]
        assert all(c["execution_count"] is not None for c in to_run), f"{chapter}: a cell did not run"
        errors = [o for c in cells for o in c["outputs"] if o["output_type"] == "error"]
        assert errors == [], f"{chapter} raised: {errors[0]['ename'] if errors else ''}"


def test_only_cells_left_out_of_the_book_skip_execution(executed_notebooks):
    """A cell for Jupyter only (the ipywidgets explorer) may skip the build, but the book never shows it."""
    for chapter, path in executed_notebooks.items():
        skipped = [c for c in code_cells(path) if "skip-execution" in tags(c)]
        assert all("remove-cell" in tags(c) and c["execution_count"] is None for c in skipped), chapter


def test_every_chapter_is_rendered_to_html(book, toc_chapters):
    for chapter in toc_chapters:
        assert (book.html / f"{chapter}.html").exists()


@pytest.mark.slow
@pytest.mark.build
def test_a_script_from_a_cdn_fails_the_build(tmp_path):
    source = make_mini_book(tmp_path / "src", html_js_files=["https://cdn.example.org/widget.js"])
    result = build_book(source, tmp_path / "out")
    assert result.returncode != 0
    assert "loads https://cdn.example.org/widget.js from the network" in result.log


@pytest.fixture(scope="module")
def failing_book_build(tmp_path_factory):
    """The build of a one-chapter book, with this repository's configuration, whose chapter raises."""
    tmp_path = tmp_path_factory.mktemp("failing")
    source = make_mini_book(tmp_path / "src", chapters=["chapters/broken"])
    (source / "chapters" / "broken.md").write_text(
        textwrap.dedent(
            """\
            ---
            jupytext:
              text_representation:
                format_name: myst
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
    return build_book(source, tmp_path / "out")


def test_a_chapter_that_raises_fails_the_build(failing_book_build):
    assert failing_book_build.returncode != 0
    assert "broken.md: WARNING: Executing notebook failed" in failing_book_build.log


def test_a_failing_chapter_leaves_its_traceback_in_a_report(failing_book_build):
    report = failing_book_build.html / "reports" / "chapters" / "broken.err.log"
    assert "this chapter is broken on purpose" in report.read_text()


def test_no_chapter_prints_warnings_or_other_stderr_into_the_page(executed_notebooks):
    for chapter, path in executed_notebooks.items():
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        stderr = ["".join(o["text"]) for c in cells for o in c["outputs"] if o.get("name") == "stderr"]
        assert stderr == [], f"{chapter} writes to stderr: {stderr[:1]}"
