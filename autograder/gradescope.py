"""Package the grader as a Gradescope autograder, and run it the way Gradescope does.

The zip holds ``setup.sh`` (installs bubblewrap and the pinned packages into
``/autograder/venv``), ``run_autograder`` (grades ``$ROOT/submission/*.ipynb`` and writes
``$ROOT/results/results.json``), the ``autograder`` package with the assignment's hidden
suite and the results schema, the released notebook (to know which cells are the course's)
and the requirements. ``ROOT`` is ``/autograder`` on Gradescope and ``$AUTOGRADER_ROOT``
anywhere else, so the zip can be tried in a folder laid out like Gradescope's container.
Every results.json is checked against Gradescope's schema (``gradescope_results.schema.json``,
written from Gradescope's specification) before it is written: a result Gradescope would
refuse is a grader error the instructor sees, never a broken upload. A task held for review
reaches Gradescope as tests at 0 that each say so, with what they measured (``report.result``);
the guide (teaching.md, "Gradescope") says how an instructor gives those points there.
"""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from functools import cache
from pathlib import Path

from autograder import load, report, run, scoring
from autograder.sandbox import Limits

PACKAGE = Path(__file__).resolve().parent
REPO = PACKAGE.parent
SCHEMA = PACKAGE / "gradescope_results.schema.json"

# What the grader needs at run time, with the versions of requirements.txt.
RUNTIME = ["torch", "numpy", "hypothesis", "attrs", "sortedcontainers", "nbformat", "fastjsonschema", "jsonschema",
           "jsonschema-specifications", "referencing", "rpds-py", "jupyter_core", "traitlets", "platformdirs",
           "typing_extensions", "filelock", "fsspec", "Jinja2", "MarkupSafe", "networkx", "sympy", "mpmath",
           "setuptools", "tqdm"]
# What run_autograder checks a Python can import before it grades with it.
IMPORTS = ["torch", "numpy", "nbformat", "hypothesis", "jsonschema", "tqdm"]

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image. Choose the base image
# Ubuntu 24.04 on the Configure Autograder page: the grader needs Python 3.11 or later, and 24.04's
# python3 is 3.12 (22.04's is 3.10). A step that fails stops the build and says which step it was,
# so Gradescope shows a failed build rather than an autograder that cannot grade.
# AUTOGRADER_ROOT (default /autograder) lets the script be tried in a folder laid out like the container.
set -euo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"

step() {{  # step WHAT COMMAND...: run COMMAND; if it fails, say that WHAT failed and stop with its status
    local what="$1" status
    shift
    echo "setup.sh: $what"
    "$@" || {{
        status=$?
        echo "setup.sh: FAILED (exit status $status): $what" >&2
        exit "$status"
    }}
}}

step "apt-get update (refresh the package lists)" apt-get update
step "apt-get install bubblewrap python3-pip python3-venv" \\
    apt-get install -y --no-install-recommends bubblewrap python3-pip python3-venv
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "setup.sh: FAILED: $(python3 -V 2>&1) is too old; the grader needs Python 3.11 or later." \\
        "Choose the base image Ubuntu 24.04 (python3 3.12) on Gradescope's Configure Autograder page." >&2
    exit 1
fi
step "cd $ROOT/source" cd "$ROOT/source"
step "python3 -m venv $ROOT/venv" python3 -m venv "$ROOT/venv"
step "pip install torch=={torch} (CPU build)" "$ROOT/venv/bin/pip" install --progress-bar off \\
    --index-url https://download.pytorch.org/whl/cpu torch=={torch}
step "pip install -r requirements.txt" "$ROOT/venv/bin/pip" install --progress-bar off -r requirements.txt
echo "setup.sh: done; run_autograder will grade with $ROOT/venv/bin/python"
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for every submission, as /autograder/run_autograder. It reads two variables,
# neither of which Gradescope sets:
#   AUTOGRADER_ROOT    the folder laid out like Gradescope's container: source/ (this zip), submission/,
#                      results/ (default /autograder)
#   AUTOGRADER_PYTHON  the Python to grade with. Unset: the first of $ROOT/venv/bin/python (setup.sh
#                      makes it) and python3 on PATH that can import the grader's packages.
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"

