"""Several notebooks in one student's folder: every one is graded, the best one counts.

The policy, as the guide and the feedback state it: every notebook in
``submitted/<student>/<assignment>/`` is graded; the one with the highest score counts (before any
late penalty, with the points a task held for review measured; on a tie, the one named after the assignment, then the later file name). The others
are listed in the result (``extra_data.notebooks``), its notes and the feedback, so nobody has to
guess which one was graded (a Canvas upload of a blank copy beside the real one is the usual case).

The result stays one file per student, ``results/<assignment>/<student>.json``, the counted
notebook's, so every reader works as before. Each notebook is graded under a temporary id in
``results/<assignment>/.notebooks/`` (``expand``) alongside the class, then ``combine`` writes the
student's result and removes the temporary ones. The result's digest covers every notebook of the
folder, so an unchanged folder is not graded again and a changed or added notebook is.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from autograder import load, report

TEMPORARY = ".notebooks"  # under the results folder: no reader globs into it


def expand(assignment: str, entries: list) -> tuple[list, dict[str, list]]:
    """The entries with each several-notebook folder's entry given the digest of all its notebooks, and
    student id -> one entry per notebook of that folder (temporary ids), in file-name order."""
    groups = {}
    for entry in entries:
        if not entry.others:
            continue
        notebooks = sorted([entry.path, *entry.others], key=lambda path: path.name)
        parts = [load.read(assignment, load.Entry(f"{TEMPORARY}/{entry.student_id}~{index}", path))
                 for index, path in enumerate(notebooks)]
        entry.digest = hashlib.sha256("\n".join(f"{p.path.name}:{p.digest}" for p in parts).encode()).hexdigest()
        groups[entry.student_id] = parts
    return entries, groups


def measured(data: dict) -> float:
    """A result's score with the points its held tasks measured: a notebook held for review competes with what its
    tests measured, so a draft never outranks it while it waits for the instructor (who then sees it held)."""
    parts = data.get("extra_data", {}).get("parts")
    held = [part.get("held") for part in parts.values() if type(part) is dict] if type(parts) is dict else []
    return float(data["score"]) + sum(float(h) for h in held if type(h) in (int, float))


def ranked(assignment: str, graded: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """(file name, result) best first: the highest measured score (held tasks' points included), then named after
    the assignment, then the later name."""
    return sorted(graded, key=lambda item: (measured(item[1]), item[0] == f"{assignment}.ipynb", item[0]),
                  reverse=True)


def combine(assignment: str, results: Path, student_id: str, parts: list, digest: str) -> dict | None:
    """Write the student's result, the counted notebook's, with every notebook listed; returns it (None when no
    notebook's result could be read). The temporary results are removed."""
    graded = []
    for part in parts:
        try:
            data = json.loads((results / f"{part.student_id}.json").read_text(encoding="utf-8"))
            float(data["score"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        graded.append((part.path.name, data))
    if not graded:
        return None
    order = ranked(assignment, graded)
    name, best = order[0]
    extra = best["extra_data"]
    extra["student_id"], extra["digest"] = student_id, digest
    extra["notebooks"] = [{"name": n, "score": float(d["score"]), "status": str(d["extra_data"].get("status", "")),
                           "counted": n == name} for n, d in sorted(graded)]
    others = ", ".join(f"{n} ({float(d['score']):g})" for n, d in order[1:])
    extra["problems"] = [f"{len(graded)} notebooks submitted; each was graded and the best one counts: {name} "
                         f"({float(best['score']):g} / {extra['max_score']:g}); the others: {others}"] + \
        [problem for problem in extra["problems"]]
    best["output"] = report.summary(student_id, best["score"], extra["max_score"], extra["status"], extra["parts"],
                                    extra["problems"])
    report.save(results, best)
    for part in parts:
        (results / f"{part.student_id}.json").unlink(missing_ok=True)
        (results / "feedback" / f"{part.student_id}.md").unlink(missing_ok=True)
    return best


def clean(results: Path) -> None:
    """Remove what a run stopped part-way left of the temporary results."""
    for folder in (results / TEMPORARY, results / "feedback" / TEMPORARY):
        shutil.rmtree(folder, ignore_errors=True)
