"""Every text notebook's .ipynb twin is generated from it and carries no outputs.

The text notebooks are the chapters and the exercise solutions.
"""

import json
import subprocess
import sys

import pytest
import sync_notebooks  # tools/ is on sys.path (see conftest.py)
from conftest import REPO

TEXT_SOURCES = sync_notebooks.text_notebooks()
CHAPTER_SOURCES = [p for p in TEXT_SOURCES if p.parent.name == "chapters"]


def test_there_are_chapter_sources():
    assert len(CHAPTER_SOURCES) >= 2


@pytest.mark.parametrize("source", TEXT_SOURCES, ids=lambda p: p.name)
def test_committed_twin_is_exactly_what_the_sync_command_writes(source):
    twin = sync_notebooks.twin_of(source)
    assert twin.exists(), f"missing {twin.name}: run python tools/sync_notebooks.py"
    assert twin.read_text(encoding="utf-8") == sync_notebooks.render_twin(source)


@pytest.mark.parametrize("source", TEXT_SOURCES, ids=lambda p: p.name)
def test_twin_has_no_outputs(source):
    notebook = json.loads(sync_notebooks.twin_of(source).read_text())
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)


def test_sync_check_reports_a_stale_twin(tmp_path):
    source = tmp_path / "chapters" / "demo.md"
    source.parent.mkdir()
    source.write_text("---\njupytext:\n  formats: md:myst\n---\n# Demo\n\n```{code-cell} ipython3\n1 + 1\n```\n")
    sync_notebooks.twin_of(source).write_text(sync_notebooks.render_twin(source))
    assert sync_notebooks.stale_twins(tmp_path) == []
    source.write_text(source.read_text().replace("1 + 1", "2 + 2"))
    assert sync_notebooks.stale_twins(tmp_path) == [sync_notebooks.twin_of(source)]


def test_sync_check_command_passes_on_the_repository():
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "sync_notebooks.py"), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize("source", CHAPTER_SOURCES, ids=lambda p: p.name)
def test_colab_fetches_the_helpers_from_the_configured_repository(source, repository):
    org, name, branch = repository["org"], repository["name"], repository["branch"]
    expected = f"https://raw.githubusercontent.com/{org}/{name}/{branch}/chapters/addnorm_helpers.py"
    assert expected in source.read_text()
