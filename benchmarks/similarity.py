"""Time ``python -m autograder similarity`` on a generated class of ex2_layernorm.

    .venv/bin/python -m benchmarks.similarity [--students 200]

Each student hands in one of the honest corpus's notebooks (tests/honest_corpus.py) with its variables
renamed and its comments rewritten at random, so that most pairs share a lot (the slow case: every shared
passage is located); one student in ten hands in another's notebook unchanged. Target: the whole command,
start to page, in under 60 s for 200 students. Prints a table, writes benchmarks/results/similarity.json,
exits 1 if the target is missed.
"""

import argparse
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.report import report
from tests.grading import write_class
from tests.honest_corpus import CORPUS

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENT = "ex2_layernorm"
TARGET = 60.0


def disguised(source: str, rng: random.Random) -> str:
    """``source`` with each local name renamed (or not) and each comment replaced (or dropped)."""
    names = set(re.findall(r"(?<![.\w])([a-z_][a-z0-9_]*)\s*=(?!=)", source))
    for name in names:
        if rng.random() < 0.7:
            source = re.sub(rf"(?<![.\w]){name}\b", f"{name}_{rng.randrange(100)}", source)
    return re.sub(r"#[^\n]*", lambda m: rng.choice(["", "# step", "# see the chapter"]), source)


def make_class(count: int, seed: int = 0) -> dict[str, dict]:
    rng = random.Random(seed)
    honest = [entry for entry in CORPUS if entry.assignment == ASSIGNMENT]
    students: dict[str, dict] = {}
    for i in range(count):
        if i % 10 == 9:
            students[f"s{i:03d}"] = students[f"s{rng.randrange(i - 1):03d}"]
            continue
        entry = honest[i % len(honest)]
        notebook = entry.notebook()
        for cell in notebook["cells"]:
            if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
                cell["source"] = disguised(cell["source"], rng)
        students[f"s{i:03d}"] = notebook
    return students


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_class(Path(tmp) / "class", make_class(args.students))
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "autograder", "similarity", ASSIGNMENT, str(folder),
                               "-o", str(Path(tmp) / "similarity.html")], cwd=REPO, capture_output=True, text=True)
        seconds = time.monotonic() - start
        if done.returncode != 0:
            print(done.stdout, done.stderr, sep="\n")
            return 1
        print("\n".join(done.stdout.splitlines()[:4]))
        size = (Path(tmp) / "similarity.html").stat().st_size
        print(f"page: {size / 1024:.0f} KiB")
    return report("similarity", [(f"similarity report, {args.students} students", seconds, TARGET)])


if __name__ == "__main__":
    sys.exit(main())
