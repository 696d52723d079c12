"""Stage 2: start the sandbox and hand out one confined worker per submission.

One zygote (``sandboxed/zygote.py``) per grading process imports torch once, inside
bubblewrap namespaces where available: no network, its own PID/IPC/UTS namespaces, a
seccomp filter against what a grading sandbox never needs, a read-only view of the Python
installation and of ``autograder/sandboxed/`` only (not the hidden suites, the trusted
modules, the gradebook, the results or any submission), a small tmpfs ``/tmp``. Each
worker it forks runs as its own unprivileged uid, under a stricter seccomp filter (no
threads, processes or signals) and limits on CPU time, memory, file size and open files;
the grader adds CPU-time budgets per request and per submission, read from the worker's
/proc entry while it waits, with a wall-clock backstop several times as long for code that
sleeps: a busy machine slows a worker down but does not make it run out of time. Without
bubblewrap the zygote runs as a plain child process with the same per-worker limits and
filters, and results say so (``isolation``).

``Worker.request`` is the trusted end of the wire: every frame is bounded before it is
read, and anything that is not a well-formed answer followed by its own trailer is the
submission's doing (``protocol_violation``), never the grader's. A worker the grader is
done with is settled with the zygote (``Sandbox.settle``): ended, what it left running
killed, its folder removed in a short-lived process; what could not be removed is noted
against the submission and makes the sandbox ``dirty``. Any failure of the zygote's control
channel raises ``SandboxBroken`` and marks the sandbox ``broken``; ``run`` then starts
another.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import socket
import struct
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder.checks import WorkerLost
from autograder.launch import (BOOT, PACKAGE, WORKER_ENV, Launched, Limits, bwrap_available,  # noqa: F401
                               bwrap_command, launch, python_roots)
from autograder.sandboxed import wire

UID_BASE = 61000  # workers run as uids from here on, one per live worker


class SandboxBroken(RuntimeError):
    """The zygote's control channel failed: an end of file, a reset, a broken pipe, no answer in time, an answer
    that is not one, a dead zygote. The sandbox is of no more use; the grader starts another."""


@dataclass
class Sandbox:
    """One zygote, and the workers it forks."""

    limits: Limits = field(default_factory=Limits)
    isolation: str = "auto"  # auto | namespaces | process
    block: tuple = ()  # tags the assignment forbids everywhere: removed in the zygote before any fork
    process: subprocess.Popen | None = None
    control: socket.socket | None = None
    buffer: bytes = b""
    broken: str = ""  # why the control channel failed; once set, every command fails at once
    leftovers: list[str] = field(default_factory=list)  # what settled workers left that could not be removed
    dirty: bool = False  # something was left: the next submission gets a fresh sandbox (a fresh /tmp)

    def start(self, launched: Launched | None = None) -> "Sandbox":
        """Take a zygote started earlier (``launch.launch``), or start one now; tell it what the assignment
        forbids; wait until it is ready to fork workers."""
        try:
            launched = launched or launch(self.isolation)
        except OSError as error:
            raise RuntimeError(f"the sandbox did not start: {error}") from None
        self.process, self.control, self.isolation = launched.process, launched.control, launched.isolation
        try:
            self.control.sendall(json.dumps({"block": sorted(self.block)}).encode() + b"\n")
            ready = self.receive(timeout=120)
        except (SandboxBroken, OSError) as error:
            self.stop()
            raise RuntimeError(f"the sandbox did not start: {error}") from None
        if not ready.get("ready"):
            raise RuntimeError(f"the sandbox did not start: {self.stderr_tail()}")
        if self.isolation == "process" and os.geteuid() != 0:
            self.isolation = "process-same-user"
        return self

    def stderr_tail(self) -> str:
        if self.process and self.process.stderr:
            try:
                self.process.wait(timeout=5)
                return self.process.stderr.read()[-2000:].decode(errors="replace").strip() or "(no message)"
            except (subprocess.TimeoutExpired, OSError, ValueError):
                pass
        return "(no message)"

    def fail(self, why: str) -> SandboxBroken:
        """Mark the sandbox broken (the first reason stays) and return the error to raise."""
        self.broken = self.broken or why
        return SandboxBroken(self.broken)

    def receive(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        try:
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.control], [], [], left)[0]:
                    raise self.fail(f"the sandbox did not answer within {timeout:g} s")
                chunk = self.control.recv(65536)
                if not chunk:
                    raise self.fail(f"the sandbox exited: {self.stderr_tail()}")
                self.buffer += chunk
                if len(self.buffer) > 2**20:
                    raise self.fail("the sandbox answered something that is not an answer")
            line, self.buffer = self.buffer.split(b"\n", 1)
            reply = json.loads(line)
        except OSError as error:
            raise self.fail(f"the sandbox's channel failed: {error}") from None
        except ValueError:
            raise self.fail("the sandbox answered something that is not an answer") from None
        if type(reply) is not dict:
            raise self.fail("the sandbox answered something that is not an answer")
        return reply

    def command(self, message: dict, fds=(), timeout: float = 30.0) -> dict:
        if self.broken:
            raise SandboxBroken(self.broken)
        data = json.dumps(message).encode() + b"\n"
        try:
            if fds:
                socket.send_fds(self.control, [data], list(fds))
            else:
                self.control.sendall(data)
        except OSError as error:
            raise self.fail(f"the sandbox's channel failed: {error}") from None
        reply = self.receive(timeout)
        if "error" in reply:
            raise self.fail(f"the sandbox could not {message['cmd']}: {str(reply['error'])[:200]}")
        return reply

    def spawn(self, slot: int) -> "Worker":
        """A fresh worker, forked from the zygote."""
        ours, theirs = socket.socketpair()
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # for the worker's first byte (``hello``)
        evidence, evidence_end = os.pipe()  # the worker's monitor writes its records here as they happen
        os.set_blocking(evidence, False)
        base = UID_BASE + slot * 4096  # each grading process's workers get their own uid range
        try:
            reply = self.command({"cmd": "spawn", "uid": base, "limits": self.limits.for_worker()},
                                 fds=[theirs.fileno(), evidence_end])
            if type(reply.get("pid")) is not int:
                raise self.fail("the sandbox did not say which worker it started")
            host_pid = self.hello(ours)
        except SandboxBroken:
            ours.close()
            os.close(evidence)
            raise
        finally:
            theirs.close()
            os.close(evidence_end)
        return Worker(self, ours, reply["pid"], host_pid, evidence)

    def hello(self, sock: socket.socket) -> int | None:
        """A new worker's pid as this process numbers it, from the credentials of the byte it sends first."""
        size = struct.calcsize("3i")
        try:
            if not select.select([sock], [], [], 30)[0]:
                raise self.fail("a worker it started did not come up")
            data, ancillary, _, _ = sock.recvmsg(1, socket.CMSG_SPACE(size))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 0)
        except OSError as error:
            raise self.fail(f"a worker it started did not come up: {error}") from None
        if data != b"\0":
            raise self.fail("a worker it started did not come up")
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(value) >= size:
                return struct.unpack("3i", value[:size])[0]
        return None

    def settle(self, pid: int, kill: bool = False) -> dict:
        """A worker the grader is done with: ended (killed first if ``kill``), its folder removed. Says how
        it ended; what it left that could not be removed goes to ``leftovers``, and makes the sandbox dirty."""
        reply = self.command({"cmd": "settle", "pid": pid, "kill": kill}, timeout=60)
        if reply.get("left"):
            self.leftovers.append(str(reply["left"])[:200])
            self.dirty = True
        return reply

    def stop(self) -> None:
        """End the sandbox at once: killing its first process ends everything inside (bubblewrap's
        --die-with-parent ends its PID namespace, workers have a parent-death signal), and a zygote that shuts
        down in its own time would only spend seconds tearing PyTorch down."""
        if self.process is not None:
            try:
                self.control.close()
            except OSError:
                pass
            self.process.kill()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            self.process = None


