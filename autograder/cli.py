"""``python -m autograder``: grade a class, release held results, export grades, or package for Gradescope.

    python -m autograder grade ASSIGNMENT PATH... [--results DIR] [--jobs N] [--gradebook URL]
    python -m autograder release ASSIGNMENT STUDENT_ID... [--results DIR] [--gradebook URL]
    python -m autograder export [ASSIGNMENT...] --format canvas|moodle -o FILE.csv [--results DIR] [--gradebook URL]
    python -m autograder gradescope ASSIGNMENT -o FILE.zip
    python -m autograder similarity ASSIGNMENT PATH... [-o FILE.html]
    python -m autograder handback ASSIGNMENT [--results DIR] [--gradebook URL]

Exit status 0 when every submission got a result, whatever the scores; 2 when the
grader itself cannot run (bad arguments, unknown assignment, no notebook found, no sandbox,
a results folder the export cannot trust). This module only reads the command line and
prints; ``run`` does the grading, ``lms`` the export.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from tqdm import tqdm

from autograder import launch, lms, load, report
from autograder.launch import Limits

# run, scoring and gradescope import PyTorch (seconds): the commands import them once they have started
# what they can (``grade`` its zygotes, which then warm up meanwhile).


class Usage(Exception):
    """A problem with the command line: printed without a traceback, exit status 2."""


def parse(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    grade = commands.add_parser("grade", help="grade submissions with the hidden suite")
    grade.add_argument("assignment")
    grade.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                       help="a .ipynb file, a folder of them, or an nbgrader course folder (submitted/...)")
    grade.add_argument("--results", type=Path, help="where results go (default: results/ASSIGNMENT/)")
    grade.add_argument("--jobs", type=int, default=2, help="submissions graded in parallel (default 2)")
    grade.add_argument("--gradebook", help="record scores in nbgrader's gradebook, e.g. sqlite:///gradebook.db")
    grade.add_argument("--force", action="store_true", help="regrade submissions that already have a current result")
    grade.add_argument("--isolation", choices=["auto", "namespaces", "process"], default="auto",
                       help="namespaces needs bubblewrap; auto uses it when it works (default)")
    grade.add_argument("--timeout", type=float, default=120.0,
                       help="time limit per submission: seconds of CPU time its code may use, all tests together "
                            f"(default 120; at most {Limits.request_seconds:g} in one call). A call is also stopped "
                            "once it has gone as long without answering or computing, or after "
                            f"{Limits.wall_factor:g} times its CPU time in wall-clock time")
    grade.add_argument("--memory-mb", type=int, default=2048, help="memory limit per submission, MiB")
    grade.add_argument("--quiet", action="store_true", help="no progress bar")
    release = commands.add_parser("release", help="give held-for-review submissions the points they measured")
    release.add_argument("assignment")
    release.add_argument("students", nargs="+", metavar="STUDENT_ID")
    release.add_argument("--results", type=Path, help="where results are (default: results/ASSIGNMENT/)")
    release.add_argument("--gradebook", metavar="URL",
                         help="record the released scores in nbgrader's gradebook (default: the one `grade "
                              "--gradebook` last recorded these results into)")
    export = commands.add_parser("export", help="write the grades as a CSV that Canvas or Moodle imports")
    export.add_argument("assignments", nargs="*", metavar="ASSIGNMENT",
                        help="the assignments, one column each (default: every one with results)")
    export.add_argument("--format", required=True, choices=lms.FORMATS, help="the gradebook that imports the CSV")
    export.add_argument("-o", "--output", type=Path, required=True, metavar="FILE.csv")
    export.add_argument("--results", type=Path, default=Path("results"), metavar="DIR",
                        help="the folder holding one results folder per assignment (default: results/)")
    export.add_argument("--gradebook", metavar="URL",
                        help="export nbgrader's totals from this gradebook (automatic plus manual points), e.g. "
                             "sqlite:///gradebook.db")
    handback = commands.add_parser("handback", help="write each student's hand-back: total, reasons, manual points")
    handback.add_argument("assignment")
    handback.add_argument("--results", type=Path, help="where results are (default: results/ASSIGNMENT/)")
    handback.add_argument("--gradebook", metavar="URL",
                          help="take the manual points, comments and totals from nbgrader's gradebook (default: the "
                               "one `grade --gradebook` last recorded these results into)")
    package = commands.add_parser("gradescope", help="build a Gradescope autograder zip")
    package.add_argument("assignment")
    package.add_argument("-o", "--output", type=Path, required=True, metavar="FILE.zip")
    similar = commands.add_parser("similarity", help="rank pairs of students whose answers look alike, in one HTML "
                                  "page (nothing is run)")
    similar.add_argument("assignment")
    similar.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                         help="a .ipynb file, a folder of them, or an nbgrader course folder (submitted/...)")
    similar.add_argument("-o", "--output", type=Path, metavar="FILE.html",
                         help="where the report goes (default: results/ASSIGNMENT/similarity.html)")
    inside = commands.add_parser("gradescope-run", help="what run_autograder calls inside Gradescope's container")
    inside.add_argument("assignment")
    inside.add_argument("--root", type=Path, default=Path("/autograder"))
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    try:
        if args.command == "grade":
            return grade(args)
        if args.command == "export":
            return export(args)
        if args.command == "similarity":
            from autograder import similarity

            return similarity.command(args.assignment, args.paths, args.output)
        if args.command == "handback":
            known(args.assignment)
            return handback(args)
        from autograder import gradescope

        known(args.assignment)
        if args.command == "release":
            return release(args)
        if args.command == "gradescope":
            path = gradescope.build(args.assignment, args.output)
            print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB): upload it as the autograder of "
                  f"{args.assignment} on Gradescope")
            return 0
        if args.command == "gradescope-run":
            return gradescope.run_in_container(args.assignment, args.root)
    except Usage as problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2


def known(assignment: str) -> None:
    from autograder import scoring

    if assignment not in scoring.assignments():
        raise Usage(f"unknown assignment {assignment!r}; known: {', '.join(scoring.assignments())}")


def grade(args) -> int:
    missing = [str(p) for p in args.paths if not p.exists() and not p.is_symlink()]
    if missing:
        raise Usage(f"no such file or folder: {', '.join(missing)}")
    if args.jobs < 1:
        raise Usage("--jobs must be at least 1")
    start = time.monotonic()
    early = start_zygotes(args.jobs, args.isolation)  # they warm up while this process imports and reads
    try:
        return grade_with(args, early, start)
    finally:
        for zygote in early:
            zygote.abandon()


def start_zygotes(jobs: int, isolation: str) -> list:
    """A zygote per grading process, started now; none when they cannot be (the grading processes then start
    their own, and say why if that fails too)."""
    started = []
    try:
        for _ in range(jobs):
            started.append(launch.launch(isolation))
    except OSError:
        pass
    return started


def grade_with(args, early: list, start: float) -> int:
    from autograder import run

    known(args.assignment)
    settings = course_settings()
    gradebook = None
    if args.gradebook:
        from autograder import gradebook as gradebook_module

        gradebook = gradebook_module.open_checked(args.gradebook, args.assignment, Usage)
    results = args.results or Path("results") / args.assignment
    results.mkdir(parents=True, exist_ok=True)
    limits = Limits(submission_seconds=args.timeout, memory_bytes=args.memory_mb * 2**20)

    passed_over: list[str] = []
    found = load.find(args.assignment, args.paths, passed_over)
    if not found:
        raise Usage(load.describe_empty(args.paths))
    for what in passed_over:
        print(f"warning: passed over {what}", file=sys.stderr)
    entries = [load.read(args.assignment, entry) for entry in found]
    from autograder import several

    entries, groups = several.expand(args.assignment, entries)  # a folder of several notebooks: each is graded
    todo = [e for e in entries if args.force or not report.is_current(results, e.student_id, e.digest, args.assignment)]
    skipped = len(entries) - len(todo)
    combined = {e.student_id: e.digest for e in todo if e.student_id in groups}
    todo = [part for e in todo for part in groups.get(e.student_id, [e])]
    progress = Progress(len(todo), quiet=args.quiet)
    try:
        isolation = run.grade_all(args.assignment, todo, results, limits, args.jobs, args.isolation, progress.advance,
                                  launched=early)
    except RuntimeError as error:
        raise Usage(str(error)) from None
    progress.close()
    for student_id, digest in combined.items():
        several.combine(args.assignment, results, student_id, groups[student_id], digest)
    several.clean(results)
    from autograder import lateness

    lateness.apply(args.assignment, entries, results, settings)  # graded now or kept: the course may have changed
    rows = report.grades_csv(results)
    if gradebook is not None:
        from autograder import gradebook as gradebook_module

        stale: list[str] = []
        recorded = gradebook_module.record(gradebook, args.assignment, results, [e.student_id for e in entries],
                                           stale)
        report.remember_gradebook(results, args.gradebook)
        print(f"recorded {recorded} submissions in the gradebook {args.gradebook}")
        feedback_again(args.assignment, stale)
    summarize(args.assignment, entries, skipped, rows, results, time.monotonic() - start, args.jobs, isolation)
    handbacks(args.assignment, results, args.gradebook or report.remembered_gradebook(results),
              [e.student_id for e in entries])
    return 0


def course_settings():
    """The course's due dates and lateness policy (``course.toml`` in the folder the command runs in)."""
    from autograder import course

    try:
        return course.load(Path.cwd())
    except course.CourseError as problem:
        raise Usage(str(problem)) from None


