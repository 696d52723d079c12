"""Grade one class of ex2_layernorm twice: with this grader and with `nbgrader autograde`.

    .venv/bin/python -m benchmarks.autograder [--students 200] [--jobs 2]

The class mixes correct, buggy (the catalogue of wrong implementations), malformed and
blank submissions. nbgrader runs the same hidden suite inside each student's kernel
(the grade cells call it), so both do equivalent checks; this grader adds the sandbox.
Target: at least 35x nbgrader's throughput (aim: 50x). Prints a table, writes
benchmarks/results/autograder.json, exits 1 if the target is missed.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.report import report
from tests.catalogue import catalogue
from tests.grading import blank, reference, with_cell
from tools.release_exercises import run_nbgrader

REPO = Path(__file__).resolve().parent.parent

ASSIGNMENT = "ex2_layernorm"
SPEEDUP_TARGET = 35.0  # issue 21: at least 35x; aim for 50x


def make_class(count: int) -> dict[str, bytes]:
    """count submissions: 40 % correct, 40 % buggy, 10 % malformed, 10 % blank."""
    wrong = [w for w in catalogue() if w.assignment == ASSIGNMENT]
    malformed = [b"", b"{not json", json.dumps({"cells": "oops"}).encode(), b"\xff\xfe garbage"]
    notebooks = {}
    for i in range(count):
        kind = i % 10
        if kind < 4:
            content = json.dumps(reference(ASSIGNMENT)).encode()
        elif kind < 8:
            mistake = wrong[i % len(wrong)]
            content = json.dumps(with_cell(ASSIGNMENT, mistake.cell, mistake.source)).encode()
        elif kind == 8:
            content = malformed[i % len(malformed)]
        else:
            content = json.dumps(blank(ASSIGNMENT)).encode()
        notebooks[f"student{i:03d}"] = content
    return notebooks


def make_course(folder: Path, notebooks: dict[str, bytes]) -> None:
    shutil.copy(REPO / "nbgrader_config.py", folder)
    shutil.copytree(REPO / "solutions" / ASSIGNMENT, folder / "solutions" / ASSIGNMENT)
    shutil.copytree(REPO / "autograder", folder / "autograder", ignore=shutil.ignore_patterns("__pycache__"))
    result = run_nbgrader(["generate_assignment", ASSIGNMENT], folder)
    assert result.returncode == 0, result.stdout + result.stderr
    for student, content in notebooks.items():
        target = folder / "submitted" / student / ASSIGNMENT
        target.mkdir(parents=True)
        (target / f"{ASSIGNMENT}.ipynb").write_bytes(content)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    notebooks = make_class(args.students)
    with tempfile.TemporaryDirectory() as tmp:
        ours_course, theirs_course = Path(tmp) / "ours", Path(tmp) / "theirs"
        for folder in (ours_course, theirs_course):
            folder.mkdir()
            make_course(folder, notebooks)
        env = {**os.environ, "PYTHONPATH": str(ours_course)}
        start = time.perf_counter()
        ours = subprocess.run([sys.executable, "-m", "autograder", "grade", ASSIGNMENT, str(ours_course),
                               "--jobs", str(args.jobs), "--quiet"], cwd=ours_course, env=env,
                              capture_output=True, text=True)
        ours_seconds = time.perf_counter() - start
        print(ours.stdout)
        assert ours.returncode == 0, ours.stderr
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
        start = time.perf_counter()
        theirs = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, "--create"],
                                cwd=theirs_course, env=env, capture_output=True, text=True)
        theirs_seconds = time.perf_counter() - start
        failed = len(set(re.findall(r"error processing assignment '[^']+' for student '([^']+)'",
                                    theirs.stdout + theirs.stderr)))
        print(f"nbgrader autograde exit status {theirs.returncode}; submissions it could not process: {failed}")
    per_ours, per_theirs = ours_seconds / args.students, theirs_seconds / args.students
    speedup = theirs_seconds / ours_seconds
    print(f"this grader: {ours_seconds:.1f} s for {args.students} ({per_ours * 1000:.0f} ms each, "
          f"{args.jobs} jobs, sandboxed)")
    print(f"nbgrader autograde: {theirs_seconds:.1f} s ({per_theirs:.2f} s each)")
    print(f"speed-up: {speedup:.1f}x (target {SPEEDUP_TARGET:.0f}x)")
    code = report("autograder", [
        (f"this grader, {args.students} submissions", ours_seconds, None),
        (f"nbgrader autograde, {args.students} submissions", theirs_seconds, None),
        ("nbgrader time / this grader's time (x)", speedup, None),
    ])
    return code if speedup >= SPEEDUP_TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
