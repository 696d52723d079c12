"""The seccomp filters of the sandbox (``autograder/sandboxed/seccomp.py``).

A filter can never be removed, so every test that installs one does it in a fresh
Python process, and probes it the way student code attacking a worker would.
"""

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.sandboxed import seccomp

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(not seccomp.supported(), reason="the filters are written for x86_64 Linux")

# Shared by the scripts below: ``outcome`` names what a call did, ``c_call`` what a libc call did.
PRELUDE = f"""
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
results = {{}}

def outcome(fn):
    try:
        value = fn()
    except BaseException as error:
        return f"{{type(error).__name__}}:{{errno.errorcode.get(getattr(error, 'errno', None), '-')}}:{{error}}"
    return "ok" if value is None else value

def c_call(fn, *args):
    ctypes.set_errno(0)
    rc = fn(*args)
    return errno.errorcode.get(ctypes.get_errno(), "?") if rc == -1 else f"returned {{rc}}"

def nr(name):
    from autograder.sandboxed import seccomp
    return ctypes.c_long(seccomp.NR[name])
"""

# Denied by both filters. Each would fail differently (or succeed harmlessly) without a filter:
# ptrace of a pid that cannot exist (ESRCH), mount on a missing path (ENOENT), clone with
# flags the kernel rejects (EINVAL), unshare in a throw-away process.
DENIED_EVERYWHERE = """
results["ptrace"] = c_call(libc.ptrace, ctypes.c_long(16), ctypes.c_long(0x7FFFFFFF), None, None)  # PTRACE_ATTACH
results["unshare"] = c_call(libc.unshare, ctypes.c_int(0x10000000))  # CLONE_NEWUSER
results["mount"] = c_call(libc.mount, b"none", b"/nonexistent-seccomp-probe", b"tmpfs", ctypes.c_ulong(0), None)
class Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buffer = ctypes.create_string_buffer(16)
iov = Iovec(ctypes.addressof(buffer), 16)
results["process_vm_readv"] = c_call(libc.process_vm_readv, os.getpid(), ctypes.byref(iov), ctypes.c_ulong(1),
                                     ctypes.byref(iov), ctypes.c_ulong(1), ctypes.c_ulong(0))
results["bpf"] = c_call(libc.syscall, nr("bpf"), 0, None, 0)
results["io_uring_setup"] = c_call(libc.syscall, nr("io_uring_setup"), 1, None)
results["keyctl"] = c_call(libc.syscall, nr("keyctl"), 0, 0)
results["setns"] = c_call(libc.syscall, nr("setns"), -1, 0)
# CLONE_NEWUSER | CLONE_THREAD: a namespace flag; without a filter the kernel says EINVAL
results["clone_new_namespace"] = c_call(libc.syscall, nr("clone"), ctypes.c_ulong(0x10000000 | 0x00010000), None,
                                        None, None, ctypes.c_ulong(0))
results["x32_getpid"] = c_call(libc.syscall, ctypes.c_long(0x40000000 | 39))
results["getpid"] = "ok" if libc.syscall(ctypes.c_long(39)) == os.getpid() else "wrong"
"""