@dataclass
class Clock:
    """One request's time: its budgets, and the worker's CPU time when it began and when it last moved."""

    cpu_seconds: float
    wall_seconds: float
    idle_seconds: float
    cpu_at_start: float | None
    began: float = field(default_factory=time.monotonic)
    cpu_seen: float = -1.0
    moved: float = field(default_factory=time.monotonic)


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")  # the unit of the CPU times in /proc/PID/stat
POLL_SECONDS = 0.2  # while an answer is awaited, how often the worker's CPU time is read
IDLE_SECONDS = 2.0  # the least time without computing that ends a request: a runnable worker computes sooner
ENDLESS = "it ran out of time (an endless loop, or far too slow)"


class Worker:
    """A connection to one forked worker: requests in, answers out, within the worker's CPU-time budget and a
    wall-clock backstop."""

    def __init__(self, sandbox: Sandbox, sock: socket.socket, pid: int, host_pid: int | None,
                 evidence: int | None = None):
        self.sandbox, self.sock, self.pid, self.evidence = sandbox, sock, pid, evidence
        self.tags: set[str] = set()  # what the evidence channel carried during the current request
        self.forged = False  # it carried something that is not a record
        self.partial = b""
        self.evidence_bytes = 0
        self.evidence_ended = evidence is None  # no channel (a worker made by hand): nothing to read
        self.alive = True
        self.output_total = 0
        self.ended: dict | None = None  # the zygote's word on how it ended, once settled
        self.cpu_seen = 0.0  # its CPU seconds when last read
        self._stat = self.open_stat(host_pid) if host_pid is not None else None

    def open_stat(self, host_pid: int) -> int | None:
        """The worker's /proc stat file, opened once the process numbered ``host_pid`` here is known to be this
        worker: the open file stays with that process, never one that gets its number later."""
        try:
            stat = os.open(f"/proc/{host_pid}/stat", os.O_RDONLY)
        except OSError:
            return None
        try:
            with open(f"/proc/{host_pid}/status") as status:
                numbers = next(line for line in status if line.startswith("NSpid:")).split()[1:]
        except (OSError, StopIteration):
            numbers = []
        if numbers and numbers[-1] == str(self.pid):  # the zygote's number for it, in the sandbox's namespace
            return stat
        os.close(stat)
        return None

    def cpu_time(self) -> float | None:
        """The worker's CPU seconds so far (user and system), or None where they cannot be read."""
        if self._stat is None:
            return None
        try:
            fields = os.pread(self._stat, 4096, 0).rsplit(b")", 1)[1].split()
            seconds = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        except (OSError, IndexError, ValueError):
            return None
        self.cpu_seen = max(self.cpu_seen, seconds)
        return seconds

    def request(self, request: dict, cpu_seconds: float, wall_seconds: float) -> dict:
        """Send ``request``; return its answer, with the trailer's records merged in under "trailer".

        The worker may use ``cpu_seconds`` of CPU time on it and ``wall_seconds`` in all (the backstop for a
        worker that barely gets a CPU); it may go as long without answering or computing as it may compute
        (``cpu_seconds``, at least ``IDLE_SECONDS``: code that sleeps or blocks). Past any of them it is killed
        and the request ends in a timeout.
        """
        if not self.alive:
            raise WorkerLost("crashed", "the worker is gone")
        watch = request.get("watch_autograd") is True  # said in the number's top bit, not in the JSON
        request = {key: value for key, value in request.items() if key != "watch_autograd"}
        number = secrets.randbits(63) | (wire.WATCH_AUTOGRAD if watch else 0)
        # The worker's CPU time as last read (the end of its previous request, or its spawn): between requests it
        # waits for the next one, so this is its time now, without reading /proc once more.
        clock = Clock(cpu_seconds, wall_seconds, max(cpu_seconds, IDLE_SECONDS),
                      self.cpu_seen if self._stat is not None else None)
        self.tags, self.forged, self.evidence_bytes = set(), False, 0  # what a finalizer wrote between two
        # requests is read with the next one, and counts for it
        try:
            self.sock.sendall(wire.frame(wire.numbered(number, wire.encode(request))))
            answer = wire.decode(wire.read_frame(lambda n: self._exact(n, clock)))
            trailer = wire.decode_trailer(wire.read_frame(lambda n: self._exact(n, clock)))
            self.read_evidence()  # all the request wrote is in the pipe: it wrote it before it answered
        except WorkerLost:
            raise
        except wire.WireError as error:
            raise self.violation(str(error)) from None
        except (OSError, EOFError):
            raise self.lost() from None
        finally:
            self.cpu_time()
        if type(answer) is not dict or trailer["number"] != number:
            raise self.violation("a frame that is not the worker's answer to the request")
        self.output_total = trailer["output_total"]
        monitor = trailer["monitor"]
        monitor["used"] = sorted(set(monitor["used"]) | self.tags)
        monitor["tampered"] = monitor["tampered"] or self.forged or "tampered" in self.tags
        answer["trailer"] = trailer
        return answer

    def read_evidence(self) -> None:
        """Everything the evidence channel holds now, read without waiting; at most ``MAX_EVIDENCE_BYTES`` a
        request (more ends the worker: ``protocol_violation``)."""
        while self.evidence is not None:
            try:
                data = os.read(self.evidence, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                self.forged = True
                return
            if not data:  # the worker has ended
                self.evidence_ended = True
                return
            self.evidence_bytes += len(data)
            if self.evidence_bytes > wire.MAX_EVIDENCE_BYTES:
                raise self.violation("more records on the evidence channel than the grader reads")
            tags, bad, self.partial = wire.read_evidence(data, self.partial)
            self.tags |= tags
            self.forged = self.forged or bad

    def violation(self, what: str) -> WorkerLost:
        self.kill()
        return WorkerLost("protocol_violation", f"the worker's channel carried {what}: the code wrote to the "
                                                "grader's socket, or returned something the grader cannot read")

    def _exact(self, n: int, clock: Clock) -> bytearray:
        """``n`` bytes (n already bounded by the wire), read into one buffer: no second copy."""
        buffer = bytearray(n)
        view, got = memoryview(buffer), 0
        while got < n:
            self._wait(clock)
            count = self.sock.recv_into(view[got:], min(n - got, 1 << 20))
            if not count:
                raise EOFError
            got += count
        return buffer

    def _wait(self, clock: Clock) -> None:
        """Until the socket has bytes to read. The worker is killed once the request has used its CPU time (its
        wall time, where the CPU time cannot be read), once it has neither answered nor computed for
        ``clock.idle_seconds`` (it sleeps or blocks), or at the wall-clock backstop."""
        while True:
            waited = time.monotonic() - clock.began
            if waited >= clock.wall_seconds:
                raise self.out_of_time(f"it ran out of time: no answer after {clock.wall_seconds:g} s (far too slow, "
                                       "or it sleeps)")
            watched = [self.sock] if self.evidence_ended else [self.sock, self.evidence]
            readable = select.select(watched, [], [], min(POLL_SECONDS, clock.wall_seconds - waited))[0]
            if self.evidence in readable:
                self.read_evidence()  # a worker that records much must not block on a full pipe
            if self.sock in readable:
                return
            now = self.cpu_time()
            if now is None or clock.cpu_at_start is None:
                if time.monotonic() - clock.began >= clock.cpu_seconds:
                    raise self.out_of_time(ENDLESS)
                continue
            if now - clock.cpu_at_start >= clock.cpu_seconds:
                raise self.out_of_time(ENDLESS)
            if now > clock.cpu_seen:
                clock.cpu_seen, clock.moved = now, time.monotonic()
            elif time.monotonic() - clock.moved >= clock.idle_seconds:
                raise self.out_of_time(f"it ran out of time: it neither answered nor computed for "
                                       f"{clock.idle_seconds:g} s (it sleeps, or waits for what never comes)")

    def out_of_time(self, message: str) -> WorkerLost:
        self.kill()
        return WorkerLost("timeout", message)

    def lost(self) -> WorkerLost:
        """Why the worker ended, from its exit status."""
        self.alive = False
        ended = self.settle()
        code = ended.get("exit")
        if ended.get("killed"):  # it closed its channel but went on running
            return WorkerLost("crashed", "the worker stopped answering")
        if code == -9 or code == -24:  # SIGKILL / SIGXCPU: the CPU limit, or the kernel's OOM killer
            return WorkerLost("cpu_limit" if code == -24 else "killed", "the worker was killed (a resource limit)")
        if isinstance(code, int) and code < 0:
            return WorkerLost("crashed", f"the worker died of signal {-code}")
        if code == 70:
            return WorkerLost("crashed", "the worker's own loop was broken while it answered (exit status 70)")
        if code == 71:
            return WorkerLost("tampered", "the worker could not send the grader's monitor its records (exit status "
                                          "71): the code took the monitor's channel away")
        return WorkerLost("exited", f"the code ended the worker process (exit status {code}): "
                                    "don't call sys.exit, os._exit or quit() in your code")

    def kill(self) -> None:
        if self.alive:
            self.alive = False
            try:
                self.settle(kill=True)
            finally:
                self.close()
        else:
            self.close()

    def close(self) -> None:
        """Say goodbye (if it is still there), hang up, and settle it with the zygote."""
        try:
            if self.alive:
                self.sock.sendall(wire.frame(wire.numbered(0, wire.encode({"op": "bye"}))))
        except OSError:
            pass
        self.alive = False
        self.sock.close()
        if self.evidence is not None:
            os.close(self.evidence)
            self.evidence = None
        if self._stat is not None:
            os.close(self._stat)
            self._stat = None
        self.settle()

    def settle(self, kill: bool = False) -> dict:
        """How the worker ended, asked once of the zygote (which also removes what it left)."""
        if self.ended is None:
            self.ended = {}  # asked: a second call (a broken sandbox raising) must not ask again
            self.ended = self.sandbox.settle(self.pid, kill)
            if type(self.ended.get("cpu")) is float:
                self.cpu_seen = max(self.cpu_seen, self.ended["cpu"])
        return self.ended