unfit() {{  # why Python $1 cannot run the grader; nothing when it can
    local found lacking
    found="$(command -v "$1")" || {{ echo "not found"; return; }}
    lacking="$("$found" -c 'import importlib.util as u, sys
print(" ".join(name for name in sys.argv[1:] if u.find_spec(name) is None))' {imports} 2>/dev/null)" \\
        || {{ echo "$found does not run"; return; }}
    [ -z "$lacking" ] || echo "$found cannot import $lacking"
}}

if [ -n "${{AUTOGRADER_PYTHON:-}}" ]; then
    candidates=("$AUTOGRADER_PYTHON")
else
    candidates=("$ROOT/venv/bin/python" python3)
fi
tried=()
for python in "${{candidates[@]}}"; do
    why="$(unfit "$python")"
    if [ -z "$why" ]; then
        python="$(command -v "$python")"
        [ "${{python:0:1}}" = / ] || python="$PWD/$python"  # a relative AUTOGRADER_PYTHON, before the cd below
        [ ${{#tried[@]}} -eq 0 ] || printf 'run_autograder: %s; grading with %s\\n' "${{tried[*]}}" "$python" >&2
        cd "$ROOT/source" || exit 2
        exec "$python" -m autograder gradescope-run {assignment} --root "$ROOT"
    fi
    tried+=("$python: $why")
done
{{
    echo "run_autograder: no Python here can run the grader. Looked for, in order:"
    printf '  %s\\n' "${{tried[@]}}"
    echo "Run setup.sh (it makes $ROOT/venv), or set AUTOGRADER_PYTHON to a Python with the packages of"
    echo "$ROOT/source/requirements.txt and torch."
}} >&2
exit 2
"""


class BadResults(ValueError):
    """A results.json that Gradescope's schema refuses: a bug in the grader, never the student's fault."""


@cache
def validator():
    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def checked_json(data: dict) -> str:
    """``data`` as results.json text, once it matches Gradescope's schema; ``BadResults`` names what does not."""
    problems = [f"{'/'.join(map(str, error.absolute_path)) or '(top level)'}: {error.message}"
                for error in validator().iter_errors(data)]
    if problems:
        raise BadResults("; ".join(problems[:5]))
    try:
        return json.dumps(data, indent=1, allow_nan=False)
    except ValueError as error:  # NaN or infinity: not JSON, whatever the schema says
        raise BadResults(str(error)) from None


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
        add_text("run_autograder", RUN.format(assignment=assignment, imports=" ".join(IMPORTS)), executable=True)
        add_text("requirements.txt", "\n".join(line for line in requirements if not line.startswith("torch==")) + "\n")
        for path in sorted(PACKAGE.rglob("*.py")):
            relative = path.relative_to(PACKAGE)
            if relative.parts[0] == "suites" and len(relative.parts) > 2 and relative.parts[1] != assignment:
                continue
            archive.write(path, f"autograder/{relative}")
        archive.write(SCHEMA, f"autograder/{SCHEMA.name}")
        release = REPO / "exercises" / assignment / f"{assignment}.ipynb"
        archive.write(release, f"exercises/{assignment}/{assignment}.ipynb")
    return output


def run_in_container(assignment: str, root: Path) -> int:
    """What run_autograder does: grade the one submission, write results/results.json.

    Returns 0 once results.json is written; 1, with no results.json, when the grader fails
    (Gradescope then shows the submission as not graded, and this output to the instructor).
    """
    submission, results = root / "submission", root / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "results.json").unlink(missing_ok=True)  # a stale one must never be uploaded for this submission
    notebooks = sorted(submission.glob("*.ipynb")) if submission.is_dir() else []
    preferred = [p for p in notebooks if p.name == f"{assignment}.ipynb"] or notebooks
    work = results / "work"
    if work.exists():
        shutil.rmtree(work)
    try:
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
        text = checked_json(data)
    except BadResults as error:
        problem = f"the result does not match Gradescope's results schema ({error})"
    except RuntimeError as error:  # the sandbox could not start
        problem = str(error)
    else:
        report.write_atomic(results / "results.json", text)
        return 0
    print(f"grader error: {problem}. No results.json was written, so Gradescope shows this submission as not "
          "graded; please report this.", file=sys.stderr)
    return 1