def run_python(script: str, timeout: float = 180, env: dict | None = None) -> dict:
    """Run ``script`` in a fresh interpreter; its last line of output is a JSON object."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=REPO)  # `import autograder` from the top folder
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    *printed, last = done.stdout.strip().splitlines()
    result = json.loads(last)
    result["_printed"] = printed
    result["_stderr"] = done.stderr
    return result


# --- the programs, checked by running them on a small classic-BPF interpreter ---------

def evaluate(program: bytes, name_or_nr, args=(0,) * 6, arch=seccomp.AUDIT_ARCH_X86_64) -> int:
    """What the kernel would return for this call: a SECCOMP_RET_* value."""
    nr = seccomp.NR[name_or_nr] if isinstance(name_or_nr, str) else name_or_nr
    data = struct.pack("=iIQ6Q", nr, arch, 0, *args)
    code = [struct.unpack_from("=HBBI", program, at) for at in range(0, len(program), 8)]
    pc, accumulator = 0, 0
    for _ in range(len(code)):  # forward jumps only: never more steps than instructions
        op, jt, jf, k = code[pc]
        if op == seccomp.BPF_LD | seccomp.BPF_W | seccomp.BPF_ABS:
            (accumulator,) = struct.unpack_from("=I", data, k)
            pc += 1
        elif op == seccomp.BPF_JMP | seccomp.BPF_JEQ | seccomp.BPF_K:
            pc += 1 + (jt if accumulator == k else jf)
        elif op == seccomp.BPF_JMP | seccomp.BPF_JSET | seccomp.BPF_K:
            pc += 1 + (jt if accumulator & k else jf)
        elif op == seccomp.BPF_RET | seccomp.BPF_K:
            return k
        else:
            raise AssertionError(f"unexpected opcode {op:#x} at {pc}")
    raise AssertionError("ran off the end of the program")


ALLOW = seccomp.SECCOMP_RET_ALLOW
EPERM = seccomp.SECCOMP_RET_ERRNO | 1
ENOSYS = seccomp.SECCOMP_RET_ERRNO | 38
FORK_FLAGS = 0x01000000 | 0x00200000 | 17  # CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD, as glibc's fork
THREAD_FLAGS = 0x003D0F00  # CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT_SETTID|CHILD_CLEARTID


def test_syscall_table_agrees_with_the_system_header():
    header = Path(seccomp.UNISTD_64)
    if not header.exists():
        pytest.skip(f"{header} is not installed")
    numbers = {}
    for line in header.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "#define" and parts[1].startswith("__NR_"):
            numbers[parts[1][5:]] = int(parts[2])
    assert {name: numbers.get(name) for name in seccomp.X86_64_SYSCALLS} == seccomp.X86_64_SYSCALLS
    assert seccomp.read_unistd() == numbers
    assert seccomp.NR == seccomp.X86_64_SYSCALLS
    every_name = {*seccomp.SANDBOX_DENY, *seccomp.WORKER_DENY,
                  *(rule[0] for rule in seccomp.SANDBOX_ARGUMENTS + seccomp.WORKER_ARGUMENTS)}
    assert every_name <= set(seccomp.X86_64_SYSCALLS)


def test_sandbox_program_denies_the_list_and_allows_the_rest():
    program = seccomp.sandbox_filter()
    assert len(program) % 8 == 0
    for name in ("ptrace", "process_vm_readv", "process_vm_writev", "unshare", "setns", "mount", "umount2",
                 "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
                 "mount_setattr", "bpf", "keyctl", "add_key", "request_key", "perf_event_open", "userfaultfd",
                 "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
                 "open_by_handle_at", "name_to_handle_at", "iopl", "ioperm", "swapon", "swapoff", "reboot", "acct",
                 "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "quotactl", "syslog", "vhangup",
                 "personality", "io_uring_setup", "io_uring_enter", "io_uring_register", "fanotify_init",
                 "lookup_dcookie", "pidfd_getfd", "kcmp"):
        assert evaluate(program, name) == EPERM, name
    assert evaluate(program, "clone3") == ENOSYS  # glibc falls back to clone, whose flags can be read
    for allowed in ("kill", "execve", "fork", "vfork", "rt_sigaction", "setitimer", "fcntl", "prctl", "seccomp"):
        assert evaluate(program, allowed) == ALLOW, allowed
    for number in (0, 1, 3, 9, 202, 231, 334, 1000):  # read, write, close, mmap, futex, exit_group, rseq, unknown
        assert evaluate(program, number) == ALLOW
    assert evaluate(program, "clone", (FORK_FLAGS, 0, 0, 0, 0, 0)) == ALLOW  # the zygote forks workers
    assert evaluate(program, "clone", (THREAD_FLAGS, 0, 0, 0, 0, 0)) == ALLOW
    for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000):
        assert evaluate(program, "clone", (FORK_FLAGS | flag, 0, 0, 0, 0, 0)) == EPERM, hex(flag)
    assert evaluate(program, 39 | seccomp.X32_SYSCALL_BIT) == EPERM  # getpid through the x32 ABI
    assert evaluate(program, 20, arch=0x40000003) == EPERM  # getpid through int 0x80 (AUDIT_ARCH_I386)


def test_worker_program_adds_threads_processes_signals_and_timers():
    program = seccomp.worker_filter()
    sandbox = seccomp.sandbox_filter()
    for name in seccomp.SANDBOX_DENY:
        assert evaluate(program, name) == evaluate(sandbox, name), name
    for name in ("fork", "vfork", "execve", "execveat", "kill", "tkill", "tgkill", "rt_sigqueueinfo",
                 "rt_tgsigqueueinfo", "pidfd_send_signal", "setitimer", "alarm", "timer_create", "rt_sigaction",
                 "mq_notify"):
        assert evaluate(program, name) == EPERM, name
    for flags in (0, FORK_FLAGS, THREAD_FLAGS):
        assert evaluate(program, "clone", (flags, 0, 0, 0, 0, 0)) == EPERM
    assert evaluate(program, "clone3") == ENOSYS
    # fcntl: only the commands that choose who gets SIGIO and which signal it is
    for command in (8, 10, 15, (1 << 32) | 10):  # the kernel reads cmd as 32 bits, so high bits change nothing
        assert evaluate(program, "fcntl", (3, command, 10, 0, 0, 0)) == EPERM, hex(command)
    for command in (1, 2, 3, 4, 0x406):  # F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC
        assert evaluate(program, "fcntl", (3, command, 0, 0, 0, 0)) == ALLOW
    assert evaluate(program, "prctl", (1, 10, 0, 0, 0, 0)) == EPERM  # PR_SET_PDEATHSIG
    assert evaluate(program, "prctl", (15, 0, 0, 0, 0, 0)) == ALLOW  # PR_SET_NAME
    for name in ("rt_sigprocmask", "rt_sigreturn", "sigaltstack", "nanosleep", "clock_nanosleep", "select",
                 "poll", "sendto", "recvfrom", "futex", "mmap", "openat", "exit_group"):
        if name in seccomp.read_unistd():
            assert evaluate(program, seccomp.read_unistd()[name]) == ALLOW, name


def test_assembler_checks_its_jumps():
    bpf = seccomp.Assembler()
    bpf.load_nr()
    bpf.jump_if_equal(1, then="far")
    for _ in range(256):
        bpf.ret(seccomp.SECCOMP_RET_ALLOW)
    bpf.label("far")
    bpf.ret(EPERM)
    with pytest.raises(ValueError, match="out of range"):
        bpf.assemble()
    bpf = seccomp.Assembler()
    bpf.jump_if_equal(1, then="nowhere")
    with pytest.raises(ValueError, match="undefined"):
        bpf.assemble()
    with pytest.raises(ValueError):
        seccomp.Assembler().load_arg(6)


# --- installed, in fresh processes -----------------------------------------------------

WORKER_SCRIPT = PRELUDE + """
import torch
torch.set_num_threads(1)
torch.set_num_interop_threads(1)
import fcntl, select, signal, socket, subprocess, tempfile, threading, time
from autograder.sandboxed import seccomp
seccomp.install(seccomp.worker_filter())
results["status"] = seccomp.status()

