"""Stage 3: run the hidden suite against submissions in sandboxed workers, and decide each verdict.

``Session`` is the transport of one submission: a worker from the sandbox, its cells run
once, requests carried to it; if the worker dies (a crash, a timeout, a frame that breaks
the wire's rules), the task it happened in loses the tests it had left and the next task
starts in a fresh worker. ``grade_one`` turns the scores (``scoring``), the load-time
findings (``load``/``scan``) and what the worker recorded into one result; ``grade_all``
grades a class in parallel grading processes, each with a sandbox of its own.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import queue
import time
import traceback
from dataclasses import dataclass, field

from autograder import evidence, report, scan, scoring
from autograder.checks import Submission, WorkerLost
from autograder.sandbox import Sandbox, SandboxBroken
from autograder.sandboxed import wire


@dataclass
class Graded:
    """Everything the verdict needs about one graded submission."""

    parts: list
    events: list[str] = field(default_factory=list)  # limit hits and violations, as statuses
    cell_errors: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    output_chars: int = 0
    seconds: float = 0.0
    attempts: list[str] = field(default_factory=list)  # what the sandbox refused or stopped
    findings: list = field(default_factory=list)  # scan findings in code compiled at run time
    crashes: list[str] = field(default_factory=list)  # what ended a worker, per task


def exec_request(cells: list, upto: int | None = None, skip=(), record_code: bool = False) -> dict:
    """The request that runs a submission's cells (``load.Cell``s) in order in an executor.

    ``record_code``: have the worker note which notebook lines each graded call runs (a profile
    function, which slows the calls down): needed only when the scan found a construct that
    ``evidence`` ties to the tasks whose calls ran it.
    """
    return {"op": "exec", "cells": [{"label": cell.label, "source": cell.source} for cell in cells], "upto": upto,
            "skip": list(skip), "record_code": bool(record_code)}


MAX_FINDINGS = 100  # findings in code compiled at run time kept per submission
MAX_SCANNED_CHARS = 2 * 2**20  # characters of code compiled at run time scanned per submission
MAX_ATTEMPTS = 40  # refused attempts kept per submission
MAX_SKIPPED_CELLS = 3  # cells that end the worker, found and left out before grading gives up on the cells


class Session:
    """The transport of one submission: a worker, replaced (cells run again) after it dies.

    Time is the workers' CPU time: ``limits.request_seconds`` per request, ``limits.submission_seconds`` in
    all, each with a wall-clock backstop ``limits.wall_factor`` times as long on the time spent waiting for
    the worker (the grader's own work, slower on a busy machine, is not the submission's). A sandbox that
    breaks (its control channel fails) ends every task from then on; ``grading_process`` grades the
    submission again in a fresh one.
    """

    def __init__(self, sandbox, slot: int, cells: list, limits, record_code: bool = False):
        self.sandbox, self.slot, self.cells, self.limits = sandbox, slot, cells, limits
        self.record_code = record_code
        self.cpu_spent = 0.0  # CPU seconds of this submission's workers that have ended
        self.waited = 0.0  # wall seconds spent waiting for its workers' answers
        self.worker = None
        self.events: list[str] = []
        self.cell_errors: list[str] = []
        self.refusals: list[str] = []  # cells stopped by a forbidden built-in (a comparison cell, typically)
        self.skipped: list[str] = []  # labels of cells that end the worker
        self.attempts: list[str] = []
        self.findings: list = []
        self.crashes: list[str] = []
        self.output_total = 0
        self.finding_texts: set[str] = set()  # the findings' texts, for deduplication in linear time
        self.scanned: set[bytes] = set()  # digests of the sources compiled at run time already scanned
        self.scanned_chars = 0

    def start(self) -> None:
        """A fresh worker with the cells run in it, leaving out any cell that ends the worker."""
        try:
            while True:
                self.spawn()
                try:
                    answer = self.carry(exec_request(self.cells, skip=self.skipped, record_code=self.record_code))
                    break
                except WorkerLost as error:
                    if len(self.skipped) >= MAX_SKIPPED_CELLS or not self.find_fatal_cell(error):
                        raise
        except SandboxBroken:
            raise self.stopped() from None
        self.report_cells(answer)

    def spawn(self) -> None:
        """A fresh worker in place of the last one, which is settled first (its time counted, its folder
        removed)."""
        self.retire()
        self.worker = self.sandbox.spawn(self.slot)

    def retire(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.close()
            self.cpu_spent += worker.cpu_seen

    def find_fatal_cell(self, error: WorkerLost) -> bool:
        """Find, by running fewer cells in fresh workers, the first cell that ends a worker; skip it from now on."""
        low, high = 0, len(self.cells)  # the first `low` cells run fine; the first `high` do not
        while high - low > 1:
            middle = (low + high) // 2
            self.budget()  # out of time: give up the search, not blame a cell
            self.spawn()
            try:
                self.carry(exec_request(self.cells, upto=middle, skip=self.skipped, record_code=self.record_code))
                low = middle
            except WorkerLost:
                high = middle
            finally:
                self.retire()
        label = self.cells[high - 1].label if high else None
        if label is None or label in self.skipped:
            return False
        self.skipped.append(label)
        self.crashes.append(f"while cell {label} ran ({error}); the workers that graded the tasks ran the notebook "
                            f"without that cell")
        return True

    def report_cells(self, answer: dict) -> None:
        if self.cell_errors or self.refusals:
            return  # a fresh worker after a crash: the cells said what they had to the first time
        for cell in answer.get("cells", []):
            if type(cell) is dict and not cell.get("ok"):
                error = cell.get("error") if type(cell.get("error")) is dict else {}
                kind, message = str(error.get("type", "an error"))[:80], str(error.get("message", ""))[:200]
                where = f"cell {str(cell.get('label'))[:20]}" + \
                    (f", line {cell['line']}" if type(cell.get("line")) is int else "")
                if kind == "Refused" and "this exercise forbids it" in message:
                    self.refusals.append(f"{where} stopped at a PyTorch built-in this exercise forbids ({message[:90]}"
                                         "...); fine in a comparison cell, but nothing after that line of the cell "
                                         "was defined")
                else:
                    self.cell_errors.append(f"{where} raised {kind}: {message}")

    def budget(self) -> tuple[float, float]:
        """The CPU seconds and the wall seconds the next request may take: a request's own limits, within what
        the submission has left."""
        used = self.cpu_spent + (self.worker.cpu_seen if self.worker is not None else 0.0)
        cpu = self.limits.submission_seconds - used
        wall = self.limits.submission_seconds * self.limits.wall_factor - self.waited
        if cpu <= 0:
            raise WorkerLost("timeout", "the submission used up its whole time budget "
                                        f"({self.limits.submission_seconds:g} s of computing)")
        if wall <= 0:
            raise WorkerLost("timeout", "the submission used up its whole time budget (its calls kept the grader "
                                        f"waiting {self.waited:.0f} s in all)")
        return min(cpu, self.limits.request_seconds), min(wall, self.limits.request_seconds * self.limits.wall_factor)

    def carry(self, request: dict) -> dict:
        if self.sandbox.broken:
            raise self.stopped()
        began = time.monotonic()
        try:
            answer = self.worker.request(request, *self.budget())
        except WorkerLost as error:
            if error.status == "tampered":  # it took the monitor's channel away: this request's part is held
                self.crashes.append(f"while a task was graded ({error})")
                return {"error": {"type": "WorkerLost", "message": str(error)},
                        "monitor": {"used": [], "tampered": True, "ran": []}}
            self.events.append(error.status)
            raise
        except SandboxBroken:
            raise self.stopped() from None
        finally:
            self.waited += time.monotonic() - began
        trailer = answer.pop("trailer", {})
        self.note(trailer)
        answer["monitor"] = trailer["monitor"]
        return answer

    def stopped(self) -> WorkerLost:
        """The sandbox broke while this submission was graded: this task ends here, and every later one at once.

        ``grading_process`` throws this result away and grades the submission again in a fresh sandbox; the
        note below reaches the learner only when it breaks that one too.
        """
        note = (f"stopped the grader's sandbox ({self.sandbox.broken[:100]}), in a fresh sandbox too: what it "
                "earned before that is kept, the tasks after it were not graded")
        if note not in self.attempts:
            self.attempts.append(note)
        return WorkerLost("sandbox_violation", "not graded: the grader's sandbox stopped")

    def __call__(self, request: dict) -> dict:
        """The transport a ``Submission`` uses: start a worker when there is none alive, then carry."""
        if self.sandbox.broken:
            raise self.stopped()
        if self.worker is None or not self.worker.alive:
            self.start()
        return self.carry(request)

    def note(self, trailer: dict) -> None:
        """Keep what the worker recorded: refused attempts, and findings in code compiled at run time.

        Bounded per submission, whatever the worker sends: each distinct source is scanned once, at most
        ``MAX_SCANNED_CHARS`` of them in all, and at most ``MAX_FINDINGS`` findings are kept (deduplicated by
        their text, in a set). The grader's time on this is the submission's: it counts against its budget.
        """
        began = time.monotonic()
        self.output_total = trailer.get("output_total") if type(trailer.get("output_total")) is int \
            else self.output_total
        attempts = trailer.get("attempts")
        for what in (attempts if type(attempts) is list else [])[:20]:
            if type(what) is str and what[:120] not in self.attempts and len(self.attempts) < MAX_ATTEMPTS:
                self.attempts.append(what[:120])
        compiled = trailer.get("compiled")
        for source in (compiled if type(compiled) is list else [])[:64]:
            if type(source) is not str:
                continue
            source = source[:64 * 1024]
            digest = hashlib.sha256(source.encode("utf-8", "replace")).digest()
            if digest in self.scanned:
                continue
            if self.scanned_chars + len(source) > MAX_SCANNED_CHARS:
                self.overflow("compiled more code at run time than the grader scans")
                break
            self.scanned.add(digest)
            self.scanned_chars += len(source)
            for finding in scan.scan(source):
                text = f"code it compiled at run time {finding.what}"
                if text in self.finding_texts:
                    continue
                if len(self.findings) >= MAX_FINDINGS:
                    self.overflow("compiled code at run time with more findings than the grader keeps")
                    break
                self.finding_texts.add(text)
                self.findings.append(scan.Finding(finding.kind, None, text, finding.group))
        spent = time.monotonic() - began
        self.waited += spent  # the grader's time on this submission's evidence is the submission's
        self.cpu_spent += spent

    def overflow(self, what: str) -> None:
        """A bound on what the grader keeps was reached: said once, as a finding that holds every part with a
        rule (the code past the bound went unread)."""
        text = f"code it {what}"
        if text not in self.finding_texts:
            self.finding_texts.add(text)
            self.findings.append(scan.Finding("tampering", None, text, "introspection"))

    def close(self) -> int:
        """Settle the last worker; what this submission's workers left that could not be removed is noted."""
        try:
            self.retire()
        except SandboxBroken:
            self.stopped()
        for what in self.sandbox.leftovers:
            self.attempts.append(f"left behind what the grader could not remove: {what}")
        self.sandbox.leftovers.clear()
        return self.output_total


