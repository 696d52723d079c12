"""Stage 2, its first half: start a sandbox's zygote, before the grader has imported PyTorch.

The zygote (``sandboxed/zygote.py``) spends about two seconds importing PyTorch and warming
up. This module uses the standard library only, so ``python -m autograder grade`` starts the
zygotes first thing and they warm up while the command imports PyTorch and reads the
notebooks; ``sandbox.Sandbox.start`` takes one over, tells it what the assignment forbids
(the suites, which say so, need PyTorch) and waits for it to be ready. Here too: the
bubblewrap command (what the sandbox can see) and the per-worker limits.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from autograder.sandboxed import seccomp

PACKAGE = Path(__file__).resolve().parent


@dataclass
class Limits:
    cpu_seconds: int = 60  # CPU time per worker (RLIMIT_CPU: the kernel's own bound)
    memory_bytes: int = 2 * 2**30  # address space beyond the zygote's own
    processes: int = 64  # threads count too
    file_bytes: int = 16 * 2**20  # largest file a worker may write
    request_seconds: float = 10.0  # the worker's CPU time in one request
    submission_seconds: float = 120.0  # the workers' CPU time over one submission, all requests
    wall_factor: float = 5.0  # the wall-clock backstop, in CPU budgets: for code that barely gets a CPU

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
    # Only sandboxed/ is bound: inside, ``autograder`` is a namespace package holding nothing else. Its folder
    # is the zygote's alone (0700): a worker, which runs as another uid, cannot read the grader's files.
    inside = Path("/opt/autograder")
    command += ["--perms", "0700", "--dir", str(inside), "--perms", "0755", "--dir", str(inside / "autograder"),
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
        "from autograder.sandboxed import zygote; zygote.main({fd})")


@dataclass
class Launched:
    """A zygote started and warming up: its process, the grader's end of its control channel, the isolation."""

    process: subprocess.Popen
    control: socket.socket
    isolation: str

    def abandon(self) -> None:
        """End a zygote no grading process took."""
        self.control.close()
        self.process.kill()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def launch(isolation: str = "auto") -> Launched:
    """Start a zygote; it warms up, then waits for the assignment's ``{"block": [...]}`` on its channel."""
    if isolation == "auto":
        isolation = "namespaces" if bwrap_available() else "process"
    ours, theirs = socket.socketpair()
    python = os.path.realpath(sys.executable)
    site_dirs = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
    boot = BOOT.replace("{paths!r}", repr(site_dirs)).replace("{fd}", str(theirs.fileno()))
    passed = [theirs.fileno()]
    program = None
    try:
        if isolation == "namespaces":
            if seccomp.supported():
                program = seccomp_file(seccomp.sandbox_filter())
                passed.append(program.fileno())
            command = bwrap_command(python, program.fileno() if program else None)
            command[-1] = boot
        else:
            command = [python, "-I", "-S", "-c", boot.replace("/opt/autograder", str(PACKAGE.parent))]
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, pass_fds=tuple(passed), start_new_session=True,
                                   env={**os.environ, **WORKER_ENV})
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
        if program is not None:
            program.close()
    return Launched(process, ours, isolation)


def seccomp_file(program: bytes):
    """An unlinked temporary file holding ``program``, for bubblewrap's ``--seccomp FD``."""
    import tempfile

    handle = tempfile.TemporaryFile()
    handle.write(program)
    handle.flush()
    handle.seek(0)
    return handle
