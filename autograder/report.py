"""Stage 4: write what the grading found, so that nothing computed is ever lost.

Per student: ``DIR/<student_id>.json`` in Gradescope's results.json schema (``score``,
``execution_time``, ``output``, ``tests``; our own fields under ``extra_data``) and
``DIR/feedback/<student_id>.md``, which lists every test with its outcome (one line for a task
whose tests all failed for one reason) and at most one hint per task (``hinted_outcome``),
never a hidden input or the test's source. Per run: ``DIR/grades.csv``. Every file is
written to a temporary name and renamed into place, so a killed run leaves either the
old file or the new one; a re-run skips submissions whose result is already current.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import tempfile
import re
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent

# What a submission-level status means, for the summary and the feedback.
STATUS_TEXT = {
    "ok": "graded",
    "cell_errors": "graded; some cells raised errors",
    "invalid": "not gradable: the file could not be read as a notebook",
    "tampering": "0 points: the code reaches for the grader's or PyTorch's internals",  # results before evidence.py
    "review": "held for review: the points of a held task wait for your instructor (see the notes)",
    "forbidden": "graded; a task used a PyTorch built-in or autograd that it forbids, and got 0 (see the task)",
    "protocol_violation": "graded; the worker's channel carried something that was not its answer",
    "sandbox_violation": "graded; the code tried something the sandbox stops or limits (see the notes)",
    "timeout": "graded; the time limit was hit",
    "cpu_limit": "graded; the CPU-time limit was hit",
    "memory_limit": "graded; the memory limit was hit",
    "killed": "graded; the worker was killed by a resource limit",
    "exited": "graded; the code ended its own process",
    "crashed": "graded; the worker crashed",
    "output_limit": "graded; the code printed more than the output limit",
    "grader_error": "not graded: the grader failed on this submission (please report it)",
}
# After the one hint of a part where more tests failed: the learner should not look for one bug per failed test.
SEVERAL_CHECKS = " (this one mistake may fail several checks of this task: fix it, then run the self-check again)"
# How a held part's tests show it, on Gradescope and in the feedback (``release`` takes both away again).
HELD_LINE = "Held for your instructor's review"
HELD_SUFFIX = " (held for your instructor's review)"
# Where ``grade --gradebook`` leaves the gradebook's URL, so that ``release`` records there too.
GRADEBOOK_FILE = "gradebook.url"
SEVERITY = ["grader_error", "invalid", "tampering", "review", "forbidden", "protocol_violation", "sandbox_violation",
            "crashed", "killed", "memory_limit", "cpu_limit", "timeout",
            "exited", "output_limit", "cell_errors", "ok"]


# What no file the grader writes may hold as it is: lone surrogates (JSON's "\ud800", a file name's undecodable
# bytes as Python keeps them), control characters but tab and newline, and the marks that reorder or hide text.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff"
                    "\ud800-\udfff]")
UNSAFE_IN_A_NAME = re.compile(UNSAFE.pattern[:-1] + "\t\n/]")


def _escaped(found: re.Match) -> str:
    code = ord(found.group())
    if 0xDC80 <= code <= 0xDCFF:  # a byte a file name could not decode (Python's surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(text: str, name: bool = False) -> str:
    """``text`` with every character no result may hold written as an escape (``\\ud800``, ``\\x1b``): it
    encodes as UTF-8 and shows what was there. ``name``: a student's name, which becomes a file name, so tab,
    newline and the path separator are escaped too."""
    return (UNSAFE_IN_A_NAME if name else UNSAFE).sub(_escaped, text)


@cache
def grader_version(assignment: str) -> str:
    """A digest of the grader and the assignment's suite: results made by another version are redone."""
    digest = hashlib.sha256()
    files = sorted(PACKAGE.glob("*.py")) + sorted((PACKAGE / "sandboxed").glob("*.py"))  # the suite comes next
    files += sorted((PACKAGE / "suites" / assignment).glob("*.py"))
    for path in files:
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def write_atomic(path: Path, text: str, durable: bool = True) -> None:
    """Replace ``path`` by a file holding ``text``, whole or not at all.

    ``durable=False`` skips the flush to disk (a few milliseconds each): for a submission's result and
    feedback, which ``is_current`` finds unreadable after a power cut, so that the submission is graded
    again; nothing but the grading time is lost.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            if durable:
                os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def is_current(results: Path, student_id: str, digest: str, assignment: str) -> bool:
    """True when a result for exactly this file and this grader version exists."""
    try:
        extra = json.loads((results / f"{student_id}.json").read_text())["extra_data"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return extra.get("digest") == digest and extra.get("grader_version") == grader_version(assignment)


def overall_status(events: list, cell_errors: list) -> str:
    """The most severe of what happened to a graded submission (``events``, cell errors), or ``ok``."""
    found = {"ok"}
    found.update(event for event in events if event in SEVERITY)
    if cell_errors:
        found.add("cell_errors")
    return min(found, key=SEVERITY.index)


def hinted_outcome(outcomes):
    """The one outcome of a part whose fixed hint the learner reads, or None.

    A hint is a test's checklist of the usual causes, written before any answer was seen: where a message
    already names the mistake (a diagnosis), or where several tests fail because of one mistake, the other
    tests' checklists name causes the answer does not have. So a part shows at most one hint, that of its
    first test that failed on what the code computed or raised, and none once any message names the mistake.
    """
    if any(outcome.diagnosed for outcome in outcomes):
        return None
    return next((o for o in outcomes if o.status in ("failed", "error") and o.hint), None)


def result(assignment: str, student_id: str, digest: str, status: str, parts, problems: list[str],
           seconds: float, isolation: str) -> dict:
    """The Gradescope results.json for one student.

    A part held for review (``part.held`` set: the score its tests measured) scores 0 until
    ``release``; each of its tests says so in its name and its output, keeps the status its
    run measured, and keeps what it measured under its own ``extra_data.held``.
    """
    tests = []
    for part in parts:
        held = getattr(part, "held", None) is not None
        hinted = hinted_outcome(part.outcomes)
        failed = sum(not outcome.passed for outcome in part.outcomes)
        for outcome in part.outcomes:
            lines = ["passed" if outcome.passed else f"{outcome.status}: {outcome.message}"]
            if outcome is hinted:
                lines.append(f"What to check: {outcome.hint}" + (SEVERAL_CHECKS if failed > 1 else ""))
            test = {
                "name": f"{part.title} > {outcome.name.replace('_', ' ')}",
                "score": round(outcome.points, 4), "max_score": outcome.max_points,
                "status": "passed" if outcome.passed else "failed",
                "output": "\n".join(lines), "visibility": "visible",
            }
            if held:
                measured = outcome.max_points if outcome.passed else 0.0
                test["name"] += HELD_SUFFIX
                test["score"] = 0
                test["output"] = f"{HELD_LINE}: {measured:g} / {outcome.max_points:g} measured, counted once your " \
                                 f"instructor has reviewed this task (see the notes)\n" + test["output"]
                test["extra_data"] = {"held": measured}
            tests.append(test)
    score = round(sum(part.score for part in parts), 4)
    max_score = sum(part.max_score for part in parts)
    table = {part.name: {"title": part.title, "score": part.score, "max_score": part.max_score, "note": part.note,
                         **({"held": part.held} if getattr(part, "held", None) is not None else {})}
             for part in parts}
    return {
        "score": score,
        "execution_time": round(seconds, 3),
        "output": summary(student_id, score, max_score, status, table, problems),
        "tests": tests,
        "extra_data": {
            "student_id": student_id, "assignment": assignment, "status": status, "max_score": max_score,
            "problems": problems, "isolation": isolation, "digest": digest,
            "grader_version": grader_version(assignment), "parts": table,
        },
    }


def summary(student_id: str, score: float, max_score: float, status: str, parts: dict, problems: list[str]) -> str:
    """The text above the tests: the total, each task's score (and why it is held or 0), the notes."""
    lines = [f"{student_id}: {score:g} / {max_score:g} ({STATUS_TEXT.get(status, status)})"]
    lines += [f"- {part['title']}: {part['score']:g} / {part['max_score']:g}" + (f" ({part['note']})" if part["note"]
                                                                                  else "")
              for part in parts.values()]
    lines += [f"- note: {problem}" for problem in problems]
    return "\n".join(lines)


