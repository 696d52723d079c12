"""Whatever frames a worker writes, the grading process stays small: the wire's bounds hold in sum.

Student code can find the worker's socket and write any bytes to it (``HOSTILE_FRAMES`` in
``test_autograder_attacks.py``), so each frame here is one a hostile worker could send. Each is
written to the trusted end of the wire, a real ``Worker.request``, through a socketpair. The
request runs in a child forked, frame by frame, from one fresh process that has imported what a
grading process imports. What the child adds to its resident memory while it reads the frame
(VmHWM, reset just before the request, less VmRSS then), on top of that fresh process's own
resident memory, is the peak a grading process would reach. One run of that process measures every
frame (a module-scoped fixture).
"""

import json
import os
import subprocess
import sys

import pytest

from autograder.sandboxed import wire
from tests.grading import REPO

pytestmark = pytest.mark.slow  # a fresh process that imports torch, then one fork per frame

PEAK_LIMIT_MB = 300  # issue 21: a grading process stays under this, whatever a worker sends
# What reading one frame may add: the frame's buffer, its tensors (8 MiB each at most) and the Python values of a
# header at its limit (a 7 MiB tensor costs about 19 MB, a header full of small values up to 30 MB). The old decoder
# spent 348 MB on 48 tensors over one range, 300 MB on 48 overlapping ranges and 217 MB on a frame-long trailer.
GROWTH_LIMIT_MB = 40
BODY = 7 * 2**20  # a body near the frame's limit


def on_socket(data: bytes) -> bytes:
    """``data`` with its length in front, as the worker frames it, without the encoder's checks."""
    return len(data).to_bytes(4, "big") + data


def frame(tree, body: bytes = b"") -> bytes:
    return header_text(json.dumps(tree, separators=(",", ":")), body)


def header_text(text: str, body: bytes = b"") -> bytes:
    """A frame whose header is ``text`` as it stands, JSON the encoder would never write included."""
    header = text.encode()
    return on_socket(len(header).to_bytes(4, "big") + header + body)


def tensor(shape, offset, nbytes, dtype="float32") -> dict:
    return {"tensor": {"dtype": dtype, "shape": shape, "offset": offset, "nbytes": nbytes}}


def answer(values: list) -> dict:
    return {"dict": {"value": {"tuple": values}}}


def filled(item: str, opening: str = '{"dict":{"value":[', closing: str = "]}}") -> str:
    """``item`` repeated between ``opening`` and ``closing``, as many times as a header at its limit holds."""
    count = (wire.MAX_HEADER_BYTES - len(opening) - len(closing)) // (len(item) + 1)
    return opening + ",".join([item] * count) + closing


FLOATS = BODY // 4
TINY = '{"tensor":{"dtype":"bool","shape":[],"offset":%d,"nbytes":1}}'  # one byte each, back to back
TINY_COUNT = (wire.MAX_HEADER_BYTES - 64) // (len(TINY % 10**5) + 1)  # about 16 thousand: what a header holds
LONG_TRAILER = (wire.MAX_FRAME_BYTES - 64) // 3  # items of three bytes ("61,", the hex of "a")