def grade_submission(assignment: str, cells: list, sandbox, slot: int, limits, record_code: bool = False) -> Graded:
    start = time.monotonic()
    session = Session(sandbox, slot, cells, limits, record_code)
    try:
        try:
            session.start()
        except WorkerLost as error:
            session.crashes.append(f"while its cells ran ({error})")
        parts = scoring.grade(assignment, Submission(session), on_crash=session.crashes.append)
    finally:
        output = session.close()
    return Graded(parts, session.events, session.cell_errors, session.refusals, output, time.monotonic() - start,
                  session.attempts, session.findings, session.crashes)


# --- one verdict ------------------------------------------------------------------------

def grade_one(assignment, entry, sandbox, slot, limits) -> dict:
    """The result of one readable submission.

    Points: what the tests measured, less the parts whose calls used what they forbid
    (``scoring``). Held: the parts ``evidence`` names, each with its reasons. Reported: the
    other findings, for the instructor only (``extra_data.instructor_notes``).
    """
    graded = grade_submission(assignment, entry.cells, sandbox, slot, limits,
                              record_code=any(evidence.may_hold(finding) for finding in entry.findings))
    graded.events += [o.status for part in graded.parts for o in part.outcomes if o.status == "memory_limit"]
    problems = entry.problems + graded.cell_errors + graded.refusals
    problems += [f"a worker ended {what}" + ("" if what.startswith("while") else
                                              "; that task lost the tests it had left, the next ran in a fresh worker")
                 for what in graded.crashes]
    printed = [f"its cells printed {graded.output_chars:,} characters; the grader kept the first {wire.OUTPUT_LIMIT:,}"
               ] if graded.output_chars > wire.OUTPUT_LIMIT else []  # bounded memory, nobody's loss: only reported
    problems += [f"limit hit: {report.STATUS_TEXT.get(event, event)}" for event in dict.fromkeys(graded.events)
                 if event not in ("sandbox_violation", "protocol_violation")]
    problems += [f"caught by the sandbox: the code {what}" for what in graded.attempts]
    if graded.attempts:
        graded.events.append("sandbox_violation")
    if any(part.forbidden_used for part in graded.parts):
        graded.events.append("forbidden")
    status = report.overall_status(graded.events, graded.cell_errors)
    findings = entry.findings + graded.findings
    rules = {part.name: part.forbidden for part in scoring.collect(assignment)}
    held = []
    for part in graded.parts:
        reasons = evidence.hold_reasons(part, rules.get(part.name, frozenset()), findings)
        if reasons and part.score > 0:
            scoring.hold(part, "held for your instructor's review: " + "; ".join(reasons[:3]))
            problems += [f"{part.title} held for review: {reason}" for reason in reasons]
            held += reasons
    released = status  # what ``release`` restores once the held tasks get their points
    if held:
        status = "review"
    data = report.result(assignment, entry.student_id, entry.digest, status, graded.parts, problems, graded.seconds,
                         sandbox.isolation)
    data["extra_data"]["instructor_notes"] = printed + evidence.reported(findings, held)
    if held:
        data["extra_data"]["status_after_release"] = released
    return data


