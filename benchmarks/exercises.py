"""Time each solution notebook run top to bottom, and the regeneration of every release.

    .venv/bin/python -m benchmarks.exercises

Target on the 2-core course machine: each solution notebook executes in under
30 s, kernel start included. Prints a table, writes
benchmarks/results/exercises.json, exits 1 if a target is missed.
"""

import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from benchmarks.report import report
from tools.release_exercises import ROOT, assignments, regenerated_copy

SOLUTION_TARGET = 30.0


def seconds_to_execute(path: Path) -> float:
    notebook = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(notebook, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return time.perf_counter() - start


def main() -> int:
    rows = [(f"run solutions/{name}", seconds_to_execute(ROOT / "solutions" / name / f"{name}.ipynb"),
             SOLUTION_TARGET) for name in assignments()]
    with tempfile.TemporaryDirectory(prefix="addnorm-bench-") as tmp:
        start = time.perf_counter()
        regenerated_copy(ROOT, Path(tmp))
        rows.append(("regenerate all releases", time.perf_counter() - start, None))
    return report("exercises", rows)


if __name__ == "__main__":
    sys.exit(main())
