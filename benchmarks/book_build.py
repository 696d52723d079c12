"""Time a clean build of the book, a rebuild with nothing changed, and each chapter's execution.

    .venv/bin/python benchmarks/book_build.py

Targets on the 2-core course machine: clean build under 240 s, no-change
rebuild under 30 s, every chapter executing in under 60 s. Prints a table,
writes benchmarks/results/book_build.json, exits 1 if a target is missed.
"""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from book_build import ROOT, build_book  # noqa: E402
from report import report  # noqa: E402

TARGETS = {"clean build": 240.0, "no-change rebuild": 30.0, "chapter execution": 60.0}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="addnorm-bench-") as tmp:
        clean = build_book(ROOT, Path(tmp))
        rebuild = build_book(ROOT, Path(tmp))
    for name, build in (("clean build", clean), ("no-change rebuild", rebuild)):
        if build.returncode != 0:
            print(f"{name} failed (exit {build.returncode}):\n{build.log[-4000:]}")
            return 1
    rows = [("clean build", clean.seconds, TARGETS["clean build"]),
            ("no-change rebuild", rebuild.seconds, TARGETS["no-change rebuild"])]
    rows += [(f"execute {name}", s, TARGETS["chapter execution"])
             for name, s in sorted(clean.execution_seconds().items())]
    return report("book_build", rows)


if __name__ == "__main__":
    sys.exit(main())