# --- a class ----------------------------------------------------------------------------

def grade_all(assignment, entries, results, limits, jobs, isolation, advance=lambda: None, launched=()) -> str:
    """Grade every entry and save its result; returns the isolation used.

    ``launched``: zygotes started before PyTorch was imported (``launch.launch``), one per grading process; a
    grading process without one starts its own. The caller ends them all once this returns.

    No submission can stop the class: a grading process says which submission it takes before it grades it,
    and one that ends while grading (whatever ended it) is replaced; the submission it held is graded once
    more in the fresh one, and if that one ends too, its result says so (``grader_error``).
    """
    for entry in [e for e in entries if not e.readable]:
        parts = scoring.zero(assignment, "invalid", "not graded: the notebook could not be read")
        save_or_fail(results, report.result(assignment, entry.student_id, entry.digest, "invalid", parts,
                                            entry.problems, 0.0, "none"), assignment, entry)
        advance()
    gradable = [e for e in entries if e.readable]
    if not gradable:
        return isolation
    warm_up(assignment)
    context = multiprocessing.get_context("fork")
    inbox, outbox = context.Queue(), context.Queue()
    for index, entry in enumerate(gradable):
        inbox.put((index, entry))
    jobs = min(jobs, len(gradable))
    launched = list(launched)
    for extra in launched[jobs:]:
        extra.abandon()
    # Shared memory, written by the grading processes as they go and read here: which submission each slot's
    # process is grading (-1: none), set before it grades, and which submissions have their result saved. A
    # process that dies has said both, whatever it had queued (a queue's messages can die with their sender).
    holding = [context.Value("q", -1, lock=False) for _ in range(jobs)]
    saved = context.Array("b", len(gradable), lock=False)

    def start(slot: int, zygotes=()) -> multiprocessing.Process:
        holding[slot].value = -1
        process = context.Process(target=grading_process, args=(slot, assignment, inbox, outbox, results, limits,
                                                                isolation, zygotes, holding[slot], saved),
                                  daemon=True)
        process.start()
        return process

    processes = [start(slot, launched) for slot in range(jobs)]
    for zygote in launched:  # each grading process holds its own end now
        zygote.control.close()
    finished: set[int] = set()
    ended_on: dict[int, int] = {}  # submission -> how many grading processes ended while grading it
    used = isolation
    patience = 2 * (limits.submission_seconds * limits.wall_factor + 180)  # a submission may be graded twice
    heard = time.monotonic()

    def finish(index: int) -> None:
        nonlocal heard
        if index not in finished:
            finished.add(index)
            heard = time.monotonic()
            advance()

    try:
        while len(finished) < len(gradable):
            try:
                message = outbox.get(timeout=0.5)
            except queue.Empty:
                message = ("quiet",)
            if message[0] == "fatal":
                raise RuntimeError(message[1])
            if message[0] == "isolation":
                used = message[1]
            for index in range(len(gradable)):
                if saved[index]:
                    finish(index)
            for slot, process in enumerate(processes):
                if process.is_alive():
                    continue
                index = holding[slot].value
                processes[slot] = start(slot)  # a fresh grading process, with a sandbox of its own, for the rest
                if index < 0 or saved[index]:
                    continue
                ended_on[index] = ended_on.get(index, 0) + 1
                entry = gradable[index]
                if ended_on[index] == 1:
                    inbox.put((index, entry))  # once more: what ended the process may not be this submission
                    continue
                save_or_fail(results, failed(assignment, entry, "grader_error", "grader error: the grading process "
                                             f"ended while grading this submission, twice (exit status "
                                             f"{process.exitcode})", None), assignment, entry)
                saved[index] = 1
                finish(index)
            if time.monotonic() - heard > patience:
                raise RuntimeError(f"no submission was graded for {patience:g} s")
    finally:
        for _ in processes:
            inbox.put(None)
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
    return used