# what an attacker tries
results["thread"] = outcome(lambda: threading.Thread(target=lambda: None).start())
results["fork"] = outcome(os.fork)
results["subprocess"] = outcome(lambda: subprocess.run(["true"]))
results["exec"] = outcome(lambda: os.execv("/bin/true", ["true"]))
results["kill_self"] = outcome(lambda: os.kill(os.getpid(), signal.SIGUSR1))
results["kill_parent"] = outcome(lambda: os.kill(os.getppid(), 0))
results["pthread_kill"] = outcome(lambda: signal.pthread_kill(threading.get_ident(), signal.SIGUSR1))
results["tkill"] = c_call(libc.syscall, nr("tkill"), threading.get_native_id(), 0)
results["rt_sigqueueinfo"] = c_call(libc.syscall, nr("rt_sigqueueinfo"), os.getpid(), 0, None)
pidfd = os.pidfd_open(os.getpid())
results["pidfd_send_signal"] = outcome(lambda: signal.pidfd_send_signal(pidfd, signal.SIGUSR1))
results["signal_handler"] = outcome(lambda: signal.signal(signal.SIGUSR1, lambda *_: None))
results["setitimer"] = outcome(lambda: signal.setitimer(signal.ITIMER_REAL, 100))
results["alarm"] = c_call(libc.syscall, nr("alarm"), 100)
timer = ctypes.c_long()
results["timer_create"] = c_call(libc.syscall, nr("timer_create"), 1, None, ctypes.byref(timer))
results["mq_notify"] = c_call(libc.syscall, nr("mq_notify"), -1, None)
reader, writer = os.pipe()
results["fcntl_setsig"] = outcome(lambda: fcntl.fcntl(reader, 10, signal.SIGUSR1))  # F_SETSIG
results["fcntl_setown"] = outcome(lambda: fcntl.fcntl(reader, 8, os.getpid()))  # F_SETOWN
results["fcntl_setsig_high_bits"] = c_call(libc.syscall, nr("fcntl"), reader, ctypes.c_ulong((1 << 32) | 10), 10)
results["pdeathsig"] = c_call(libc.prctl, 1, ctypes.c_ulong(signal.SIGUSR1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                              ctypes.c_ulong(0))
results["clone3"] = c_call(libc.syscall, nr("clone3"), None, ctypes.c_ulong(0))
""" + DENIED_EVERYWHERE + """

# what grading does
def torch_work():
    torch.manual_seed(0)
    x = torch.randn(4, 8, requires_grad=True)
    (torch.nn.Linear(8, 8)(x).tanh().sum()).backward()
    assert x.grad is not None and x.grad.shape == (4, 8)
    attention = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    out, weights = attention(x[None], x[None], x[None])
    out.sum().backward()
    a = torch.randn(64, 64)
    assert torch.allclose(torch.matmul(a, a), (a[:, :, None] * a[None]).sum(1), atol=1e-3)
    b = a.to(torch.bfloat16)
    assert torch.matmul(b, b).dtype == torch.bfloat16
    h = a.half()
    assert torch.isfinite((h * 2 + h.sin()).float()).all() and torch.matmul(h, h).dtype == torch.float16
    torch.nn.functional.layer_norm(x.detach() * 2, (8,)).sum().item()
    return f"ok {out.shape[-1]} {weights.shape[-1]}"
results["torch"] = outcome(torch_work)

def files():
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "notes.txt")
    with open(path, "w") as f:
        f.write("hello")
    with open(path) as f:
        assert f.read() == "hello"
    os.remove(path)
    os.rmdir(folder)