def feedback(data: dict) -> str:
    """Markdown feedback for one student: every test, its outcome, and what is wrong or what to check."""
    extra = data["extra_data"]
    lines = [f"# Feedback: {extra['assignment']}", "",
             f"**Score: {data['score']:g} / {extra['max_score']:g}** ({STATUS_TEXT.get(extra['status'], extra['status'])})",
             ""]
    by_hand = graded_by_hand(extra["assignment"])
    if by_hand:  # the score above is not the whole grade: never say "7 / 7" of a 10-point assignment
        lines[2] = f"**Automatic points: {data['score']:g} / {extra['max_score']:g}** " \
                   f"({STATUS_TEXT.get(extra['status'], extra['status'])}); {by_hand} graded by your instructor: " \
                   "see your hand-back"
    held = [part for part in extra["parts"].values() if "held" in part]
    if held:
        lines += [f"**{HELD_LINE}:** " + "; ".join(f"{part['title']} ({part['held']:g} / {part['max_score']:g} "
                                                   "measured)" for part in held)
                  + ". These points are not in the score above until your instructor has reviewed them.", ""]
    lines += late_lines(data)
    if extra["problems"]:
        lines += ["## Notes on your submission", ""] + [f"- {p}" for p in extra["problems"]] + [""]
    by_part = {}
    for test in data["tests"]:
        by_part.setdefault(test["name"].removesuffix(HELD_SUFFIX).split(" > ", 1)[0], []).append(test)
    for part, tests in by_part.items():
        info = next((p for p in extra["parts"].values() if p.get("title") == part), {})
        lines += [f"## {part}", ""]
        if info.get("note"):
            lines += [f"**{info['note']}**", ""]
        outputs = {test["output"] for test in tests}
        if len(tests) > 1 and len(outputs) == 1 and all(test["status"] != "passed" for test in tests) \
                and "held" not in info:
            # One cause for every test (not implemented yet, a forbidden call, ...): one line says it.
            score, top = sum(t["score"] for t in tests), sum(t["max_score"] for t in tests)
            lines.append(f"- ❌ all {len(tests)} tests ({score:g} / {top:g}): {outputs.pop()}")
            continue
        for test in tests:
            name = test["name"].removesuffix(HELD_SUFFIX).split(" > ", 1)[1]
            output = test["output"].splitlines()
            if "held" in test.get("extra_data", {}):
                measured = "passed" if test["status"] == "passed" else "failed"
                lines.append(f"- ⏸ held for review, measured {measured} ({test['extra_data']['held']:g} / "
                             f"{test['max_score']:g}): {name}")
                output = output[1:]  # the held line, said above
            else:
                mark = "✅ passed" if test["status"] == "passed" else "❌ failed"
                lines.append(f"- {mark} ({test['score']:g} / {test['max_score']:g}): {name}")
            if test["status"] != "passed":
                lines += [f"  - {line}" for line in output]
    return "\n".join(lines) + "\n"


