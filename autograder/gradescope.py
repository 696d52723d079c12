"""Package the grader as a Gradescope autograder, and run it the way Gradescope does.

The zip holds ``setup.sh`` (installs bubblewrap and the pinned packages), ``run_autograder``
(grades ``$ROOT/submission/*.ipynb`` and writes ``$ROOT/results/results.json``), the
``autograder`` package with the assignment's hidden suite, the released notebook (to know
which cells are the course's) and the requirements. ``ROOT`` is ``/autograder`` on
Gradescope and ``$AUTOGRADER_ROOT`` anywhere else, so the script can be tested in a
temporary folder laid out like Gradescope's container.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

from autograder import load, report, run, scoring
from autograder.sandbox import Limits

PACKAGE = Path(__file__).resolve().parent
REPO = PACKAGE.parent

# What the grader needs at run time, with the versions of requirements.txt.
RUNTIME = ["torch", "numpy", "hypothesis", "attrs", "sortedcontainers", "nbformat", "fastjsonschema", "jsonschema",
           "jsonschema-specifications", "referencing", "rpds-py", "jupyter_core", "traitlets", "platformdirs",
           "typing_extensions", "filelock", "fsspec", "Jinja2", "MarkupSafe", "networkx", "sympy", "mpmath",
           "setuptools"]

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once when it builds the autograder image.
set -euo pipefail
apt-get update && apt-get install -y --no-install-recommends bubblewrap python3-pip python3-venv || true
cd /autograder/source
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install --progress-bar off --index-url https://download.pytorch.org/whl/cpu torch=={torch}
/autograder/venv/bin/pip install --progress-bar off -r requirements.txt
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for every submission. ROOT is /autograder there.
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}}"
cd "$ROOT/source"
exec "$PYTHON" -m autograder gradescope-run {assignment} --root "$ROOT"
"""


def pinned(names: list[str]) -> list[str]:
    wanted = {name.lower().replace("_", "-") for name in names}
    lines = (REPO / "requirements.txt").read_text().splitlines()
    return [line for line in lines if "==" in line and line.split("==")[0].lower().replace("_", "-") in wanted]


def build(assignment: str, output: Path) -> Path:
    output.parent.mkdir(parents=True, exist_ok=True)
    requirements = pinned(RUNTIME)
    torch_version = next(line.split("==")[1] for line in requirements if line.startswith("torch=="))
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as archive:
        def add_text(name: str, text: str, executable: bool = False) -> None:
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o755 if executable else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, text)

        add_text("setup.sh", SETUP.format(torch=torch_version), executable=True)
        add_text("run_autograder", RUN.format(assignment=assignment), executable=True)
        add_text("requirements.txt", "\n".join(line for line in requirements if not line.startswith("torch==")) + "\n")
        for path in sorted(PACKAGE.rglob("*.py")):
            relative = path.relative_to(PACKAGE)
            if relative.parts[0] == "suites" and len(relative.parts) > 2 and relative.parts[1] != assignment:
                continue
            archive.write(path, f"autograder/{relative}")
        release = REPO / "exercises" / assignment / f"{assignment}.ipynb"
        archive.write(release, f"exercises/{assignment}/{assignment}.ipynb")
    return output


def run_in_container(assignment: str, root: Path) -> int:
    """What run_autograder does: grade the one submission, write results/results.json."""
    submission, results = root / "submission", root / "results"
    results.mkdir(parents=True, exist_ok=True)
    notebooks = sorted(submission.glob("*.ipynb")) if submission.is_dir() else []
    preferred = [p for p in notebooks if p.name == f"{assignment}.ipynb"] or notebooks
    work = results / "work"
    if work.exists():
        shutil.rmtree(work)
    if not preferred:
        parts = scoring.zero(assignment, "invalid", "no notebook was submitted")
        data = report.result(assignment, "submission", "", "invalid", parts,
                             [f"no .ipynb file was submitted: upload {assignment}.ipynb"], 0.0, "none")
    else:
        entry = load.read(assignment, load.Entry("submission", preferred[0]))
        if len(notebooks) > 1:
            entry.problems.insert(0, f"{len(notebooks)} notebooks submitted; graded {preferred[0].name}")
        run.grade_all(assignment, [entry], work, Limits(), 1, "auto")
        data = json.loads((work / "submission.json").read_text())
    report.write_atomic(results / "results.json", json.dumps(data, indent=1))
    return 0
