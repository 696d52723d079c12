"""The fork server: imports torch once, removes what the exercise forbids, then forks one executor per submission.

Started by ``autograder.sandbox`` inside the sandbox (or, where namespaces are not
available, as a plain child process) with a control socket and the tags the assignment
forbids. Before it forks anything it removes those capabilities (``guard.remove_capabilities``)
and keeps the registrations in a local variable of ``main``. For each ``spawn`` message it
receives a connected socket (SCM_RIGHTS), makes the worker a fresh folder, forks, and the
child sends one byte (whose credentials tell the grader its pid), drops to the submission's
uid, sets its resource limits and its seccomp filter (no threads, no processes, no
signals) and serves requests on that socket until the grader says ``bye`` or hangs up.
The zygote itself never runs student code.

Nothing a worker leaves behind runs in the zygote's loop, which only notes exits (``reap``)
and answers commands, every failure of one answered as an error. When the grader is done
with a worker it sends ``settle``: the worker is ended, and a short-lived cleaner forked
for it becomes the worker's uid, kills what that uid left running and empties the folder
without recursion (``remove_below``), within ``CLEAN_SECONDS``; what it could not remove
is reported, and the grader then starts a fresh sandbox (a fresh ``/tmp``).
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import resource
import select
import signal
import socket
import sys
import tempfile
import time

import torch

torch.set_num_threads(1)
torch.set_num_interop_threads(1)

from autograder.sandboxed import guard, seccomp, wire  # noqa: E402
from autograder.sandboxed.executor import Executor, describe_error  # noqa: E402

PR_SET_PDEATHSIG = 1
WORK_ROOT = os.environ.get("AUTOGRADER_WORK_ROOT", "/tmp")


def warm_up() -> None:
    """Page in the code paths students use, so each fork starts hot.

    The worker has no accelerator: ``torch.manual_seed`` would still queue CUDA and XPU seeding calls
    that never run, each with a stack trace (frames, which the audit hook refuses). Drop them.
    """
    import importlib

    skip = outside_the_grader("def skip(callable, **kwargs):\n    return None\n", "skip")
    for name in ("torch.cuda", "torch.cuda.random", "torch.xpu", "torch.xpu.random", "torch.mtia"):
        module = importlib.import_module(name)
        if hasattr(module, "_lazy_call"):
            module._lazy_call = skip
    x = torch.randn(4, 8, requires_grad=True)
    attn = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    out = attn(x[None], x[None], x[None], need_weights=False)[0]
    out = torch.nn.functional.gelu(torch.nn.Linear(8, 8)(out)) + x.mean(-1, keepdim=True)
    (out.var(-1) + out.pow(2).mean()).sum().backward()
    torch.rsqrt(x.detach().to(torch.bfloat16).float() + 2).half().float()
    torch.nn.functional.layer_norm(x * 2, (8,)).sum()
    # Printing a tensor imports modules the worker's audit hook keeps out of student code's reach
    # (torch._subclasses, for one that requires grad): import them here, where it is allowed.
    for shown in (x, out, x.detach().half(), x.detach().to(torch.bfloat16), torch.arange(3), torch.zeros(0)):
        repr(shown), str(shown), f"{shown}"
    torch._tensor_str._str = outside_the_grader(PRINT_UNDER_THE_MONITOR, "print_under_the_monitor", torch=torch)
    with guard.Monitor():  # what the worker does under the monitor, so that lazy imports happen here
        (x * 2).sum()
        y = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
        torch.autograd.grad((y - y.mean(-1, keepdim=True)) * 2, [y], torch.ones(3, 4, dtype=torch.float64))
        (y * y).sum().backward()
        torch.autograd.grad(y.pow(2).sum(), y, allow_unused=True)
        repr(y), str(y * 2)
        # torch.func's transforms import parts of torch._dynamo on first use: a learner may use them where
        # autograd is allowed (ex1's input_grad_norm).
        out, pull = torch.func.vjp(torch.nn.Linear(8, 8), x.detach())
        pull(torch.ones_like(out))
        torch.func.grad(lambda t: t.pow(2).sum())(x.detach())
        torch.func.jacrev(torch.tanh)(x.detach()[0])
        torch.func.vmap(torch.sin)(x.detach())
    executor = Executor()
    executor.decode(executor.encode({"value": [x, torch.float16, None, 1.5, "s", attn]}))


PRINT_UNDER_THE_MONITOR = """
def print_under_the_monitor(self, *, tensor_contents=None):
    with torch.no_grad():
        functorch_off = torch._C._DisableFuncTorch()
        return torch._tensor_str._str_intern(self, tensor_contents=tensor_contents)