def release(args) -> int:
    """Give each named submission's held parts the scores their tests measured, in every view of the grades.

    The result, its feedback and grades.csv are rewritten; so is the gradebook (``--gradebook``, or
    the one ``grade --gradebook`` recorded these results into) and the formgrader's copy, and a
    feedback page of nbgrader's that showed the held scores is removed for ``generate_feedback``
    to write again.
    """
    results = args.results or Path("results") / args.assignment
    url = args.gradebook or report.remembered_gradebook(results)
    gradebook = None
    if url:
        from autograder import gradebook as gradebook_module

        gradebook = gradebook_module.open_checked(url, args.assignment, Usage)
    released = []
    try:
        for student_id in args.students:
            try:
                data = report.release(results, student_id)
            except report.NotHeld as problem:
                raise Usage(str(problem)) from None
            released.append(student_id)
            from autograder import lateness

            lateness.refresh(args.assignment, results, student_id)  # a late penalty is capped at the score
            print(f"{student_id}: released, {data['score']:g} / {data['extra_data']['max_score']:g}")
    finally:  # what was released so far reaches every view, even if a later student id was wrong
        report.grades_csv(results)
        if gradebook is not None:
            stale: list[str] = []
            if released:
                gradebook_module.record(gradebook, args.assignment, results, released, stale)
                print(f"recorded in the gradebook {url}")
            gradebook.close()
            feedback_again(args.assignment, stale)
        if released:
            handbacks(args.assignment, results, url, released)
    return 0


