"""The fork server: imports torch once, then forks one executor per submission.

Started by ``autograder.sandbox`` inside the sandbox (or, where namespaces are not
available, as a plain child process) with a control socket. For each
``spawn`` message it receives a connected socket (SCM_RIGHTS), forks, and the child
drops to the submission's uid, sets its resource limits and serves ``Executor``
requests on that socket until the grader says ``bye`` or hangs up. The zygote itself
never runs student code.
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
import struct

import torch

torch.set_num_threads(1)
torch.set_num_interop_threads(1)

from autograder import wire  # noqa: E402
from autograder.sandboxed.executor import Executor, Monitor, watch_for_escapes  # noqa: E402

PR_SET_PDEATHSIG = 1
WORK_ROOT = os.environ.get("AUTOGRADER_WORK_ROOT", "/tmp")


def warm_up() -> None:
    """Page in the code paths students use, so each fork starts hot."""
    x = torch.randn(4, 8, requires_grad=True)
    attn = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    out = attn(x[None], x[None], x[None], need_weights=False)[0]
    out = torch.nn.functional.gelu(torch.nn.Linear(8, 8)(out)) + x.mean(-1, keepdim=True)
    (out.var(-1) + out.pow(2).mean()).sum().backward()
    torch.rsqrt(x.detach().to(torch.bfloat16).float() + 2).half().float()
    executor = Executor()
    for grad in (True, False):
        with torch.enable_grad() if grad else torch.no_grad(), Monitor(grad_expected=grad):
            torch.nn.functional.layer_norm(x * 2, (8,)).sum()
    executor.decode(executor.encode({"value": [x, torch.float16, None, 1.5, "s", attn]}))


def recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">I", recv_exact(sock, 4))
    if size > wire.MAX_FRAME_BYTES:
        raise EOFError
    return recv_exact(sock, size)


def send_frame(sock: socket.socket, frame: bytes) -> None:
    sock.sendall(struct.pack(">I", len(frame)) + frame)


def serve(sock: socket.socket, block) -> None:
    """The child's loop: one request frame in, one answer frame out."""
    executor = Executor(block=block, block_kernels=True)
    while True:
        try:
            frame = recv_frame(sock)
        except (EOFError, OSError):
            return
        try:
            request = executor.decode(frame)
        except Exception as error:
            answer = {"error": {"type": "BadRequest", "message": str(error)[:200]}}
        else:
            if request.get("op") == "bye":
                return
            answer = executor.handle(request)
            if request.get("op") != "output":
                answer["output_total"] = executor.output.total
        try:
            reply = executor.encode(answer)
        except Exception as error:  # a value the wire cannot carry, or one that fails to convert
            reply = wire.encode({"error": {"type": "UnsupportedValue",
                                           "message": f"the result could not be sent back: {str(error)[:200]}"}})
        send_frame(sock, reply)


def become_worker(sock: socket.socket, control: socket.socket, spec: dict) -> None:
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
        watch_for_escapes(home)
        serve(sock, spec.get("block", []))
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
                    become_worker(sock, control, command)
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