"""
# PyTorch's ``_tensor_str._str`` without ``_disable_current_modes``: printing pops every dispatch mode, and the
# worker refuses that (the monitor is one). Printing then runs a few elementary operators in the monitor's
# sight, which record nothing a rule forbids.


def outside_the_grader(source: str, name: str, **names):
    """The function ``name`` defined by ``source`` in a namespace of its own holding only ``names``: what the
    zygote puts into PyTorch, where student code can reach it, leads through its ``__globals__`` to nothing of
    the grader's."""
    namespace = {"__name__": name, **names}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return namespace[name]


def serve(sock: socket.socket, home: str, monitor, kept: dict) -> None:
    """The worker's loop: one numbered request in; its answer and a trailer out.

    The trailer carries the request's number (which student code never sees), what the
    monitor and the audit hook recorded while the request ran (and whether the monitor was
    still the sealed one), the sources compiled at run time, the notebook code the request
    ran (cell and lines, from a profile function installed for graded requests only) and the
    output count. The channel is read and written with ``os.read``/``os.write``
    and the trailer made by ``wire.encode_trailer``, all taken before any student code runs,
    so monkeypatching ``socket``, ``json`` or ``os`` later changes nothing here.
    """
    read, write, fd = os.read, os.write, sock.fileno()
    read_frame, frame, split_number, encode_trailer = wire.read_frame, wire.frame, wire.split_number, \
        wire.encode_trailer
    executor = Executor()
    references = dict(executor.references)  # the originals: from here on, only the audit hook holds them
    executor.references = {name: guard.through_the_hook(name) for name in references}
    drain = permit = arm = None
    recording = False  # whether graded calls run under the code recorder (the grader asks with the cells)
    unchanged = monitor.seal()  # before any student code: the monitor as the zygote made it
    state = guard.dispatch_state()
    as_made = state()  # the dispatch state before any student code; every graded call must find and leave it so
    hooks = kept["hooks"]
    push, pop, (pack, unpack) = hooks["_push_saved_tensors_default_hooks"], \
        hooks["_pop_saved_tensors_default_hooks"], kept["watch"]
    top_hooks, evidence, watch_bit = torch._C._autograd._top_saved_tensors_default_hooks, guard.evidence, \
        wire.WATCH_AUTOGRAD
    profile, ran = guard.code_recorder()
    setprofile = sys.setprofile

    def read_exact(n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = read(fd, min(left, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def write_all(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[write(fd, view):]

    while True:
        try:
            number, payload = split_number(read_frame(read_exact))
        except (EOFError, OSError, wire.WireError):
            return
        try:
            request = executor.decode(payload)
            if request.get("op") == "bye":
                return
            if request.get("op") == "exec" and drain is None:
                recording = request.get("record_code") is True
                compiled = executor.compile_cells(request["cells"])
                drain, permit, arm = guard.audit_hook(home, os.getpid(), wire.EVIDENCE_FD,
                                                      {**hooks, **references, "watch": kept["watch"]})
                del references
                sys.getprofile = lambda: None  # the code recorder stays out of student code's reach
                answer = executor.run_cells(compiled, request.get("upto"), request.get("skip") or ())
                monitor.drain()  # what the cells used is theirs: only the grader's calls are judged
            elif drain is None:
                answer = {"error": {"type": "BadRequest", "message": "cells must run first"}}
            else:
                drain()  # what happened between requests (a finalizer) is nobody's: every tag counts again
                if state() != as_made:  # left so by the cells or an earlier call: this call cannot be watched
                    evidence("tampered")
                watch = number >= watch_bit  # from the number, which student code cannot reach or rewrite
                substitute = request.get("substitute") if request.get("op") == "call" else None
                arm(set(substitute.values()) if type(substitute) is dict else ())
                if watch:
                    push(pack, unpack)
                if recording:
                    permit(setprofile, profile)
                try:
                    answer = executor.handle(request)
                finally:
                    if recording:
                        permit(setprofile, None)
                    if watch:
                        unwatch(top_hooks, pop, pack, evidence)
                if state() != as_made:
                    evidence("tampered")
        except BaseException as error:  # a request the worker cannot read, or student code escaping handle
            answer = {"error": describe_error(error)}
        try:
            reply = executor.encode(answer)
        except BaseException as error:  # a value the wire cannot carry, or student code raising while it is read
            reply = wire.encode({"error": {"type": "UnsupportedValue", "message":
                                           f"the result could not be sent back: {describe_error(error)['message']}"}})
        attempts, sources = drain() if drain is not None else ([], [])
        record = monitor.drain() if drain is not None else {"used": [], "tampered": False}
        tampered = record["tampered"] or not unchanged()
        total = executor.output.total  # an attribute student code can reach through sys.stdout: only an int counts
        trailer = encode_trailer(number, record["used"], tampered, attempts, sources,
                                 total if type(total) is int else -1, ran())
        try:
            write_all(frame(reply) + frame(trailer))
        except OSError:
            return


def unwatch(top_hooks, pop, pack, evidence) -> None:
    """Take the autograd watch off after a call; hooks the call pushed above it and left there are tampering
    (popped too)."""
    for _ in range(64):
        top = top_hooks(True)
        if top is None:
            evidence("tampered")
            return
        pop()
        if top[0] is pack:
            return
        evidence("tampered")


def forget_the_grader() -> None:
    """Drop the grader's own modules from ``sys.modules`` and from every module that names one (``__main__``
    names the zygote), in the zygote before any fork: student code finds no grader by importing it or by
    walking modules. (Nothing in the zygote or a worker imports one of them again.)"""
    mine = {name for name in sys.modules if name == "autograder" or name.startswith("autograder.")}
    grader = {id(sys.modules[name]) for name in mine}
    for name in mine:
        del sys.modules[name]
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if type(namespace) is dict:
            for key in [key for key, value in namespace.items() if id(value) in grader]:
                del namespace[key]


def become_worker(sock: socket.socket, control: socket.socket, spec: dict, monitor, kept: dict,
                  evidence: int) -> None:
    """In the forked child: confine, limit, then serve. Never returns."""
    code = 0
    try:
        control.close()
        if evidence != wire.EVIDENCE_FD:  # where the audit hook writes; the worker's filter keeps it there
            os.dup2(evidence, wire.EVIDENCE_FD, inheritable=False)
            os.close(evidence)
        # One byte first: the grader reads this process's pid, as its own namespace numbers it, from the
        # byte's credentials (SO_PASSCRED), and follows the worker's CPU time in /proc from then on.
        sock.send(b"\0")
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        os.setsid()
        home = spec["home"]
        os.chdir(home)
        os.environ.update(HOME=home, TMPDIR=home, MPLCONFIGDIR=home)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        limits = spec["limits"]
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_seconds"], limits["cpu_seconds"] + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_bytes"], limits["file_bytes"]))
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        vm = limits["memory_bytes"] + current_vm_bytes()
        resource.setrlimit(resource.RLIMIT_AS, (vm, vm))
        if os.geteuid() == 0:
            os.setgroups([])
            os.setgid(spec["uid"])
            os.setuid(spec["uid"])
            resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"], limits["processes"]))
        os.umask(0o077)
        if seccomp.supported():
            seccomp.install(seccomp.worker_filter(wire.EVIDENCE_FD))
        serve(sock, home, monitor, kept)
    except BaseException:
        code = 70
    finally:
        os._exit(code)


def current_vm_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def main(control_fd: int) -> None:
    control = socket.socket(fileno=control_fd)
    warm_up()
    block, buffer = configuration(control)
    monitor = guard.Monitor()
    registrations = guard.remove_capabilities(block)  # noqa: F841 - alive, and out of reach, while main runs
    if set(block) & set(guard.NORM_TAGS):
        registrations += guard.recording_kernels(monitor.record)
    monitor.__enter__()  # on for good, in every worker forked from here
    guard.take_away_mode_switches()
    # Held in this frame and handed down to each worker's loop and audit hook: out of student code's reach.
    kept = {"hooks": guard.take_away_autograd_entries(), "watch": guard.autograd_watch()}
    forget_the_grader()  # once, here: in a worker, walking every module would copy pages of the whole heap
    children: dict[int, dict] = {}  # pid -> its uid and home; once it ended, its exit status and CPU time
    # Everything made so far moves out of the garbage collector's sight: a worker's collections then never
    # walk (and so never copy, page by page) the zygote's millions of objects it shares after the fork. (No
    # collection first: it would take 0.1 s of every start-up to free a few cycles of the warm-up's.)
    gc.freeze()
    control.sendall(json.dumps({"ready": True, "pid": os.getpid()}).encode() + b"\n")
    while True:
        ready, _, _ = select.select([control], [], [], 0.2)
        reap(children)
        if not ready:
            continue
        try:
            message, fds, _, _ = socket.recv_fds(control, 65536, 2)
        except OSError:
            break
        if not message:
            break
        buffer += message
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            try:
                reply = obey(json.loads(line), fds, control, children, monitor, kept)
            except Exception as error:  # a command it cannot carry out: said, and the loop goes on
                reply = {"error": f"{type(error).__name__}: {error}"[:300]}
            control.sendall(json.dumps(reply).encode() + b"\n")
        for fd in fds:  # sockets no spawn took
            os.close(fd)
    for pid, child in children.items():
        if "exit" not in child:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def configuration(control: socket.socket) -> tuple[tuple, bytes]:
    """The tags the assignment forbids everywhere, the grader's first line (it sends it once the zygote is
    taken by a grading process, which may be after the warm-up), and what arrived after that line."""
    buffer = b""
    while b"\n" not in buffer:
        chunk = control.recv(65536)
        if not chunk or len(buffer) > 2**20:
            raise SystemExit("the grader sent no configuration")
        buffer += chunk
    line, buffer = buffer.split(b"\n", 1)
    block = json.loads(line)["block"]
    return tuple(str(tag) for tag in block), buffer


def obey(command: dict, fds: list, control: socket.socket, children: dict[int, dict], monitor, kept: dict) -> dict:
    """Carry out one command of the grader: ``spawn`` a worker, or ``settle`` one the grader is done with."""
    if command["cmd"] == "spawn":
        uid = next_uid(int(command["uid"]), children)
        if len(fds) < 2:
            raise RuntimeError("a spawn needs a socket and an evidence pipe")
        sock = socket.socket(fileno=fds.pop(0))
        evidence = fds.pop(0)
        home = tempfile.mkdtemp(prefix=f"w{uid}-", dir=WORK_ROOT)  # a fresh name: never a folder left behind
        if os.geteuid() == 0:
            os.chown(home, uid, os.getegid())  # the worker's, and the zygote's group may look in (``clean``)
            os.chmod(home, 0o770)
        pid = os.fork()
        if pid == 0:
            become_worker(sock, control, {**command, "uid": uid, "home": home}, monitor, kept, evidence)
        sock.close()
        os.close(evidence)
        children[pid] = {"uid": uid, "home": home}
        return {"pid": pid}
    if command["cmd"] == "settle":
        return settle(int(command["pid"]), command.get("kill") is True, children)
    return {"error": "unknown command"}


UID_RANGE = 4096
_last_uid = [0]
EXIT_SECONDS = 2.0  # a worker told to stop (or whose channel closed) ends by then, or is killed
CLEAN_SECONDS = 5.0  # a folder that takes longer to remove is left to a fresh sandbox (a fresh /tmp)


def next_uid(base: int, children: dict[int, dict]) -> int:
    """A uid no worker of the grader's has (alive, or ended and not yet settled): cleaning up after one worker
    never touches another."""
    busy = {child["uid"] for child in children.values()}
    for step in range(1, UID_RANGE + 1):
        uid = base + (_last_uid[0] + step) % UID_RANGE
        if uid not in busy:
            _last_uid[0] = uid - base
            return uid
    raise RuntimeError("no free worker uid")


def reap(children: dict[int, dict]) -> None:
    """Note the exit status and CPU time of every worker that ended. Nothing else runs in the zygote's loop:
    what a worker left behind is dealt with when the grader settles it, in a process of its own."""
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in children:
            children[pid].update(exit=os.waitstatus_to_exitcode(status), cpu=usage.ru_utime + usage.ru_stime)


def wait_child(pid: int, seconds: float) -> dict | None:
    """How child ``pid`` ended (its exit status and CPU seconds) once it has; None if it still runs after
    ``seconds``."""
    try:
        ended = os.pidfd_open(pid)
    except OSError:
        ended = None
    try:
        deadline = time.monotonic() + seconds
        while True:
            try:
                got, status, usage = os.wait4(pid, os.WNOHANG)
            except ChildProcessError:  # already reaped: how it ended is not known
                return {"exit": None, "cpu": None}
            if got:
                return {"exit": os.waitstatus_to_exitcode(status), "cpu": usage.ru_utime + usage.ru_stime}
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            select.select([ended] if ended is not None else [], [], [], left if ended is not None else 0.005)
    finally:
        if ended is not None:
            os.close(ended)


def settle(pid: int, kill: bool, children: dict[int, dict]) -> dict:
    """A worker the grader is done with: ended (killed if need be), what it left running killed, its folder
    removed. Says how it ended, its CPU time and, under "left", what could not be cleaned up (else None)."""
    child = children.get(pid)
    if child is None:
        return {"exit": None, "left": None}
    killed = False
    if "exit" not in child:
        if kill:
            os.kill(pid, signal.SIGKILL)
        ended = wait_child(pid, EXIT_SECONDS)
        if ended is None:
            os.kill(pid, signal.SIGKILL)
            killed = True
            ended = wait_child(pid, EXIT_SECONDS)
        if ended is None:
            return {"exit": None, "killed": True, "left": "its worker could not be stopped"}
        child.update(ended)
    del children[pid]
    return {"exit": child["exit"], "cpu": child["cpu"], "killed": kill or killed,
            "left": clean(child["uid"], child["home"])}


def clean(uid: int, home: str) -> str | None:
    """Remove a finished worker's folder in a short-lived process of the worker's own uid, so that nothing in
    it (depth, count, permissions, odd file types) can stop the zygote. None when all is gone, else what was
    left. An empty folder, with nothing of the uid still running, the zygote removes itself: no fork."""
    try:
        if not os.listdir(home) and (uid == os.getuid() or not processes_of(uid)):
            os.rmdir(home)
            return None
    except OSError:  # the worker took the zygote's group's access away, or left something: the cleaner's work
        pass
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            code = cleaner(uid, home, time.monotonic() + CLEAN_SECONDS)
        finally:
            os._exit(code)
    ended = wait_child(pid, CLEAN_SECONDS + 2)
    if ended is None:
        os.kill(pid, signal.SIGKILL)
        wait_child(pid, EXIT_SECONDS)  # reaped now, or later by reap()
        return "its folder held more than the grader could remove in time"
    code = ended["exit"]
    if code == 0:
        try:
            os.rmdir(home)
            return None
        except OSError:
            pass
    return {2: "its folder held more than the grader could remove in time",
            4: "it left a process running that could not be stopped"}.get(code,
                                                                          "it left files the grader could not remove")


def cleaner(uid: int, home: str, deadline: float) -> int:
    """In the cleaner: become the worker's uid, kill what it left running, empty its folder. The exit code
    says how it went (0 all gone, 2 out of time, 4 a process would not die, 3 anything else)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.geteuid() == 0 and uid != 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)  # the owner of everything below home: it may open, chmod and remove all of it
        if not kill_uid(deadline):
            return 4
    try:
        remove_below(home, deadline)
    except TimeoutError:
        return 2
    return 0


def kill_uid(deadline: float) -> bool:
    """Kill every process of this process's uid but itself (what a worker left running); False if one still
    runs at ``deadline``. Run only as a worker's own uid (see ``next_uid``): it can signal no one else."""
    me, uid = os.getpid(), os.getuid()
    while True:
        running = [pid for pid in processes_of(uid) if pid != me]
        if not running:
            return True
        if time.monotonic() > deadline:
            return False
        for pid in running:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.01)