results["files"] = outcome(files)

def sleep():
    start = time.monotonic()
    time.sleep(0.01)
    assert time.monotonic() - start >= 0.009
results["sleep"] = outcome(sleep)

def sockets():
    a, b = socket.socketpair()
    a.sendall(b"ping")
    assert select.select([b], [], [], 1)[0] == [b]
    assert b.recv(16) == b"ping"
    a.close()
    b.close()
results["socketpair"] = outcome(sockets)
results["fcntl_getfl"] = outcome(lambda: "ok" if fcntl.fcntl(reader, fcntl.F_GETFL) >= 0 else "bad")
results["getpid"] = "ok" if libc.syscall(ctypes.c_long(39)) == os.getpid() else "wrong"
results["torch_threads"] = torch.get_num_threads()
results["threads_at_end"] = len(os.listdir("/proc/self/task"))
print("printed under the filter")
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def worker():
    return run_python(WORKER_SCRIPT)


def test_worker_filter_is_installed(worker):
    assert worker["status"] == "Seccomp: 2"


def test_worker_cannot_start_threads_or_processes(worker):
    assert worker["thread"].startswith("RuntimeError") and "can't start new thread" in worker["thread"]
    assert worker["fork"].startswith("PermissionError:EPERM")
    assert worker["subprocess"].startswith("PermissionError:EPERM")
    assert worker["exec"].startswith("PermissionError:EPERM")
    assert worker["clone_new_namespace"] == "EPERM"
    assert worker["clone3"] == "ENOSYS"