@cache
def manual_cells(assignment: str) -> dict[str, float]:
    """grade_id -> points of the release's cells graded by hand (an answer cell that is also graded)."""
    try:
        notebook = json.loads((PACKAGE.parent / "exercises" / assignment / f"{assignment}.ipynb")
                              .read_text(encoding="utf-8"))
        cells = [cell.get("metadata", {}).get("nbgrader", {}) for cell in notebook["cells"]]
        return {meta["grade_id"]: float(meta.get("points", 0)) for meta in cells
                if meta.get("grade") and meta.get("solution") and "grade_id" in meta}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def graded_by_hand(assignment: str) -> str:
    """What of ``assignment`` a person grades, with its points ("the written answer (3 points) is"), or ""."""
    cells = manual_cells(assignment)
    if not cells:
        return ""
    what = "the written answer" if len(cells) == 1 else f"the answers {', '.join(cells)}"
    return f"{what} ({sum(cells.values()):g} points) {'is' if len(cells) == 1 else 'are'}"


def safe(value):
    """``value`` (a result: dicts, lists and plain values) with every string made safe to write (``safe_text``):
    whatever a worker said, a notebook held or a file was named, the result encodes and shows it escaped."""
    if type(value) is str:
        return safe_text(value)
    if type(value) is dict:
        return {safe_text(str(key)): safe(item) for key, item in value.items()}
    if type(value) in (list, tuple):
        return [safe(item) for item in value]
    return value


