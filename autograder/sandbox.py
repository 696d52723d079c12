"""Stage 2: start the sandbox and hand out one confined worker per submission.

One zygote (``sandboxed/zygote.py``) per grading process imports torch once, inside
bubblewrap namespaces where available: no network, its own PID/IPC/UTS namespaces, a
seccomp filter against what a grading sandbox never needs, a read-only view of the Python
installation and of ``autograder/sandboxed/`` only (not the hidden suites, the trusted
modules, the gradebook, the results or any submission), a small tmpfs ``/tmp``. Each
worker it forks runs as its own unprivileged uid, under a stricter seccomp filter (no
threads, processes or signals) and limits on CPU time, memory, file size and open files;
the grader adds wall-time limits per request and per submission. Without bubblewrap the
zygote runs as a plain child process with the same per-worker limits and filters, and
results say so (``isolation``).

``Worker.request`` is the trusted end of the wire: every frame is bounded before it is
read, and anything that is not a well-formed answer followed by its own trailer is the
submission's doing (``protocol_violation``), never the grader's.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder.checks import WorkerLost
from autograder.sandboxed import seccomp, wire

PACKAGE = Path(__file__).resolve().parent
UID_BASE = 61000  # workers run as uids from here on, one per live worker


@dataclass
class Limits:
    cpu_seconds: int = 60  # CPU time per worker
    memory_bytes: int = 2 * 2**30  # address space beyond the zygote's own
    processes: int = 64  # threads count too
    file_bytes: int = 16 * 2**20  # largest file a worker may write
    request_seconds: float = 10.0  # wall time of one request
    submission_seconds: float = 120.0  # wall time of one submission, all requests

    def for_worker(self) -> dict:
        return {"cpu_seconds": self.cpu_seconds, "memory_bytes": self.memory_bytes,
                "processes": self.processes, "file_bytes": self.file_bytes}


def bwrap_available() -> bool:
    """True when bubblewrap can create the namespaces here (it can't in some containers)."""
    if shutil.which("bwrap") is None:
        return False
    probe = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "true"],
                           capture_output=True, timeout=20)
    return probe.returncode == 0


def python_roots() -> list[Path]:
    """Directories the worker's Python needs: the interpreter, stdlib and site-packages."""
    candidates = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix),
                  Path(os.path.realpath(sys.executable)).parent}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        candidates.add(Path(sysconfig.get_paths()[key]))
    for entry in sys.path:
        path = Path(entry or ".").resolve()
        if path.is_dir() and (path.name == "site-packages" or "python3" in path.name):
            candidates.add(path)
    roots = []
    for path in sorted(candidates, key=lambda p: len(p.parts)):
        if path.exists() and not any(path.is_relative_to(root) for root in roots):
            roots.append(path)
    return [root for root in roots if not PACKAGE.is_relative_to(root) and root != Path("/")]


def bwrap_command(python: str, seccomp_fd: int | None = None) -> list[str]:
    command = ["bwrap", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
               "--unshare-cgroup-try", "--die-with-parent", "--new-session",
               "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_CHOWN"]
    created: set[Path] = set()

    def parents(path: Path) -> list[str]:
        args = []
        for parent in reversed(path.parents):
            if parent != Path("/") and parent not in created:
                created.add(parent)
                args += ["--perms", "0755", "--dir", str(parent)]
        return args

    # /tmp first: a bind below it (a course or a venv under /tmp) must land on top of the tmpfs, not under it.
    command += ["--proc", "/proc", "--dev", "/dev", "--perms", "0755", "--size", str(256 * 2**20), "--tmpfs", "/tmp"]
    for system in ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache", "/etc/alternatives"):
        if os.path.exists(system):
            command += ["--ro-bind", system, system]
    for root in python_roots():
        command += parents(root) + ["--ro-bind", str(root), str(root)]
    # Only sandboxed/ is bound: inside, ``autograder`` is a namespace package holding nothing else.
    inside = Path("/opt/autograder")
    command += ["--perms", "0755", "--dir", str(inside), "--perms", "0755", "--dir", str(inside / "autograder"),
                "--ro-bind", str(PACKAGE / "sandboxed"), str(inside / "autograder" / "sandboxed"),
                "--setenv", "PYTHONPATH", str(inside), "--setenv", "PYTHONDONTWRITEBYTECODE", "1"]
    command += [arg for name, value in WORKER_ENV.items() for arg in ("--setenv", name, value)]
    if seccomp_fd is not None:
        command += ["--seccomp", str(seccomp_fd)]
    command += ["--chdir", "/tmp", "--", python, "-I", "-S", "-c", BOOT]
    return command


# A worker may start no thread (its seccomp filter): numpy's OpenBLAS would try to after the fork, and hang.
WORKER_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

# -I ignores PYTHON* variables and user site; -S skips site, so add site-packages by hand.
BOOT = ("import sys, site; sys.path[:0] = ['/opt/autograder']; "
        "[site.addsitedir(p) for p in {paths!r}]; "
        "from autograder.sandboxed import zygote; zygote.main({fd}, {block!r})")