def test_worker_cannot_signal_or_set_handlers_or_timers(worker):
    for key in ("kill_self", "kill_parent", "pthread_kill", "pidfd_send_signal", "fcntl_setsig", "fcntl_setown"):
        assert worker[key].startswith("PermissionError:EPERM"), (key, worker[key])
    assert worker["signal_handler"].startswith(("OSError:EPERM", "PermissionError:EPERM")), worker["signal_handler"]
    assert worker["setitimer"].startswith("itimer_error:EPERM"), worker["setitimer"]  # signal.ItimerError
    for key in ("tkill", "rt_sigqueueinfo", "alarm", "timer_create", "mq_notify", "fcntl_setsig_high_bits",
                "pdeathsig"):
        assert worker[key] == "EPERM", (key, worker[key])


def test_worker_cannot_debug_mount_or_unshare(worker):
    for key in ("ptrace", "unshare", "mount", "process_vm_readv", "bpf", "io_uring_setup", "keyctl", "setns",
                "x32_getpid"):
        assert worker[key] == "EPERM", (key, worker[key])


def test_grading_keeps_working_under_the_worker_filter(worker):
    assert worker["torch"] == "ok 8 4", worker["torch"]
    for key in ("files", "sleep", "socketpair", "fcntl_getfl", "getpid"):
        assert worker[key] == "ok", (key, worker[key])
    assert worker["_printed"] == ["printed under the filter"]
    assert worker["torch_threads"] == 1
    assert worker["threads_at_end"] == 1


FORKED_WORKER_SCRIPT = PRELUDE + """
import torch
torch.set_num_threads(1)
torch.set_num_interop_threads(1)
import numpy
from autograder.sandboxed import seccomp
seccomp.install(seccomp.sandbox_filter())  # as bubblewrap does for the zygote
x = torch.randn(4, 8, requires_grad=True)
torch.nn.Linear(8, 8)(x).sum().backward()  # warm up, as the zygote does
read_end, write_end = os.pipe()
pid = os.fork()
if pid == 0:  # the worker: one thread, forked from a zygote that has run torch
    os.close(read_end)
    seccomp.install(seccomp.worker_filter())
    found = {"status": seccomp.status()}
    found["fork"] = outcome(os.fork)
    x = torch.randn(16, 32, requires_grad=True)
    attention = torch.nn.MultiheadAttention(32, 4, batch_first=True)
    attention(x[None], x[None], x[None])[0].pow(2).mean().backward()
    found["grad"] = bool(x.grad.abs().sum() > 0)
    a = numpy.random.rand(256, 256)
    found["numpy"] = bool(numpy.isfinite(a @ a).all())
    found["threads"] = len(os.listdir("/proc/self/task"))
    os.write(write_end, json.dumps(found).encode())
    os._exit(0)
os.close(write_end)
results["worker"] = json.loads(os.read(read_end, 65536))
results["worker_exit"] = os.waitpid(pid, 0)[1]
results["zygote_status"] = seccomp.status()
print(json.dumps(results))
"""


