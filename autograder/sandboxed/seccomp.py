"""Seccomp filters for the sandbox and its workers, written as classic BPF by hand.

Runs inside the sandbox; imports only the standard library (libseccomp is not
available). Two programs:

- ``sandbox_filter()``: for everything bubblewrap starts (bwrap reads it with
  ``--seccomp FD``). Denies with EPERM the system calls a grading sandbox never needs:
  debugging other processes, new namespaces, mounts, kernel keyrings, BPF, modules,
  clocks, io_uring and the like. The zygote lives under it and still forks workers,
  so ``clone`` is allowed unless its flags ask for a new namespace.
- ``worker_filter()``: the sandbox filter plus, for a worker that has dropped its
  privileges: no new threads or processes, no programs, no signals to anyone
  (itself included), no timers that deliver signals and no new signal handlers.

``install(program)`` sets ``PR_SET_NO_NEW_PRIVS`` and loads a program; a filter can
never be removed, only stacked with further ones (the kernel applies the strictest
answer of all of them).

Program layout (``build``), one comparison per line::

          ld   [arch]                       ; seccomp_data.arch
          jeq  AUDIT_ARCH_X86_64, native    ; i386 via int 0x80 and anything else:
          ret  ERRNO(EPERM)                 ;   denied outright
  native: ld   [nr]                         ; seccomp_data.nr
          jset X32_SYSCALL_BIT, deny_EPERM  ; the x32 ABI (nr | 0x40000000)
          jeq  __NR_ptrace, deny_EPERM      ; one line per syscall denied whatever its
          jeq  __NR_clone3, deny_ENOSYS     ;   arguments ...
          jeq  __NR_clone, args_clone       ; ... and one per syscall with argument rules
          ret  ALLOW                        ; everything else
  args_clone:
          ld   [args[0] low word]
          jset CLONE_NEW*, deny_EPERM
          ret  ALLOW
  deny_EPERM:  ret ERRNO(EPERM)             ; one return per errno in use
  deny_ENOSYS: ret ERRNO(ENOSYS)

Arguments are compared on their low 32-bit word only, and only for arguments the
kernel itself truncates to 32 bits (``int``/``unsigned int`` parameters, and clone's
flags, which the kernel reads with ``lower_32_bits``): a check that also demanded a
zero high word could be sidestepped by setting high bits the kernel then ignores.
"""

from __future__ import annotations

import ctypes
import errno as _errno
import os
import platform
import struct

# --- classic BPF (linux/bpf_common.h, linux/filter.h) -------------------------------
BPF_LD, BPF_JMP, BPF_RET = 0x00, 0x05, 0x06  # instruction classes
BPF_W, BPF_ABS = 0x00, 0x20  # 32-bit word, at an absolute offset in seccomp_data
BPF_K = 0x00  # compare with / return the constant k
BPF_JEQ, BPF_JSET = 0x10, 0x40  # jump if A == k, if A & k
BPF_MAXINSNS = 4096
INSTRUCTION = struct.Struct("=HBBI")  # struct sock_filter {u16 code; u8 jt; u8 jf; u32 k}, native order

# --- seccomp (linux/seccomp.h, linux/audit.h) ----------------------------------------
SECCOMP_RET_ERRNO = 0x00050000  # low 16 bits: the errno the call returns
SECCOMP_RET_ALLOW = 0x7FFF0000
AUDIT_ARCH_X86_64 = 0xC000003E  # EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE
X32_SYSCALL_BIT = 0x40000000

# struct seccomp_data {int nr; u32 arch; u64 instruction_pointer; u64 args[6];}
OFFSET_NR, OFFSET_ARCH, OFFSET_ARGS = 0, 4, 16

# --- prctl (linux/prctl.h) -----------------------------------------------------------
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_SET_MODE_FILTER = 1  # seccomp(2) operation
SECCOMP_FILTER_FLAG_TSYNC = 1  # ... applied to every thread of the process at once

# --- argument values -----------------------------------------------------------------
CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x10000000, 0x20000000, 0x40000000
CLONE_NEW_NAMESPACE = (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC
                       | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET)  # CLONE_NEWTIME only via clone3/unshare
F_SETOWN, F_SETSIG, F_SETOWN_EX = 8, 10, 15  # fcntl: who gets SIGIO, and which signal it is

EPERM, ENOSYS = _errno.EPERM, _errno.ENOSYS