@dataclass
class Sandbox:
    """One zygote, and the workers it forks."""

    limits: Limits = field(default_factory=Limits)
    isolation: str = "auto"  # auto | namespaces | process
    block: tuple = ()  # tags the assignment forbids everywhere: removed in the zygote before any fork
    process: subprocess.Popen | None = None
    control: socket.socket | None = None
    buffer: bytes = b""

    def start(self) -> "Sandbox":
        if self.isolation == "auto":
            self.isolation = "namespaces" if bwrap_available() else "process"
        ours, theirs = socket.socketpair()
        python = os.path.realpath(sys.executable)
        site_dirs = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
        boot = BOOT.replace("{paths!r}", repr(site_dirs)).replace("{fd}", str(theirs.fileno()))
        boot = boot.replace("{block!r}", repr(sorted(self.block)))
        passed = [theirs.fileno()]
        program = None
        if self.isolation == "namespaces":
            if seccomp.supported():
                program = seccomp_file(seccomp.sandbox_filter())
                passed.append(program.fileno())
            command = bwrap_command(python, program.fileno() if program else None)
            command[-1] = boot
        else:
            command = [python, "-I", "-S", "-c", boot.replace("/opt/autograder", str(PACKAGE.parent))]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, pass_fds=tuple(passed),
                                        start_new_session=True, env={**os.environ, **WORKER_ENV})
        theirs.close()
        if program is not None:
            program.close()
        self.control = ours
        ready = self.receive(timeout=120)
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
            except subprocess.TimeoutExpired:
                pass
        return "(no message)"

    def receive(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.control], [], [], left)[0]:
                raise RuntimeError("the sandbox stopped answering")
            chunk = self.control.recv(65536)
            if not chunk:
                raise RuntimeError(f"the sandbox exited: {self.stderr_tail()}")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def command(self, message: dict, fds=()) -> dict:
        data = json.dumps(message).encode() + b"\n"
        if fds:
            socket.send_fds(self.control, [data], list(fds))
        else:
            self.control.sendall(data)
        return self.receive(timeout=30)

    def spawn(self, slot: int) -> "Worker":
        """A fresh worker, forked from the zygote."""
        ours, theirs = socket.socketpair()
        base = UID_BASE + slot * 4096  # each grading process's workers get their own uid range
        reply = self.command({"cmd": "spawn", "uid": base, "limits": self.limits.for_worker()},
                             fds=[theirs.fileno()])
        theirs.close()
        return Worker(self, ours, reply["pid"])

    def stop(self) -> None:
        if self.process is not None:
            try:
                self.control.close()
                self.process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
            self.process = None


def seccomp_file(program: bytes):
    """An unlinked temporary file holding ``program``, for bubblewrap's ``--seccomp FD``."""
    import tempfile

    handle = tempfile.TemporaryFile()
    handle.write(program)
    handle.flush()
    handle.seek(0)
    return handle


class Worker:
    """A connection to one forked worker: requests in, answers out, with wall-time limits."""

    def __init__(self, sandbox: Sandbox, sock: socket.socket, pid: int):
        self.sandbox, self.sock, self.pid = sandbox, sock, pid
        self.alive = True
        self.output_total = 0

    def request(self, request: dict, timeout: float) -> dict:
        """Send ``request``; return its answer, with the trailer's records merged in under "trailer"."""
        if not self.alive:
            raise WorkerLost("crashed", "the worker is gone")
        number = secrets.randbits(63)
        deadline = time.monotonic() + timeout
        try:
            self.sock.sendall(wire.frame(wire.numbered(number, wire.encode(request))))
            answer = wire.decode(wire.read_frame(lambda n: self._exact(n, deadline)))
            trailer = wire.decode_trailer(wire.read_frame(lambda n: self._exact(n, deadline)))
        except WorkerLost:
            raise
        except wire.WireError as error:
            raise self.violation(str(error)) from None
        except (OSError, EOFError):
            raise self.lost() from None
        if type(answer) is not dict or trailer["number"] != number:
            raise self.violation("a frame that is not the worker's answer to the request")
        self.output_total = trailer["output_total"]
        answer["trailer"] = trailer
        return answer

    def violation(self, what: str) -> WorkerLost:
        self.kill()
        return WorkerLost("protocol_violation", f"the worker's channel carried {what}: the code wrote to the "
                                                "grader's socket, or returned something the grader cannot read")

    def _exact(self, n: int, deadline: float) -> bytearray:
        """``n`` bytes (n already bounded by the wire), read into one buffer: no second copy."""
        buffer = bytearray(n)
        view, got = memoryview(buffer), 0
        while got < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.sock], [], [], remaining)[0]:
                self.kill()
                raise WorkerLost("timeout", "it ran out of time (an endless loop, or far too slow)")
            count = self.sock.recv_into(view[got:], min(n - got, 1 << 20))
            if not count:
                raise EOFError
            got += count
        return buffer

    def lost(self) -> WorkerLost:
        """Why the worker ended, from its exit status."""
        self.alive = False
        status = self.sandbox.command({"cmd": "status", "pid": self.pid})
        code = status.get("exit")
        if code == -9 or code == -24:  # SIGKILL / SIGXCPU: the CPU limit, or the kernel's OOM killer
            return WorkerLost("cpu_limit" if code == -24 else "killed", "the worker was killed (a resource limit)")
        if isinstance(code, int) and code < 0:
            return WorkerLost("crashed", f"the worker died of signal {-code}")
        if code == 70:
            return WorkerLost("crashed", "the worker's own loop was broken while it answered (exit status 70)")
        return WorkerLost("exited", f"the code ended the worker process (exit status {code}): "
                                    "don't call sys.exit, os._exit or quit() in your code")

    def kill(self) -> None:
        if self.alive:
            self.alive = False
            try:
                self.sandbox.command({"cmd": "kill", "pid": self.pid})
            except RuntimeError:
                pass
        self.close()

    def close(self) -> None:
        try:
            if self.alive:
                self.sock.sendall(wire.frame(wire.numbered(0, wire.encode({"op": "bye"}))))
        except OSError:
            pass
        self.alive = False
        self.sock.close()