def test_a_forked_worker_of_a_zygote_under_the_sandbox_filter():
    # numpy's OpenBLAS starts its threads again on a large product after a fork; if it can't,
    # it calls exit() and deadlocks in its own clean-up. The sandbox must start Python with
    # OPENBLAS_NUM_THREADS=1, as here.
    found = run_python(FORKED_WORKER_SCRIPT, env={"OPENBLAS_NUM_THREADS": "1"})
    assert found["worker_exit"] == 0
    assert found["zygote_status"] == "Seccomp: 2"
    worker = found["worker"]
    assert worker == {"status": "Seccomp: 2", "fork": worker["fork"], "grad": True, "numpy": True, "threads": 1}
    assert worker["fork"].startswith("PermissionError:EPERM")


SANDBOX_SCRIPT = PRELUDE + """
import subprocess, threading
from autograder.sandboxed import seccomp
seccomp.install(seccomp.sandbox_filter())
results["status"] = seccomp.status()
pid = os.fork()
if pid == 0:
    os._exit(7)
results["fork_exit"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
results["subprocess"] = subprocess.run(["true"]).returncode  # posix_spawn/vfork after clone3 says ENOSYS
box = []
thread = threading.Thread(target=lambda: box.append(1))
thread.start()
thread.join()
results["thread"] = box
""" + DENIED_EVERYWHERE + """
print(json.dumps(results))
"""


def test_sandbox_filter_still_forks_but_denies_debugging_and_namespaces():
    found = run_python(SANDBOX_SCRIPT)
    assert found["status"] == "Seccomp: 2"
    assert found["fork_exit"] == 7 and found["subprocess"] == 0 and found["thread"] == [1]
    for key in ("ptrace", "unshare", "mount", "process_vm_readv", "bpf", "io_uring_setup", "keyctl", "setns",
                "clone_new_namespace", "x32_getpid"):
        assert found[key] == "EPERM", (key, found[key])
    assert found["getpid"] == "ok"


INT80_SCRIPT = PRELUDE + """
import mmap
from autograder.sandboxed import seccomp
if sys.argv[1:] == ["filtered"]:
    seccomp.install(seccomp.sandbox_filter())
# mov eax, 20 (getpid in the i386 table); int 0x80; ret
page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3]))
function = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
print(json.dumps({"result": function(), "pid": os.getpid()}))
"""


def test_the_i386_abi_is_denied():
    plain = subprocess.run([sys.executable, "-c", INT80_SCRIPT], capture_output=True, text=True, timeout=60, cwd=REPO)
    if plain.returncode != 0 or json.loads(plain.stdout)["result"] != json.loads(plain.stdout)["pid"]:
        pytest.skip("this kernel does not run i386 system calls from 64-bit processes")
    filtered = subprocess.run([sys.executable, "-c", INT80_SCRIPT, "filtered"], capture_output=True, text=True,
                              timeout=60, cwd=REPO)
    assert filtered.returncode == 0, filtered.stderr
    assert json.loads(filtered.stdout)["result"] == -1  # -EPERM


BWRAP_SCRIPT = PRELUDE + """
from autograder.sandboxed import seccomp
results["status"] = seccomp.status()
pid = os.fork()
if pid == 0:
    os._exit(3)
results["fork_exit"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
""" + DENIED_EVERYWHERE + """
print(json.dumps(results))
"""


def test_inside_bubblewrap(bubblewrap):
    read_end, write_end = os.pipe()
    os.write(write_end, seccomp.sandbox_filter())  # well below a pipe's buffer
    os.close(write_end)
    try:
        done = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
                               "--seccomp", str(read_end), sys.executable, "-c", BWRAP_SCRIPT],
                              pass_fds=(read_end,), capture_output=True, text=True, timeout=120, cwd=REPO)
    finally:
        os.close(read_end)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["status"] == "Seccomp: 2"
    assert found["fork_exit"] == 3
    for key in ("unshare", "ptrace", "mount", "process_vm_readv", "setns", "clone_new_namespace"):
        assert found[key] == "EPERM", (key, found[key])


def test_status_reads_the_seccomp_line():
    assert seccomp.status().startswith("Seccomp: ")
