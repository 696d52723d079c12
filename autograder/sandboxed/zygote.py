"""The fork server: imports torch once, removes what the exercise forbids, then forks one executor per submission.

Started by ``autograder.sandbox`` inside the sandbox (or, where namespaces are not
available, as a plain child process) with a control socket and the tags the assignment
forbids. Before it forks anything it removes those capabilities (``guard.remove_capabilities``)
and keeps the registrations in a local variable of ``main``. For each ``spawn`` message it
receives a connected socket (SCM_RIGHTS), forks, and the child drops to the submission's
uid, sets its resource limits and its seccomp filter (no threads, no processes, no
signals) and serves requests on that socket until the grader says ``bye`` or hangs up.
The zygote itself never runs student code.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import shutil
import signal
import socket
import sys

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

    for name in ("torch.cuda", "torch.cuda.random", "torch.xpu", "torch.xpu.random", "torch.mtia"):
        module = importlib.import_module(name)
        if hasattr(module, "_lazy_call"):
            module._lazy_call = lambda callable, **kwargs: None
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
    torch._tensor_str._str = print_under_the_monitor
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


def print_under_the_monitor(self, *, tensor_contents=None):
    """PyTorch's ``_tensor_str._str`` without ``_disable_current_modes``: printing pops every dispatch
    mode, and the worker refuses that (the monitor is one). Printing then runs a few elementary
    operators in the monitor's sight, which record nothing a rule forbids."""
    with torch.no_grad():
        functorch_off = torch._C._DisableFuncTorch()  # noqa: F841 - as PyTorch's own, while it lives
        return torch._tensor_str._str_intern(self, tensor_contents=tensor_contents)


def serve(sock: socket.socket, home: str, monitor) -> None:
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
    drain = permit = None
    unchanged = monitor.seal()  # before any student code: the monitor as the zygote made it
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
                compiled = executor.compile_cells(request["cells"])
                drain, permit = guard.audit_hook(home, os.getpid())
                sys.getprofile = lambda: None  # the code recorder stays out of student code's reach
                forget_the_grader()
                answer = executor.run_cells(compiled, request.get("upto"), request.get("skip") or ())
                monitor.drain()  # what the cells used is theirs: only the grader's calls are judged
            elif drain is None:
                answer = {"error": {"type": "BadRequest", "message": "cells must run first"}}
            else:
                permit(setprofile, profile)
                try:
                    answer = executor.handle(request)
                finally:
                    permit(setprofile, None)
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


def forget_the_grader() -> None:
    """Drop the worker's own modules from ``sys.modules``: student code finds no grader by importing it."""
    for name in [name for name in sys.modules if name == "autograder" or name.startswith("autograder.")]:
        del sys.modules[name]


def become_worker(sock: socket.socket, control: socket.socket, spec: dict, monitor) -> None:
    """In the forked child: confine, limit, then serve. Never returns."""
    code = 0
    try:
        control.close()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        os.setsid()
        home = os.path.join(WORK_ROOT, f"w{os.getpid()}")
        os.makedirs(home, mode=0o700, exist_ok=True)
        if os.geteuid() == 0:
            os.chown(home, spec["uid"], spec["uid"])
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
            seccomp.install(seccomp.worker_filter())
        serve(sock, home, monitor)
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


def main(control_fd: int, block=()) -> None:
    control = socket.socket(fileno=control_fd)
    warm_up()
    monitor = guard.Monitor()
    registrations = guard.remove_capabilities(block)  # noqa: F841 - alive, and out of reach, while main runs
    if set(block) & set(guard.NORM_TAGS):
        registrations += guard.recording_kernels(monitor.record)
    guard.record_functorch_entries(monitor.record)
    monitor.__enter__()  # on for good, in every worker forked from here
    guard.take_away_mode_switches()
    children: dict[int, int] = {}  # pid -> uid
    ended: dict[int, dict] = {}
    control.sendall(json.dumps({"ready": True, "pid": os.getpid()}).encode() + b"\n")
    buffer = b""
    while True:
        ready, _, _ = select.select([control], [], [], 0.2)
        reap(children, ended)
        if not ready:
            continue
        message, fds, _, _ = socket.recv_fds(control, 65536, 1)
        if not message:
            break
        buffer += message
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            command = json.loads(line)
            if command["cmd"] == "spawn":
                command["uid"] = next_uid(command["uid"], children)
                sock = socket.socket(fileno=fds.pop(0))
                pid = os.fork()
                if pid == 0:
                    become_worker(sock, control, command, monitor)
                sock.close()
                children[pid] = command["uid"]
                reply = {"pid": pid}
            elif command["cmd"] == "kill":
                try:
                    os.kill(command["pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
                reply = {"killed": command["pid"]}
            elif command["cmd"] == "status":
                for _ in range(50):
                    reap(children, ended)
                    if command["pid"] in ended or command["pid"] not in children:
                        break
                    select.select([], [], [], 0.02)
                reply = ended.get(command["pid"], {"running": command["pid"] in children})
            else:
                reply = {"error": "unknown command"}
            control.sendall(json.dumps(reply).encode() + b"\n")
    for pid in children:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


UID_RANGE = 4096
_last_uid = [0]


def next_uid(base: int, children: dict[int, int]) -> int:
    """A uid no live worker has, so that cleaning up after one worker never touches another."""
    busy = set(children.values())
    for step in range(1, UID_RANGE + 1):
        uid = base + (_last_uid[0] + step) % UID_RANGE
        if uid not in busy:
            _last_uid[0] = uid - base
            return uid
    raise RuntimeError("no free worker uid")


def kill_uid(uid: int) -> None:
    """Kill whatever a finished worker left running (processes it forked), by its uid."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as status:
                line = next(l for l in status if l.startswith("Uid:"))
            if int(line.split()[1]) == uid:
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, StopIteration, ValueError):
            continue


def reap(children: dict[int, int], ended: dict[int, dict]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        uid = children.pop(pid, None)
        ended[pid] = {"exit": os.waitstatus_to_exitcode(status)}
        if uid is not None and uid != os.getuid():
            kill_uid(uid)
        shutil.rmtree(os.path.join(WORK_ROOT, f"w{pid}"), ignore_errors=True)


