"""Write the .ipynb twin of every text notebook, or check that they are current.

The MyST Markdown file is the one source of truth; the .ipynb beside it exists
for Colab and Binder (chapters of both editions) and for nbgrader (exercise solutions), which
open notebooks, not Markdown. Twins carry no outputs: the book build executes
the chapters. tools/release_exercises.py calls this module for the solutions.

    python tools/sync_notebooks.py          # write the twins
    python tools/sync_notebooks.py --check  # exit 1 if any twin is stale
"""

import argparse
import hashlib
import sys
from pathlib import Path

import jupytext
import nbformat

ROOT = Path(__file__).resolve().parent.parent
TEXT_NOTEBOOKS = ("chapters/*.md", "zh/chapters/*.md", "solutions/*/*.md")


def text_notebooks(root: Path = ROOT) -> list[Path]:
    return sorted(p for pattern in TEXT_NOTEBOOKS for p in root.glob(pattern))


def twin_of(source: Path) -> Path:
    return source.with_suffix(".ipynb")


def render_twin(source: Path) -> str:
    """The exact text the .ipynb twin of ``source`` must contain."""
    notebook = jupytext.read(source, fmt="md:myst")
    for index, cell in enumerate(notebook.cells):
        # jupytext draws random cell ids; derive them from the cell instead so
        # that the same source always gives the same file.
        digest = hashlib.sha1(f"{index}:{cell.source}".encode()).hexdigest()
        cell.id = digest[:8]
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return nbformat.writes(notebook) + "\n"


def write_twin(source: Path) -> Path:
    """Write the .ipynb twin of ``source`` and return its path."""
    twin = twin_of(source)
    twin.write_text(render_twin(source), encoding="utf-8")
    return twin


def stale_twins(root: Path = ROOT) -> list[Path]:
    stale = []
    for source in text_notebooks(root):
        twin = twin_of(source)
        if not twin.exists() or twin.read_text(encoding="utf-8") != render_twin(source):
            stale.append(twin)
    return stale


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale twins")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_twins()
        for twin in stale:
            print(f"stale: {twin.relative_to(ROOT)} (run: python tools/sync_notebooks.py)")
        return 1 if stale else 0
    for source in text_notebooks():
        print(f"wrote {write_twin(source).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