def processes_of(uid: int) -> list[int]:
    """The processes whose real uid is ``uid`` and that have not ended (zombies are over)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as status:
                fields = dict(line.split(":", 1) for line in status if line.startswith(("State:", "Uid:")))
            if int(fields["Uid"].split()[0]) == uid and fields["State"].split()[0] not in ("Z", "X"):
                found.append(int(entry))
        except (OSError, ValueError, KeyError, IndexError):
            continue
    return found


def remove_below(home: str, deadline: float) -> None:
    """Remove everything inside ``home``, without recursion: one directory open at a time (relative to the
    one above), the names leading down to it kept in a list. Symbolic links and FIFOs are unlinked, never
    followed or opened; a directory is made readable and writable by its owner before it is opened."""
    os.chmod(home, 0o700)
    below: list[str] = []  # names from home down to the open directory
    fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError
            down = None
            with os.scandir(fd) as entries:
                for count, entry in enumerate(entries):
                    if count % 4096 == 4095 and time.monotonic() > deadline:
                        raise TimeoutError
                    if entry.is_dir(follow_symlinks=False):
                        down = entry.name
                        break
                    os.unlink(entry.name, dir_fd=fd)
            if down is not None:
                os.chmod(down, 0o700, dir_fd=fd)
                inner = os.open(down, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = inner
                below.append(down)
            elif below:
                outer = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = outer
                os.rmdir(below.pop(), dir_fd=fd)
            else:
                return
    finally:
        os.close(fd)