def save(results: Path, data: dict, durable: bool = False) -> None:
    """Write a submission's result and feedback, every string made safe first (``safe``), in place, so that
    what is written is what the caller holds. Grading saves them without flushing to disk (a result lost in a
    power cut is graded again); an instructor's release, which nothing would redo, flushes."""
    cleaned = safe(data)
    data.clear()
    data.update(cleaned)
    student_id = data["extra_data"]["student_id"]  # a name from ``load`` is escaped there, "/" included
    write_atomic(results / "feedback" / f"{student_id}.md", feedback(data), durable)
    write_atomic(results / f"{student_id}.json", json.dumps(data, indent=1), durable)


def grades_csv(results: Path) -> list[dict]:
    """Rebuild DIR/grades.csv from every result in DIR; returns its rows.

    A submission with a part held for review has no score in the file (its status, ``review``,
    says why): what it has is not its grade yet. The rows returned keep the points counted so far.
    """
    rows = []
    for path in sorted(results.glob("*.json")):
        try:
            data = json.loads(path.read_text())
            extra = data["extra_data"]
            rows.append({"student_id": extra["student_id"], "score": data["score"],
                         "max_score": extra["max_score"], "status": extra["status"],
                         "held": extra["status"] == "review" or any("held" in p for p in extra["parts"].values()),
                         "peak_mb": extra.get("grader_peak_rss_mb"), **late_columns(data),
                         "notebooks": type(extra.get("notebooks")) is list and len(extra["notebooks"]) > 1})
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    out = io.StringIO()
    writer = csv.DictWriter(out, ["student_id", "score", "max_score", "status", *LATE_COLUMNS], lineterminator="\n",
                            extrasaction="ignore")
    writer.writeheader()
    writer.writerows({**row, "score": "" if row["held"] else row["score"], "grade": "" if row["held"] else row["grade"]}
                     for row in rows)
    write_atomic(results / "grades.csv", out.getvalue())
    return rows


# grades.csv's columns after the score: late (yes/no), how many hours after the due date, the penalty in points,
# and the grade after it (the score less the penalty).
LATE_COLUMNS = ["late", "hours_late", "penalty", "grade"]


def late_of(data: dict) -> dict:
    """A result's ``extra_data.late``, checked (a result file may be old or damaged): {} when it has none."""
    extra = data.get("extra_data") if type(data) is dict else None
    late = extra.get("late") if type(extra) is dict else None
    if type(late) is not dict:
        return {}

    def number(key):
        value = late.get(key)
        return float(value) if type(value) in (int, float) and math.isfinite(value) and value >= 0 else 0.0

    def text(key):
        value = late.get(key)
        return value[:200] if type(value) is str else None

    return {"submitted_at": text("submitted_at"), "source": text("source") or "none", "due": text("due"),
            "seconds_late": number("seconds_late"), "penalty": number("penalty"), "policy": text("policy") or "",
            "flagged": late.get("flagged") is True, "note": text("note")}


def late_penalty(data: dict) -> float:
    """The points a result loses for lateness (0 without a ``late`` record), never more than its score."""
    score = data.get("score") if type(data) is dict else None
    score = float(score) if type(score) in (int, float) and math.isfinite(score) else 0.0
    return min(late_of(data).get("penalty", 0.0), max(score, 0.0))