# x86_64 system call numbers, checked against asm/unistd_64.h (tests/test_seccomp.py
# compares them with the header whenever it is installed).
X86_64_SYSCALLS = {
    "close": 3, "ioctl": 16, "dup2": 33, "dup3": 292, "close_range": 436, "rt_sigaction": 13, "alarm": 37, "setitimer": 38, "clone": 56, "fork": 57, "vfork": 58,
    "execve": 59, "kill": 62, "fcntl": 72, "ptrace": 101, "syslog": 103, "rt_sigqueueinfo": 129,
    "personality": 135, "vhangup": 153, "modify_ldt": 154, "pivot_root": 155, "prctl": 157,
    "adjtimex": 159, "chroot": 161, "acct": 163, "settimeofday": 164, "mount": 165, "umount2": 166,
    "swapon": 167, "swapoff": 168, "reboot": 169, "iopl": 172, "ioperm": 173, "init_module": 175,
    "delete_module": 176, "quotactl": 179, "tkill": 200, "lookup_dcookie": 212, "timer_create": 222,
    "clock_settime": 227, "tgkill": 234, "mq_notify": 244, "kexec_load": 246, "add_key": 248,
    "request_key": 249, "keyctl": 250, "unshare": 272, "rt_tgsigqueueinfo": 297, "perf_event_open": 298,
    "fanotify_init": 300, "name_to_handle_at": 303, "open_by_handle_at": 304, "clock_adjtime": 305,
    "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "finit_module": 313,
    "seccomp": 317, "kexec_file_load": 320, "bpf": 321, "execveat": 322, "userfaultfd": 323, "pidfd_send_signal": 424,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "clone3": 435,
    "pidfd_getfd": 438, "mount_setattr": 442,
}
UNISTD_64 = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"


def read_unistd(path: str = UNISTD_64) -> dict[str, int]:
    """``{name: number}`` from the lines ``#define __NR_name number`` of a unistd_64.h; {} if unreadable."""
    numbers = {}
    try:
        with open(path) as header:
            for line in header:
                parts = line.split()
                if len(parts) == 3 and parts[0] == "#define" and parts[1].startswith("__NR_") and parts[2].isdigit():
                    numbers[parts[1][len("__NR_"):]] = int(parts[2])
    except OSError:
        pass
    return numbers


def _numbers() -> dict[str, int]:
    header = read_unistd()
    return {name: header.get(name, number) for name, number in X86_64_SYSCALLS.items()}


NR = _numbers()  # the numbers the filters use: the system header's where it is installed

# --- policies: {syscall: errno} denied whatever the arguments, and argument rules ------
SANDBOX_DENY = {name: EPERM for name in (
    # other processes' memory, debugging, comparing kernel objects
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    # namespaces and the file system tree
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "open_by_handle_at",
    "name_to_handle_at", "fanotify_init", "lookup_dcookie", "quotactl", "swapon", "swapoff", "acct",
    # kernel attack surface a grader never needs
    "bpf", "keyctl", "add_key", "request_key", "perf_event_open", "userfaultfd", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "modify_ldt", "personality", "iopl", "ioperm",
    # the machine itself
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "syslog", "vhangup",
)}
# clone3 passes its flags in memory, where a filter cannot read them: ENOSYS makes glibc
# (threads, posix_spawn) fall back to clone, whose flags can be checked.
SANDBOX_DENY["clone3"] = ENOSYS

# (syscall, argument index, "any_bit" | "equals", values, errno): deny when the low
# 32-bit word of the argument has any of the bits / equals one of the values.
SANDBOX_ARGUMENTS = [
    ("clone", 0, "any_bit", (CLONE_NEW_NAMESPACE,), EPERM),  # fork yes, new namespaces no
]

WORKER_DENY = {name: EPERM for name in (
    # no new threads or processes, no programs
    "clone", "fork", "vfork", "execve", "execveat",
    # no signals to anyone, itself included
    "kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_send_signal",
    # no timers or notifications that deliver signals, no handlers to deliver them to
    "setitimer", "alarm", "timer_create", "mq_notify", "rt_sigaction",
)}
WORKER_DENY["clone3"] = ENOSYS  # glibc then tries clone, which fails with EPERM

WORKER_ARGUMENTS = [
    ("fcntl", 1, "equals", (F_SETOWN, F_SETSIG, F_SETOWN_EX), EPERM),  # SIGIO with a chosen signal
    ("prctl", 0, "equals", (PR_SET_PDEATHSIG,), EPERM),  # a signal on the zygote's exit
]


