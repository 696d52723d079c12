"""Time clean builds of both editions, rebuilds with nothing changed, and each chapter's execution.

    .venv/bin/python -m benchmarks.book_build

The Chinese edition is built after the English one from its execution cache, so it executes
nothing; its time is Sphinx reading and writing its pages. Targets on the 2-core course machine:
clean build of both editions under 300 s, of the Chinese one alone under 60 s, no-change rebuild of
both under 40 s, every chapter executing in under 60 s. Prints a table, writes
benchmarks/results/book_build.json, exits 1 if a target is missed.
"""

import sys
import tempfile
from pathlib import Path

from benchmarks.report import report
from tools.book_build import ROOT, build_editions

TARGETS = {"clean build": 300.0, "Chinese edition": 60.0, "no-change rebuild": 40.0, "chapter execution": 60.0}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="addnorm-bench-") as tmp:
        clean = build_editions(ROOT, Path(tmp))
        rebuild = build_editions(ROOT, Path(tmp))
    for name, (english, chinese) in (("clean build", clean), ("no-change rebuild", rebuild)):
        for edition, build in (("English", english), ("Chinese", chinese)):
            if build is None or build.returncode != 0:
                print(f"{name}, {edition} edition, failed:\n{build.log[-4000:] if build else 'not built'}")
                return 1
    if "Executing notebook" in clean[1].log:
        print("the Chinese build executed a notebook: its code differs from the English edition's")
        return 1
    rows = [
        ("clean build, both editions", clean[0].seconds + clean[1].seconds, TARGETS["clean build"]),
        ("clean build, English edition", clean[0].seconds, None),
        ("clean build, Chinese edition", clean[1].seconds, TARGETS["Chinese edition"]),
        ("no-change rebuild, both editions", rebuild[0].seconds + rebuild[1].seconds, TARGETS["no-change rebuild"]),
        ("no-change rebuild, English edition", rebuild[0].seconds, None),
        ("no-change rebuild, Chinese edition", rebuild[1].seconds, None),
    ]
    rows += [(f"execute {name}", s, TARGETS["chapter execution"])
             for name, s in sorted(clean[0].execution_seconds().items())]
    return report("book_build", rows)


if __name__ == "__main__":
    sys.exit(main())
