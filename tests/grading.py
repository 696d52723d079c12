"""Build exercise notebooks (reference, blank release, with a wrong cell) and grade them in-process.

The in-process grading goes through ``autograder.kernel``'s transport: the same executor
and wire format as the sandbox, without the process boundary. Tests of the sandbox
itself grade the same notebooks with ``python -m autograder grade``.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
from functools import cache
from pathlib import Path

from autograder import load, run, scoring
from autograder.checks import Submission
from autograder.kernel import local_transport, refuse_tags
from autograder.sandboxed.executor import Executor

REPO = Path(__file__).resolve().parent.parent


@cache
def _solution(assignment: str) -> dict:
    return json.loads((REPO / "solutions" / assignment / f"{assignment}.ipynb").read_text())


def reference(assignment: str) -> dict:
    return copy.deepcopy(_solution(assignment))


def blank(assignment: str) -> dict:
    return json.loads((REPO / "exercises" / assignment / f"{assignment}.ipynb").read_text())


def with_cell(assignment: str, cell: str, source: str) -> dict:
    """The reference notebook with the solution cell ``cell`` replaced by ``source``."""
    return with_cells(assignment, {cell: source})


def with_cells(assignment: str, replacements: dict[str, str]) -> dict:
    """The reference notebook with several solution cells replaced: {grade_id: source}."""
    notebook = reference(assignment)
    for cell, source in replacements.items():
        found = [c for c in notebook["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == cell]
        assert found, f"{assignment} has no cell {cell}"
        found[0]["source"] = source
    return notebook


def grade_in_process(assignment: str, notebook: dict) -> list[scoring.PartScore]:
    """Every part's score, running the notebook's cells and the hidden suite in this process.

    The cells are the ones ``python -m autograder grade`` would run (``load.cells``).
    """
    entry = load.Entry("in-process", Path("in-process.ipynb"))
    load.cells(assignment, entry, notebook["cells"])
    executor = Executor()
    with contextlib.redirect_stdout(io.StringIO()):
        executor.handle(run.exec_request(entry.cells))
        return scoring.grade(assignment, Submission(local_transport(executor, refuse_tags(assignment))))


def max_scores(assignment: str) -> dict[str, float]:
    return {part.name: part.points for part in scoring.collect(assignment)}


def write_class(folder: Path, notebooks: dict[str, dict | bytes | str]) -> Path:
    """A folder of submissions: name -> notebook dict (written as JSON), or raw bytes/text."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in notebooks.items():
        path = folder / f"{name}.ipynb"
        if isinstance(content, dict):
            path.write_text(json.dumps(content))
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return folder


def run_grader(*args, cwd=REPO, timeout=900):
    """``python -m autograder ARGS`` in a subprocess, as an instructor runs it."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(REPO)}  # as if run from the course folder, wherever cwd is
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=env)


def results_of(folder: Path) -> dict[str, dict]:
    """student_id -> parsed result JSON, for every result in ``folder``."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def part_scores(result: dict) -> dict[str, float]:
    return {name: part["score"] for name, part in result["extra_data"]["parts"].items()}


def measured_scores(result: dict) -> dict[str, float]:
    """What the tests measured per part: a part held for review keeps it in ``held``."""
    return {name: part.get("held", part["score"]) for name, part in result["extra_data"]["parts"].items()}
