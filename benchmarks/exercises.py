"""Time each solution notebook run top to bottom, and the regeneration of every release.

    .venv/bin/python benchmarks/exercises.py

Target on the 2-core course machine: each solution notebook executes in under
30 s, kernel start included. Prints a table, writes
benchmarks/results/exercises.json, exits 1 if a target is missed.
"""

import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from release_exercises import ROOT, assignments, regenerated_copy  # noqa: E402

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
    print(f"{'measurement':40} {'seconds':>8} {'target':>7}")
    for name, seconds, target in rows:
        verdict = "" if target is None else ("ok" if seconds < target else "MISSED")
        print(f"{name:40} {seconds:8.1f} {target or '':>7}  {verdict}")
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    (results / "exercises.json").write_text(json.dumps(
        {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
         "seconds": {name: round(s, 2) for name, s, _ in rows}}, indent=2) + "\n")
    return 0 if all(target is None or seconds < target for _, seconds, target in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