def save_or_fail(results, data: dict, assignment: str, entry) -> None:
    """Save ``data``; if even that fails (a disk that refuses, a string that slipped every check), save a result
    that says so, made from nothing the submission said: its student still gets a result."""
    try:
        report.save(results, data)
    except Exception as error:  # noqa: BLE001 - one submission's result must not stop the class
        report.save(results, report.result(
            assignment, entry.student_id, entry.digest, "grader_error",
            scoring.zero(assignment, "grader_error", "not graded: the grader could not write this result"),
            [f"grader error: the result could not be written ({type(error).__name__})"], 0.0,
            data.get("extra_data", {}).get("isolation", "none") if type(data) is dict else "none"))


def warm_up(assignment: str) -> None:
    """What every grading process would otherwise do on its first submission, done once before they are
    forked so that they share it: collect the suite (its examples drawn), and PyTorch's lazy imports on the
    first gradient (``torch.autograd.grad`` imports the symbolic-shapes machinery: 0.3 s)."""
    import torch

    scoring.collect(assignment)
    x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    torch.autograd.grad((x * x).sum(), x, torch.ones((), dtype=torch.float64))


def grading_process(slot, assignment, inbox, outbox, results, limits, isolation, launched=(), holding=None,
                    saved=None) -> None:
    """One trusted grading process: a sandbox of its own (the zygote ``launched[slot]`` when there is one),
    submissions from the inbox, each one's index written to ``holding`` while it is graded and marked in
    ``saved`` once its result is written."""
    import torch

    torch.set_num_threads(1)  # one grading process per core: threads would only contend
    for other, zygote in enumerate(launched):
        if other != slot:
            zygote.control.close()  # another process's channel: its zygote must see it end when that one does
    block = tuple(scoring.blocked(assignment))
    try:
        sandbox = Sandbox(limits=limits, isolation=isolation, block=block).start(
            launched[slot] if slot < len(launched) else None)
    except Exception as error:
        outbox.put(("fatal", f"the sandbox could not start: {error}"))
        return
    outbox.put(("isolation", sandbox.isolation))
    scoring.collect(assignment)
    try:
        while (item := inbox.get()) is not None:
            index, entry = item
            if holding is not None:
                holding.value = index
            try:
                data, sandbox = grade_in_a_sound_sandbox(assignment, entry, sandbox, slot, limits)
            except Exception:  # noqa: BLE001 - the grader's own failure is this submission's result, not the class's
                data = failed(assignment, entry, "grader_error",
                              "grader error: " + traceback.format_exc(limit=3)[-600:], sandbox)
            data["extra_data"]["grader_peak_rss_mb"] = round(peak_rss() / 2**20, 1)
            save_or_fail(results, data, assignment, entry)
            if saved is not None:
                saved[index] = 1
            if holding is not None:
                holding.value = -1
            outbox.put(("saved", index))  # wakes the loop at once; ``saved`` is what it believes
    finally:
        sandbox.stop()