# --- the assembler ------------------------------------------------------------------
class Assembler:
    """Classic BPF with labels: conditional jumps name their targets, ``assemble`` resolves them."""

    def __init__(self) -> None:
        self.code: list[tuple[int, object, object, int]] = []  # (opcode, jt, jf, k); jt/jf: label or None
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        if name in self.labels:
            raise ValueError(f"label {name!r} defined twice")
        self.labels[name] = len(self.code)

    def load(self, offset: int) -> None:
        """A = the 32-bit word at ``offset`` in struct seccomp_data."""
        self.code.append((BPF_LD | BPF_W | BPF_ABS, None, None, offset))

    def load_nr(self) -> None:
        self.load(OFFSET_NR)

    def load_arch(self) -> None:
        self.load(OFFSET_ARCH)

    def load_arg(self, index: int, word: str = "low") -> None:
        """A = the low or high 32-bit word of ``args[index]`` (x86_64 is little-endian)."""
        if not 0 <= index < 6 or word not in ("low", "high"):
            raise ValueError(f"no argument {index} {word}")
        self.load(OFFSET_ARGS + 8 * index + (4 if word == "high" else 0))

    def jump_if_equal(self, k: int, then: str | None = None, otherwise: str | None = None) -> None:
        """If A == k go to ``then``, else to ``otherwise``; None: the next instruction."""
        self.code.append((BPF_JMP | BPF_JEQ | BPF_K, then, otherwise, k))

    def jump_if_any_bit(self, mask: int, then: str | None = None, otherwise: str | None = None) -> None:
        """If A & mask != 0 go to ``then``, else to ``otherwise``."""
        self.code.append((BPF_JMP | BPF_JSET | BPF_K, then, otherwise, mask))

    def ret(self, action: int) -> None:
        self.code.append((BPF_RET | BPF_K, None, None, action))

    def assemble(self) -> bytes:
        """The ``struct sock_filter`` array; jumps only go forward, at most 255 instructions."""
        out = []
        for at, (code, jt, jf, k) in enumerate(self.code):
            offsets = []
            for target in (jt, jf):
                if target is None:
                    offsets.append(0)
                    continue
                if target not in self.labels:
                    raise ValueError(f"undefined label {target!r}")
                offset = self.labels[target] - (at + 1)
                if not 0 <= offset <= 255:
                    raise ValueError(f"jump from {at} to {target!r} is out of range ({offset})")
                offsets.append(offset)
            out.append(INSTRUCTION.pack(code, offsets[0], offsets[1], k & 0xFFFFFFFF))
        if not out or len(out) > BPF_MAXINSNS:
            raise ValueError(f"{len(out)} instructions")
        return b"".join(out)


def errno_action(number: int) -> int:
    return SECCOMP_RET_ERRNO | (number & 0xFFFF)


def build(deny: dict[str, int], arguments=()) -> bytes:
    """The program for ``deny`` ({syscall: errno}) and argument rules (see SANDBOX_ARGUMENTS).

    A syscall in ``deny`` is denied whatever its arguments, so argument rules for it are
    dropped. Everything not named is allowed.
    """
    rules: dict[str, list] = {}
    for name, index, test, values, number in arguments:
        if name not in deny:
            rules.setdefault(name, []).append((index, test, values, number))
    errnos = sorted({EPERM, *deny.values(), *(rule[3] for entry in rules.values() for rule in entry)})
    deny_label = {number: f"deny_{number}" for number in errnos}

    bpf = Assembler()
    bpf.load_arch()
    bpf.jump_if_equal(AUDIT_ARCH_X86_64, then="native")
    bpf.ret(errno_action(EPERM))  # another ABI: i386 through int 0x80, whose numbers differ
    bpf.label("native")
    bpf.load_nr()
    bpf.jump_if_any_bit(X32_SYSCALL_BIT, then=deny_label[EPERM])
    for name, number in deny.items():
        bpf.jump_if_equal(NR[name], then=deny_label[number])
    for name in rules:
        bpf.jump_if_equal(NR[name], then=f"args_{name}")
    bpf.ret(SECCOMP_RET_ALLOW)
    for name, entry in rules.items():
        bpf.label(f"args_{name}")
        for index, test, values, number in entry:
            bpf.load_arg(index, "low")
            for value in values:
                if test == "equals":
                    bpf.jump_if_equal(value, then=deny_label[number])
                elif test == "any_bit":
                    bpf.jump_if_any_bit(value, then=deny_label[number])
                else:
                    raise ValueError(f"unknown argument test {test!r}")
        bpf.ret(SECCOMP_RET_ALLOW)
    for number in errnos:
        bpf.label(deny_label[number])
        bpf.ret(errno_action(number))
    return bpf.assemble()