def late_columns(data: dict) -> dict:
    late = late_of(data)
    timed = bool(late) and late["submitted_at"] is not None and late["due"] is not None
    penalty = late_penalty(data)
    return {"late": "yes" if late.get("flagged") else "no",
            "hours_late": f"{late['seconds_late'] / 3600:.2f}" if timed else "",
            "penalty": f"{penalty:g}", "grade": round(float(data["score"]) - penalty, 4)}


def late_lines(data: dict) -> list[str]:
    """The feedback's paragraph on lateness: when it came in, how late, the policy and the points taken off."""
    late = late_of(data)
    if not late:
        return []
    hours = late["seconds_late"] / 3600
    if late["submitted_at"] and late["due"]:
        when = (f"Submitted {late['submitted_at']}, {hours:.2f} hours after the due date {late['due']}"
                if late["seconds_late"] else f"Submitted {late['submitted_at']}, on time (due {late['due']})")
    else:
        when = "Marked late by Canvas" if late["flagged"] else "No submission time is known"
    lines = [f"**{'Late' if late['flagged'] else 'Lateness'}:** {when}."]
    if late["note"]:
        lines.append(f"{late['note']}.")
    if late["policy"]:
        lines.append(f"Policy: {late['policy']}.")
    penalty = late_penalty(data)
    top = data["extra_data"].get("max_score")
    lines.append(f"Penalty: {penalty:g} points; your grade after it: {float(data['score']) - penalty:g}"
                 + (f" / {top:g}" if type(top) in (int, float) else "") + "." if penalty else "Penalty: none.")
    return [" ".join(lines), ""]


def remember_gradebook(results: Path, url: str) -> None:
    """Keep the gradebook that ``results`` were recorded into (a SQLite path made absolute) for ``release``."""
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        url = "sqlite:///" + str(Path(url[len("sqlite:///"):]).resolve())
    write_atomic(results / GRADEBOOK_FILE, url + "\n")


def remembered_gradebook(results: Path) -> str | None:
    try:
        return (results / GRADEBOOK_FILE).read_text().strip() or None
    except OSError:
        return None


class NotHeld(Exception):
    """``release`` was asked for a submission that is not held for review."""


def release(results: Path, student_id: str) -> dict:
    """Give each part held for review the score its tests measured, after the instructor's review.

    The JSON, the feedback and the Gradescope text all become what they would have been with
    nothing held; the other parts are left as they are.
    """
    path = results / f"{student_id}.json"
    try:
        data = json.loads(path.read_text())
        extra = data["extra_data"]
        parts = extra["parts"]
    except (OSError, ValueError, KeyError, TypeError):
        raise NotHeld(f"no result for {student_id} in {results}/") from None
    held = {name: part for name, part in parts.items() if "held" in part}
    if not held and extra.get("status") != "review":
        raise NotHeld(f"{student_id} is not held for review (status {extra.get('status')})")
    titles = {part["title"] for part in held.values()}
    for part in held.values():
        part["score"] = part.pop("held")
        part["note"] = "released after your instructor's review"
    for test in data["tests"]:
        marks = test.get("extra_data", {})
        if "held" in marks:
            test["score"] = marks.pop("held")
            test["name"] = test["name"].removesuffix(HELD_SUFFIX)
            test["output"] = "\n".join(line for line in test["output"].splitlines() if not line.startswith(HELD_LINE))
            if not marks:
                del test["extra_data"]
        elif test["status"] == "passed" and test["name"].split(" > ", 1)[0] in titles:  # written before tests
            test["score"] = test["max_score"]  # carried their own mark
    data["score"] = round(sum(part["score"] for part in parts.values()), 4)
    if extra.get("status") == "review":
        after = extra.pop("status_after_release", "ok")
        extra["status"] = after if after in STATUS_TEXT and after != "review" else "ok"
    extra["problems"] = extra["problems"] + ["released by the instructor after review"]
    data["output"] = summary(student_id, data["score"], extra["max_score"], extra["status"], parts, extra["problems"])
    save(results, data, durable=True)
    return data