def feedback_again(assignment: str, stale: list[str]) -> None:
    """Say whose feedback of nbgrader's was removed because their scores changed, and how to write it again."""
    if stale:
        print(f"removed nbgrader's feedback of {', '.join(stale)} (it showed other scores): "
              f"`nbgrader generate_feedback {assignment}` writes it again")


def export(args) -> int:
    """Write the grades of the named assignments (or of every one with results) as a gradebook CSV."""
    from autograder import scoring

    for assignment in args.assignments:
        known(assignment)
    if not args.results.is_dir() and not args.gradebook:
        raise Usage(f"no results folder {args.results}/: grade first (python -m autograder grade ASSIGNMENT PATH...), "
                    "or pass --results, the folder that holds one folder per assignment")
    try:
        totals = lms.read_gradebook(args.gradebook) if args.gradebook else {}
        assignments = args.assignments or [a for a in scoring.assignments() if (args.results / a).is_dir()
                                           or (a in totals and totals[a].students)]
        if not assignments:
            raise Usage(f"no results in {args.results}/: it has no folder named after an assignment "
                        f"({', '.join(scoring.assignments())}); pass --results, the folder that holds them"
                        + (f", or grade with --gradebook {args.gradebook}" if args.gradebook else ""))
        columns, todo = lms.export(args.results, assignments, args.format, args.output, args.gradebook, totals)
    except lms.BadResults as problem:
        raise Usage(str(problem)) from None
    students = {student for column in columns for student in column.scores}
    missing = sum(len(students) - len(column.scores) for column in columns)
    print(f"wrote {args.output}: {len(students)} student{'s' * (len(students) != 1)} x {len(columns)} assignment"
          f"{'s' * (len(columns) != 1)} for {args.format.capitalize()}'s grade import"
          + (f"; {missing} missing submission{'s' * (missing != 1)} left without a score" if missing else ""))
    for line in todo:
        print(line, file=sys.stderr)
    for column in columns:  # the hand-backs say what the CSV says
        if (args.results / column.assignment).is_dir():
            handbacks(column.assignment, args.results / column.assignment, args.gradebook, column.scores,
                      totals if args.gradebook else None)
    return 0


def handback(args) -> int:
    """Write the hand-backs of every student with a result; exit status 2 if a result could not be read."""
    results = args.results or Path("results") / args.assignment
    if not results.is_dir():
        raise Usage(f"no results folder {results}/: grade first (python -m autograder grade {args.assignment} "
                    "PATH...), or pass --results, the folder of the assignment's results")
    done = handbacks(args.assignment, results, args.gradebook or report.remembered_gradebook(results), None,
                     problem=Usage)
    return 2 if done.problems else 0