def sandbox_filter() -> bytes:
    """The program for the whole sandbox, as bubblewrap's ``--seccomp FD`` reads it."""
    return build(SANDBOX_DENY, SANDBOX_ARGUMENTS)


def worker_filter(evidence_fd: int | None = None) -> bytes:
    """The sandbox's program plus no threads, processes, programs, signals, timers or handlers; and, with
    ``evidence_fd``, that descriptor kept as it is: it cannot be closed, replaced (``dup2``, ``dup3``),
    made non-blocking or otherwise changed (``fcntl``, ``ioctl``). ``close_range`` answers ENOSYS, so that
    Python closes descriptors one by one, where the rule on ``close`` applies."""
    deny, arguments = {**SANDBOX_DENY, **WORKER_DENY}, SANDBOX_ARGUMENTS + WORKER_ARGUMENTS
    if evidence_fd is not None:
        deny["close_range"] = ENOSYS
        arguments = arguments + [("close", 0, "equals", (evidence_fd,), EPERM),
                                 ("dup2", 1, "equals", (evidence_fd,), EPERM),
                                 ("dup3", 1, "equals", (evidence_fd,), EPERM),
                                 ("fcntl", 0, "equals", (evidence_fd,), EPERM),
                                 ("ioctl", 0, "equals", (evidence_fd,), EPERM)]
    return build(deny, arguments)


# --- installing ---------------------------------------------------------------------
class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def supported() -> bool:
    """True on x86_64 Linux with a 64-bit Python, the only ABI these programs are written for."""
    return platform.system() == "Linux" and platform.machine() == "x86_64" and struct.calcsize("P") == 8


# Loaded now, in the zygote: a worker that loads it later would show up as a ctypes.dlopen.
_libc = ctypes.CDLL(None, use_errno=True) if supported() else None


def install(program: bytes) -> None:
    """Load ``program`` for every thread of this process and its future children.

    ``prctl(PR_SET_NO_NEW_PRIVS)``, then ``seccomp(SECCOMP_SET_MODE_FILTER,
    SECCOMP_FILTER_FLAG_TSYNC)``: unlike ``prctl(PR_SET_SECCOMP)``, which filters the
    calling thread only, this also covers threads started earlier (numpy's OpenBLAS
    starts some when it is imported). Raises OSError if the kernel refuses.
    """
    if not supported():
        raise OSError(_errno.ENOSYS, "seccomp filters here are written for x86_64 Linux only")
    if not program or len(program) % INSTRUCTION.size or len(program) // INSTRUCTION.size > BPF_MAXINSNS:
        raise ValueError("not a classic BPF program")
    prctl, syscall = _libc.prctl, _libc.syscall
    prctl.restype = ctypes.c_int
    syscall.restype = ctypes.c_long
    if prctl(ctypes.c_int(PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0),
             ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"PR_SET_NO_NEW_PRIVS: {os.strerror(number)}")
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // INSTRUCTION.size, ctypes.cast(buffer, ctypes.c_void_p))
    result = syscall(ctypes.c_long(NR["seccomp"]), ctypes.c_uint(SECCOMP_SET_MODE_FILTER),
                     ctypes.c_uint(SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(fprog))
    if result < 0:
        number = ctypes.get_errno()
        raise OSError(number, f"seccomp(SECCOMP_SET_MODE_FILTER): {os.strerror(number)}")
    if result > 0:  # the id of a thread that could not take the filter (it has a different one)
        raise OSError(_errno.EBUSY, f"seccomp: thread {result} could not be synchronised")


def status() -> str:
    """The ``Seccomp:`` line of /proc/self/status, whitespace collapsed ("Seccomp: 2"); "" if absent."""
    try:
        with open("/proc/self/status") as lines:
            for line in lines:
                if line.startswith("Seccomp:"):
                    return " ".join(line.split())
    except OSError:
        pass
    return ""
