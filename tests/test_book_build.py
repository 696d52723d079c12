"""The book builds strictly, every chapter executes, and broken code breaks the build."""

import json
import textwrap

import pytest
import yaml
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


def make_mini_book(source, chapters=(), **sphinx_config):
    """A small book with this repository's configuration and extensions, plus ``sphinx_config``."""
    (source / "chapters").mkdir(parents=True)
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    config["sphinx"]["config"].update(sphinx_config)
    (source / "_config.yml").write_text(yaml.safe_dump(config))
    (source / "_ext").mkdir()
    (source / "_ext" / "offline_assets.py").write_text((REPO / "_ext" / "offline_assets.py").read_text())
    (source / "intro.md").write_text("# Intro\n")
    entries = "".join(f"\n  - file: {chapter}" for chapter in chapters)
    (source / "_toc.yml").write_text("format: jb-book\nroot: intro\n" + (f"chapters:{entries}\n" if chapters else ""))
    return source


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