# name -> what makes (the bytes the worker writes as its answer, its trailer's payload or None for a true one),
# called only when the frames are measured: together they weigh 42 MB.
BREAKS_A_BOUND = {
    "aliases-one-7-mb-range-48-times": lambda: (frame(answer([tensor([FLOATS], 0, BODY)] * 48), bytes(BODY)), None),
    "overlaps-48-ranges-of-6-mb": lambda: (
        frame(answer([tensor([6 * 2**18], k * 2**14, 6 * 2**20) for k in range(48)]), bytes(BODY)), None),
    "fills-a-header-with-tiny-tensors": lambda: (
        header_text('{"dict":{"value":[' + ",".join(TINY % k for k in range(TINY_COUNT)) + "]}}", bytes(TINY_COUNT)),
        None),
    "fills-a-header-with-empty-tensors": lambda: (
        header_text(filled('{"tensor":{"dtype":"bool","shape":[0],"offset":0,"nbytes":0}}')), None),
    "nests-a-header-half-a-million-deep": lambda: (
        header_text("[" * (wire.MAX_HEADER_BYTES // 2) + "]" * (wire.MAX_HEADER_BYTES // 2)), None),
    "announces-a-200-mb-frame": lambda: ((200 * 2**20).to_bytes(4, "big") + b"{" * 4096, None),
    "sends-a-trailer-as-long-as-a-frame": lambda: (
        frame({"dict": {}}), b"1\n" + b"61," * LONG_TRAILER + b"\n0\n\n\n0"),
}
WITHIN_BOUNDS = {
    "a-small-answer": lambda: (on_socket(wire.encode({"value": [1.5, "s", None]})), None),
    "a-7-mb-tensor": lambda: (frame(answer([tensor([FLOATS], 0, BODY)]), bytes(BODY)), None),
    "as-many-tensors-as-allowed": lambda: (
        frame(answer([tensor([BODY // 4 // wire.MAX_TENSORS], k * BODY // wire.MAX_TENSORS,
                             BODY // wire.MAX_TENSORS) for k in range(wire.MAX_TENSORS)]), bytes(BODY)), None),
    "a-header-full-of-empty-dicts": lambda: (header_text(filled('{"dict":{}}')), None),
    "a-header-full-of-handles": lambda: (header_text(filled('{"object":{"id":1}}')), None),
    "a-header-of-one-long-string": lambda: (
        header_text('{"dict":{"value":"' + "x" * (wire.MAX_HEADER_BYTES - 24) + '"}}'), None),
}

# Runs in a fresh interpreter with the repository on its path. For each frame it forks a child that asks a real
# ``Worker`` for an answer, writes the frame to the other end of their socketpair, and collects what the child
# measured.
DRIVER = r"""
import gc, json, os, socket, sys
from pathlib import Path

import autograder.run  # what a grading process has imported: torch, the suites' machinery, the wire
from autograder.checks import WorkerLost
from autograder.sandbox import Worker
from autograder.sandboxed import wire


class NoSandbox:
    def settle(self, pid, kill=False):  # a Worker asks its sandbox to end a worker it gives up on, or how one ended
        return {}


def memory_mb(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith(field + ":"))


def ask(sock):
    gc.collect()
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # the peak starts again from the present size
    before = memory_mb("VmRSS")
    try:
        answer = Worker(NoSandbox(), sock, 0, None).request({"op": "call", "target": "f"}, 60, 60)
        status = "read"
    except WorkerLost as lost:
        status = lost.status
    growth = memory_mb("VmHWM") - before
    return {"status": status, "peak_mb": round(BASELINE + growth, 1), "growth_mb": round(growth, 1)}


def receive(sock, n):
    data = b""
    while len(data) < n:
        data += sock.recv(n - len(data)) or sys.exit("the child closed the socket before its request")
    return data


def answer(sock, frame, trailer):
    number, _ = wire.split_number(wire.read_frame(lambda n: receive(sock, n)))
    trailer = trailer if trailer is not None else wire.encode_trailer(number, [], False, [], [], 0)
    try:
        sock.sendall(frame + len(trailer).to_bytes(4, "big") + trailer)
        sock.shutdown(socket.SHUT_WR)  # a frame that announces more than it holds ends the request, not hangs it
    except OSError:
        pass  # the child stopped reading: it refused the frame


gc.collect()
# A forked child counts as resident only the pages it touches, so a grading process's peak is this process's
# own resident memory (torch and the grader's modules, all in use there) plus what the child added.
BASELINE = memory_mb("VmRSS")
measured = {}
for path in sorted(Path(sys.argv[1]).glob("*.frame")):
    frame, trailer_path = path.read_bytes(), path.with_suffix(".trailer")
    trailer = trailer_path.read_bytes() if trailer_path.exists() else None
    ours, theirs = socket.socketpair()
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            theirs.close()
            os.write(writable, json.dumps(ask(ours)).encode())
        finally:
            os._exit(0)
    ours.close()
    os.close(writable)
    answer(theirs, frame, trailer)
    with os.fdopen(readable, "rb") as report:
        measured[path.stem] = json.loads(report.read() or b'{"status": "the child failed"}')
    os.waitpid(pid, 0)
    theirs.close()
print(json.dumps(measured))
"""


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """frame name -> {"status": "read" or how the request failed, "peak_mb": ..., "growth_mb": ...}"""
    folder = tmp_path_factory.mktemp("frames")
    for name, make in (BREAKS_A_BOUND | WITHIN_BOUNDS).items():
        data, trailer = make()
        (folder / f"{name}.frame").write_bytes(data)
        if trailer is not None:
            (folder / f"{name}.trailer").write_bytes(trailer)
    done = subprocess.run([sys.executable, "-c", DRIVER, str(folder)], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("name", list(BREAKS_A_BOUND))
def test_a_frame_that_breaks_a_bound_is_the_workers_fault(measured, name):
    assert measured[name]["status"] == "protocol_violation", measured[name]


@pytest.mark.parametrize("name", list(WITHIN_BOUNDS))
def test_an_answer_within_every_bound_is_read(measured, name):
    assert measured[name]["status"] == "read", measured[name]


@pytest.mark.parametrize("name", list(BREAKS_A_BOUND | WITHIN_BOUNDS))
def test_no_frame_takes_the_grading_process_to_300_mb(measured, name):
    assert measured[name]["peak_mb"] < PEAK_LIMIT_MB, measured[name]


@pytest.mark.parametrize("name", list(BREAKS_A_BOUND | WITHIN_BOUNDS))
def test_no_frame_costs_the_grading_process_more_than_40_mb(measured, name):
    assert measured[name]["growth_mb"] < GROWTH_LIMIT_MB, measured[name]