def grade_in_a_sound_sandbox(assignment, entry, sandbox, slot, limits) -> tuple[dict, Sandbox]:
    """The result of one submission, and the sandbox to grade the next one in.

    A sandbox that broke (its control channel failed) or that holds what a submission left and could not be
    removed is replaced before anything else is graded in it. A submission during which the sandbox broke is
    graded again in a fresh one, so the one that broke it is never someone else; if it breaks that one too,
    the result of that second try stands, with its own status (``Session.stopped``).
    """
    for attempt in (1, 2):
        if sandbox.broken or sandbox.dirty:
            sandbox.stop()
            try:
                sandbox = Sandbox(limits=sandbox.limits, isolation=sandbox.isolation, block=sandbox.block).start()
            except RuntimeError as error:
                sandbox.broken = sandbox.broken or str(error)  # the next submission tries again
                return failed(assignment, entry, "grader_error", f"grader error: {error}"[:600], sandbox), sandbox
        try:
            data = grade_one(assignment, entry, sandbox, slot, limits)
        except Exception:
            data = failed(assignment, entry, "grader_error",
                          "grader error: " + traceback.format_exc(limit=3)[-600:], sandbox)
            if sandbox.broken and attempt == 2:
                data = failed(assignment, entry, "sandbox_violation", "caught by the sandbox: the code stopped the "
                              "grader's sandbox, in a fresh sandbox too", sandbox)
        if not sandbox.broken:
            break
    return data, sandbox


def failed(assignment, entry, status: str, problem: str, sandbox: Sandbox | None) -> dict:
    """A result with every task at 0: the grader failed (``grader_error``), or the submission stopped it."""
    message = "not graded: " + ("the grader failed" if status == "grader_error" else "the grader's sandbox stopped")
    return report.result(assignment, entry.student_id, entry.digest, status, scoring.zero(assignment, status, message),
                         entry.problems + [problem], 0.0, sandbox.isolation if sandbox is not None else "none")


def peak_rss() -> int:
    """This process's peak resident memory, in bytes (VmHWM)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