def handbacks(assignment: str, results: Path, url: str | None, students, totals: dict | None = None,
              problem=None):
    """Refresh the hand-backs of ``students`` (None: all) and say how many were written. A hand-back that cannot
    be written is a warning (``problem``: the exception to raise instead), never the end of a grading run."""
    from autograder import handback as handback_module

    try:
        done = handback_module.refresh(assignment, results, url, students, totals)
    except handback_module.Problem as error:
        if problem is not None:
            raise problem(f"no hand-backs written: {error}") from None
        print(f"warning: no hand-backs written: {error}", file=sys.stderr)
        return None
    print(done.summary() + ("" if url or not lms.manual_cells(assignment) else
                            " (without a gradebook: the points graded by hand are not in them)"))
    for line in done.problems:
        print(f"error: {line}", file=sys.stderr)
    feedback_again(assignment, done.stale_feedback)
    return done


class Progress:
    """Grading progress on stderr, drawn by tqdm: its live bar on a terminal, a plain line per 10 % on a log.

    tqdm redraws its bar with carriage returns, which a log file or CI's output keeps as one
    ever longer line; when stderr is not a terminal, the same meter is printed as a line of
    its own each time another tenth of the submissions is done, the last one at N/N.
    """

    def __init__(self, total: int, quiet: bool):
        self.total, self.done, self.printed = total, 0, -1
        self.start = time.monotonic()
        live = not quiet and total > 0 and sys.stderr.isatty()
        self.log = not quiet and total > 0 and not live
        self.bar = tqdm(total=total, unit="submission", file=sys.stderr, disable=not live, dynamic_ncols=True)

    def advance(self) -> None:
        self.done += 1
        self.bar.update()
        if self.log and self.done * 10 // self.total > self.printed:
            self.printed = self.done * 10 // self.total
            print(tqdm.format_meter(self.done, self.total, time.monotonic() - self.start, ncols=80, ascii=True,
                                    unit="submission"), file=sys.stderr, flush=True)

    def close(self) -> None:
        self.bar.close()


# What each status means to the instructor reading the summary (STATUS_TEXT is written for the learner).
SUMMARY_TEXT = {"ok": "graded", "review": "some points held for your review: read the notes, then `release`",
                "no result": "no result file was written (please report it)"}


def printable(name: str) -> str:
    """A student id (a folder's or a file's name) as a terminal shows it: control characters as ``?``."""
    return "".join(c if c.isprintable() else "?" for c in name)


def summarize(assignment, entries, skipped, rows, results, seconds, jobs, isolation) -> None:
    ids = {e.student_id for e in entries}
    rows = [r for r in rows if r["student_id"] in ids]
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    if len(entries) > len(rows):
        statuses["no result"] = len(entries) - len(rows)
    scores = [float(r["score"]) for r in rows if not r.get("held")]
    graded = len(entries) - skipped
    print(f"{assignment}: graded {graded} submission{'s' * (graded != 1)} in {seconds:.1f} s "
          f"({graded / seconds if seconds else 0:.1f}/s, {jobs} job{'s' * (jobs != 1)}, isolation: {isolation})"
          + (f"; {skipped} unchanged since the last run" if skipped else ""))
    held = statuses.get("review", 0)
    if scores:
        top = rows[0]["max_score"]
        print(f"  scores: mean {statistics.mean(scores):.2f} / {top}, median {statistics.median(scores):g}"
              + (f" (of the {len(scores)} with nothing held)" if held else ""))
    order = sorted(statuses, key=lambda s: (s != "ok", report.SEVERITY.index(s) if s in report.SEVERITY else -1))
    print(f"  {len(entries)} submission{'s' * (len(entries) != 1)} by status:")
    width = max(len(status) for status in order)
    for status in order:
        meaning = SUMMARY_TEXT.get(status) or report.STATUS_TEXT.get(status, "")
        print(f"    {statuses[status]:>4} {status:<{width}}  {meaning}")
    if held:
        names = [printable(r["student_id"]) for r in rows if r["status"] == "review"]
        shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more (grades.csv: status review)"
                                         if len(names) > 10 else "")
        print(f"  held for review: {shown} (read the notes in {results}/feedback/STUDENT_ID.md, then `python -m "
              f"autograder release {assignment} STUDENT_ID` for those whose work is honest)")
    several_notebooks = sum(bool(r.get("notebooks")) for r in rows)
    if several_notebooks:
        print(f"  {several_notebooks} student{'s' * (several_notebooks != 1)} submitted several notebooks; the best "
              "of each counted (read the first note of their feedback)")
    late = sum(r.get("late") == "yes" for r in rows)
    if late:
        print(f"  late: {late} submission{'s' * (late != 1)} ({sum(float(r.get('penalty') or 0) > 0 for r in rows)} "
              "with a penalty; grades.csv's grade column is the score less it; course.toml sets the policy)")
    peaks = [r.get("peak_mb") for r in rows if r.get("peak_mb")]
    if peaks:
        print(f"  peak memory of a grading process: {max(peaks):.0f} MB")
    print(f"  results: {results}/ (one JSON per student, grades.csv, feedback/)")
