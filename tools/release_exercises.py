"""Regenerate every exercise release from its source, or check that they are current.

Each assignment has one source of truth, ``solutions/<name>/<name>.md`` (MyST
Markdown with nbgrader's cell metadata). This script writes the solution
notebook ``solutions/<name>/<name>.ipynb`` from it, then lets
``nbgrader generate_assignment`` write the student release into
``exercises/<name>/``.

    python -m tools.release_exercises           # regenerate everything in place
    python -m tools.release_exercises --check   # regenerate in a scratch copy; exit 1 on any difference
"""

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tools.sync_notebooks import write_twin

ROOT = Path(__file__).resolve().parent.parent
# What nbgrader needs to generate the releases, relative to the course root.
COURSE_FILES = ("nbgrader_config.py", "solutions")


def assignments(root: Path = ROOT) -> list[str]:
    """Names of the assignments: one folder with a MyST source each."""
    return sorted(p.parent.name for p in (root / "solutions").glob("*/*.md"))


def run_nbgrader(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run an nbgrader command in the course folder ``cwd``, capturing its output."""
    env = dict(os.environ)
    # nbgrader starts its database migrations with the `alembic` command, which
    # lives next to the Python that runs this script.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)


def generate_release(root: Path, name: str) -> None:
    """Run ``nbgrader generate_assignment`` for one assignment in the course at ``root``."""
    result = run_nbgrader(["generate_assignment", name, "--force",
                           "--db", f"sqlite:///{root / 'gradebook.db'}"], root)
    if result.returncode != 0:
        raise RuntimeError(
            f"nbgrader generate_assignment {name} failed (exit {result.returncode}):\n"
            f"{result.stdout[-3000:]}{result.stderr[-3000:]}"
        )


def regenerate(root: Path) -> None:
    """Write every solution notebook and every release of the course at ``root``."""
    for name in assignments(root):
        write_twin(root / "solutions" / name / f"{name}.md")
        generate_release(root, name)


def differences(left: Path, right: Path) -> list[str]:
    """Relative paths that differ between two folders (missing on one side included)."""
    found = []

    def walk(cmp: filecmp.dircmp, prefix: str) -> None:
        for name in cmp.left_only + cmp.right_only + cmp.funny_files:
            found.append(prefix + name)
        _, mismatch, errors = filecmp.cmpfiles(cmp.left, cmp.right, cmp.common_files, shallow=False)
        found.extend(prefix + name for name in mismatch + errors)
        for name, sub in cmp.subdirs.items():
            walk(sub, f"{prefix}{name}/")

    walk(filecmp.dircmp(left, right, ignore=[".ipynb_checkpoints", "__pycache__"]), "")
    return sorted(found)


def regenerated_copy(root: Path, scratch: Path) -> Path:
    """Copy the course sources to ``scratch`` and regenerate everything there."""
    copy = scratch / "course"
    copy.mkdir()
    for item in COURSE_FILES:
        if (root / item).is_dir():
            shutil.copytree(root / item, copy / item, ignore=shutil.ignore_patterns("*.ipynb"))
        else:
            shutil.copy2(root / item, copy / item)
    regenerate(copy)
    return copy


def stale_files(root: Path = ROOT) -> list[str]:
    """Committed solution notebooks and releases that differ from a fresh regeneration."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = regenerated_copy(root, Path(scratch))
        stale = [f"solutions/{p}" for p in differences(root / "solutions", copy / "solutions")]
        if not (root / "exercises").is_dir():
            return stale + ["exercises/"]
        stale += [f"exercises/{p}" for p in differences(root / "exercises", copy / "exercises")]
        return stale


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only report files that are out of date")
    args = parser.parse_args()
    if args.check:
        stale = stale_files()
        for path in stale:
            print(f"out of date: {path}")
        if stale:
            print("run: python -m tools.release_exercises")
        return 1 if stale else 0
    regenerate(ROOT)
    for name in assignments():
        print(f"released exercises/{name}/{name}.ipynb")
    return 0


if __name__ == "__main__":
    sys.exit(main())
