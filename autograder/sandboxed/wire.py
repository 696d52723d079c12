"""The wire format between the grader and the sandboxed worker: framing, JSON, raw tensor bytes.

Both sides use this module and nothing else to talk; it is the only code the trusted side
shares with the worker's transport. Decoding never unpickles and never calls code the
worker chose: a frame becomes plain Python values (None, bool, int, float, str, list,
tuple, dict with str keys), fresh dense CPU tensors built from raw bytes, dtypes, and
opaque ``Handle``s naming objects that stay in the worker.

A frame on the socket: 4-byte big-endian length, then the payload. A payload: 4-byte
big-endian length of the JSON header, the header, then the blobs the header points into
(``{"tensor": {..., "offset": o, "nbytes": n}}``).

Everything a hostile worker could send is bounded *before* it is allocated: the frame's
length is checked before its bytes are read, the header's length before it is parsed, and
the whole parsed header before any tensor is made: each tensor's rank, dimensions and
element count, and, in sum over the frame, its values, tensors, elements and byte ranges
(its strings are bounded in sum by the header's length: JSON spends a byte or more on each
character). The encoder lays the tensors' bytes back to back in the order it walks the
value, so the decoder requires each range to start where the one before ended and the last
to end where the body does: ranges can neither alias nor overlap, and together they are
exactly the body. A frame that breaks a bound raises ``WireError``, which the grader
reports as the submission's fault.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass

import numpy
import torch

MAX_FRAME_BYTES = 8 * 2**20  # one answer, tensors included (the largest honest answer is under 1 MiB)
MAX_HEADER_BYTES = 1 * 2**20  # its JSON header
MAX_DEPTH = 32  # nesting of lists, tuples and dicts
MAX_ITEMS = 100_000  # values in one frame
MAX_TENSORS = 1024  # tensors in one frame (the course's largest honest answer or request has 18)
MAX_RANK = 8  # dimensions of one tensor
MAX_ELEMENTS = 2**21  # elements of one tensor, and of all a frame's tensors together (8 MiB of float32)
OUTPUT_LIMIT = 64 * 1024  # characters of print() output the worker keeps per submission

DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
ITEM_BYTES = {name: torch.empty((), dtype=dtype).element_size() for name, dtype in DTYPES.items()}
# The dtypes NumPy shares with PyTorch (all but bfloat16): their bytes go through NumPy, which costs a
# worker far fewer PyTorch calls (each one passes the monitor's handlers) than PyTorch's own methods.
NUMPY_DTYPES = {name: torch.empty(0, dtype=dtype).numpy().dtype for name, dtype in DTYPES.items()
                if dtype is not torch.bfloat16}
NUMPY_NAMES = {dtype: name for name, dtype in NUMPY_DTYPES.items()}
_LENGTH = struct.Struct(">I")


class WireError(ValueError):
    """A frame that is malformed, too big or names something unknown."""


@dataclass(frozen=True)
class Handle:
    """An object that lives in the worker (a module, a class, a function), by number."""

    id: int
    type: str = "object"
    is_module: bool = False

    def __repr__(self) -> str:
        return f"<{self.type} #{self.id} in the worker>"


@dataclass
class TensorInfo:
    """What the worker reported about a tensor besides its values (self-reported, so advisory)."""

    requires_grad: bool = False
    has_grad: bool = False
    is_parameter: bool = False
    exact_type: bool = True


# --- framing ----------------------------------------------------------------------------

def frame(payload: bytes) -> bytes:
    """``payload`` with its length in front, ready for the socket."""
    if len(payload) > MAX_FRAME_BYTES:
        raise WireError(f"a frame of {len(payload):,} bytes is over the {MAX_FRAME_BYTES:,}-byte limit")
    return _LENGTH.pack(len(payload)) + payload


def read_frame(read_exact) -> bytes:
    """The next payload, read with ``read_exact(n) -> bytes``; the length is checked before the bytes are read."""
    (size,) = _LENGTH.unpack(read_exact(4))
    if size > MAX_FRAME_BYTES:
        raise WireError(f"a frame announced {size:,} bytes, over the {MAX_FRAME_BYTES:,}-byte limit")
    return read_exact(size)


def send(sock, value, on_object=None) -> None:
    """Encode ``value`` and write it to ``sock`` as one frame."""
    sock.sendall(frame(encode(value, on_object)))


# --- values -----------------------------------------------------------------------------

def encode(value, on_object=None) -> bytes:
    """value -> one payload. ``on_object(obj) -> Handle`` encodes anything not plain (worker side)."""
    blobs: list[bytes] = []
    offset = [0]
    sums = {"tensors": 0, "elements": 0}  # what the decoder bounds in sum

    def values(t: torch.Tensor) -> tuple[str, list, int, numpy.ndarray | torch.Tensor]:
        """(dtype name, shape, elements, what holds the values) of ``t``, detached and on the CPU."""
        exact = type(t) in (torch.Tensor, torch.nn.Parameter)
        if exact:
            detached = t.detach()
            try:
                array = detached.numpy()  # a view: the bytes are copied once, in C order, below
            except (TypeError, RuntimeError):  # bfloat16, a conjugate or negative view, not on the CPU
                array = None
            if type(array) is numpy.ndarray and array.dtype in NUMPY_NAMES:
                return NUMPY_NAMES[array.dtype], list(array.shape), array.size, array
        plain = torch.Tensor._make_subclass(torch.Tensor, t.detach()) if not exact else t.detach()
        plain = plain.to("cpu").contiguous().clone()
        name = DTYPE_NAMES.get(plain.dtype)
        if name is None:
            raise WireError(f"tensors of dtype {plain.dtype} are not supported")
        return name, list(plain.shape), plain.numel(), plain

    def tensor(t: torch.Tensor) -> dict:
        exact = type(t) in (torch.Tensor, torch.nn.Parameter)
        name, shape, elements, held = values(t)
        if len(shape) > MAX_RANK or elements > MAX_ELEMENTS:
            raise WireError(f"a tensor of shape {tuple(shape)} is larger than the grader reads")
        sums["tensors"] += 1
        sums["elements"] += elements
        if sums["tensors"] > MAX_TENSORS or sums["elements"] > MAX_ELEMENTS:
            raise WireError("the answer holds more tensors, or more elements in all, than the grader reads")
        if not elements:
            raw = b""
        elif type(held) is numpy.ndarray:
            raw = held.tobytes()
        else:
            raw = held.reshape(-1).view(torch.uint8).numpy().tobytes()
        blobs.append(raw)
        entry = {
            "dtype": name, "shape": shape, "offset": offset[0], "nbytes": len(raw),
            "requires_grad": bool(t.requires_grad), "has_grad": t.grad is not None if t.is_leaf else False,
            "is_parameter": isinstance(t, torch.nn.Parameter), "exact_type": exact,
        }
        offset[0] += len(raw)
        if offset[0] > MAX_FRAME_BYTES:
            raise WireError("the answer's tensors are larger than a frame")
        return {"tensor": entry}

    def walk(v, depth: int):
        if depth > MAX_DEPTH:
            raise WireError("value nested too deeply")
        kind = type(v)
        if v is None or kind is bool or kind is str:
            return v
        if kind is int:
            return v if abs(v) < 2**63 else {"float": float(v)}
        if kind is float:
            return v if math.isfinite(v) else {"float": repr(v)}
        if isinstance(v, torch.Tensor):
            return tensor(v)
        if isinstance(v, torch.dtype):
            return {"dtype": DTYPE_NAMES.get(v, str(v))}
        if isinstance(v, Handle):
            return {"object": {"id": v.id, "type": v.type, "is_module": v.is_module}}
        if kind in (list, tuple, torch.Size):
            items = [walk(x, depth + 1) for x in v]
            return items if kind is list else {"tuple": items}
        if isinstance(v, dict) and all(type(k) is str for k in v):  # OrderedDict from state_dict() too
            return {"dict": {k: walk(x, depth + 1) for k, x in v.items()}}
        if on_object is None:
            raise WireError(f"cannot send a {kind.__name__}")
        return walk(on_object(v), depth + 1)

    header = json.dumps(walk(value, 0), allow_nan=False).encode()
    if len(header) > MAX_HEADER_BYTES:
        raise WireError("the answer's description is too large")
    body = b"".join(blobs)
    if 4 + len(header) + len(body) > MAX_FRAME_BYTES:
        raise WireError("the answer is larger than a frame")
    return _LENGTH.pack(len(header)) + header + body


def _shape(entry: dict) -> list[int]:
    shape = entry.get("shape")
    if type(shape) is not list or len(shape) > MAX_RANK:
        raise WireError("a tensor's shape is not a list of at most 8 sizes")
    if not all(type(n) is int and 0 <= n <= MAX_ELEMENTS for n in shape):
        raise WireError("a tensor has a negative or oversized dimension")
    if math.prod(shape) > MAX_ELEMENTS:
        raise WireError("a tensor has more elements than the grader reads")
    return shape


def decode(payload: bytes, resolve=None, from_grader: bool = False):
    """One payload -> plain values and fresh tensors. ``resolve(id) -> object`` maps handles (worker side).

    The parsed header is walked twice: a dry walk checks every bound, in sum too, and makes
    no tensor; only a frame that passed all of them is walked again to build its values.
    ``from_grader``: the frame is a request the grader made (the worker decoding it), so the
    single walk that builds it checks each bound as it goes: nothing there needs defending.
    """
    if len(payload) < 4 or len(payload) > MAX_FRAME_BYTES:
        raise WireError("a frame has a bad size")
    (length,) = _LENGTH.unpack_from(payload)
    if length > MAX_HEADER_BYTES or length > len(payload) - 4:
        raise WireError("a frame's header is longer than allowed or than the frame")
    view = memoryview(payload)
    try:
        tree = json.loads(bytes(view[4:4 + length]))
    except (ValueError, RecursionError) as error:
        raise WireError(f"a frame's header is not JSON ({type(error).__name__})") from None
    body = view[4 + length:]
    if not from_grader:
        dry = _Reader(body, build=False)
        dry.value(tree, 0)
        if dry.cursor != len(body):
            raise WireError("a frame's body holds bytes that no tensor owns")
    return _Reader(body, build=True, resolve=resolve, trusted=from_grader).value(tree, 0)


class _Reader:
    """One walk over a parsed header, counting what it holds against the frame's bounds in sum."""

    def __init__(self, body: memoryview, build: bool, resolve=None, trusted: bool = False):
        self.body, self.build, self.resolve, self.trusted = body, build, resolve, trusted
        self.items = self.tensors = self.elements = 0
        self.cursor = 0  # where the next tensor's bytes must start in the body

    def value(self, v, depth: int):
        self.items += 1
        if depth > MAX_DEPTH or self.items > MAX_ITEMS:
            raise WireError("a frame's value is too large or nested too deeply")
        if v is None or type(v) in (bool, int, float, str):
            return v
        if type(v) is list:
            return [self.value(x, depth + 1) for x in v]
        if type(v) is not dict or len(v) != 1:
            raise WireError("a frame holds a value of unknown kind")
        (key, inner), = v.items()
        if key == "tensor" and type(inner) is dict:
            return self.tensor(inner)
        if key == "tuple" and type(inner) is list:
            return tuple(self.value(x, depth + 1) for x in inner)
        if key == "dict" and type(inner) is dict:
            return {k: self.value(x, depth + 1) for k, x in inner.items()}
        if key == "float" and type(inner) in (str, float):
            try:
                return float(inner)
            except ValueError:
                raise WireError("a frame holds a float that is not a number") from None
        if key == "dtype" and type(inner) is str:
            return DTYPES.get(inner, inner[:40])
        if key == "object" and type(inner) is dict and type(inner.get("id")) is int:
            if not self.build:
                return None
            if self.resolve is not None:
                return self.resolve(inner["id"])
            kind = inner.get("type")
            return Handle(inner["id"], kind[:200] if type(kind) is str else "object", inner.get("is_module") is True)
        raise WireError(f"a frame holds a value of unknown kind {str(key)[:40]!r}")

    def tensor(self, entry: dict) -> torch.Tensor | None:
        name = entry.get("dtype")
        if type(name) is not str or name not in DTYPES:
            raise WireError("a tensor has an unknown dtype")
        shape = _shape(entry)
        start, nbytes = entry.get("offset"), entry.get("nbytes")
        if type(start) is not int or type(nbytes) is not int or nbytes < 0 or start + nbytes > len(self.body):
            raise WireError("a tensor's bytes lie outside the frame")
        if start != self.cursor:  # the encoder's order: no aliasing, no overlap, no gap
            raise WireError("a tensor's bytes do not start where the previous tensor's ended")
        elements = math.prod(shape)
        if elements * ITEM_BYTES[name] != nbytes:
            raise WireError("a tensor's size does not match its shape")
        self.cursor += nbytes
        self.tensors += 1
        self.elements += elements
        if self.tensors > MAX_TENSORS or self.elements > MAX_ELEMENTS:
            raise WireError("a frame holds more tensors, or more elements in all, than the grader reads")
        if not self.build:
            return None
        if name in NUMPY_DTYPES:  # one PyTorch call, which the worker's monitor passes without an operator
            array = numpy.frombuffer(bytearray(self.body[start:start + nbytes]), dtype=NUMPY_DTYPES[name])
            out = torch.from_numpy(array.reshape(shape))
        else:
            dtype = DTYPES[name]
            flat = torch.frombuffer(bytearray(self.body[start:start + nbytes]), dtype=dtype) if nbytes else \
                torch.empty(0, dtype=dtype)
            out = flat.reshape(shape)
        if self.trusted:  # a request in the worker: what the grader says of its own tensors is of no use there,
            return out    # and an attribute would hand student code an object of this module
        out._wire_info = TensorInfo(
            requires_grad=entry.get("requires_grad") is True, has_grad=entry.get("has_grad") is True,
            is_parameter=entry.get("is_parameter") is True, exact_type=entry.get("exact_type") is not False,
        )
        return out


def tensor_info(t: torch.Tensor) -> TensorInfo:
    """What the worker said about a decoded tensor (defaults for tensors made locally)."""
    return getattr(t, "_wire_info", TensorInfo())


# --- the evidence channel -------------------------------------------------------------------
# What the worker's monitor records leaves it as it happens, on a pipe of its own: the worker holds the write end
# at EVIDENCE_FD (its seccomp filter keeps that descriptor from being closed, replaced or changed), the grader
# the read end. A record is a tag and a newline; the grader reads what a request wrote once its answer arrives.
EVIDENCE_FD = 63  # below the worker's limit of 64 open files
EVIDENCE_TAGS = frozenset({"layer_norm", "batch_norm", "group_norm", "instance_norm", "rms_norm", "autograd",
                           "subclass", "tampered", "reference"})
MAX_EVIDENCE_BYTES = 1 << 20  # what one request may write on the channel (one byte a record would be 100,000)


def read_evidence(data: bytes, partial: bytes = b"") -> tuple[set[str], bool, bytes]:
    """The tags in ``data`` (after ``partial``, the unfinished record of the last read): (tags, whether anything
    was not a tag, the unfinished record now). Linear in ``data``: records are split once, deduplicated by
    ``set``, and only distinct ones are looked at."""
    records = (partial + data).split(b"\n")
    partial = records.pop()
    tags, bad = set(), len(partial) > 32
    for record in set(records):
        text = record.decode("ascii", "replace")
        if text in EVIDENCE_TAGS:
            tags.add(text)
        else:
            bad = True
    return tags, bad, partial[:33]


# --- the worker's own records ---------------------------------------------------------------
# A request's number travels in front of its payload, outside the JSON, and comes back in a
# trailer after the answer. Both are made and read with built-in types' methods only (bytes,
# str, int, list), which Python code cannot monkeypatch, so student code that replaces
# ``json`` or ``socket`` functions can neither read a number nor forge a trailer.

NUMBER_BYTES = 8
# The top bit of a request's number: the worker sets the autograd watch around it. It travels with the number,
# outside the JSON, because the worker's loop must read it with built-in types only (``zygote.serve``).
WATCH_AUTOGRAD = 1 << 63
MAX_TRAILER_ITEMS = 100
MAX_RAN_ITEMS = 4096  # code objects of the notebook one request ran ("cell:first:last")


def numbered(number: int, payload: bytes) -> bytes:
    """A request payload with its number in front."""
    return number.to_bytes(NUMBER_BYTES, "big") + payload


def split_number(payload: bytes) -> tuple[int, bytes]:
    if len(payload) < NUMBER_BYTES:
        raise WireError("a request is shorter than its number")
    return int.from_bytes(payload[:NUMBER_BYTES], "big"), payload[NUMBER_BYTES:]


def encode_trailer(number: int, used: list, tampered: bool, attempts: list, compiled: list, output_total: int,
                   ran: list = ()) -> bytes:
    """The trailer: fields separated by newlines, strings as hex of their UTF-8 bytes."""
    def strings(items, limit=MAX_TRAILER_ITEMS) -> str:
        return ",".join(str.encode(item, "utf-8", "replace").hex() for item in list(items)[:limit])

    fields = [str(number), strings(used), "1" if tampered else "0", strings(attempts), strings(compiled),
              str(output_total), strings(ran, MAX_RAN_ITEMS)]
    return str.encode("\n".join(fields), "ascii")


def decode_trailer(payload: bytes) -> dict:
    """A trailer's fields, bounded and checked; WireError for anything else."""
    # Separators are counted before anything is split, so a frame-long run of commas or newlines is never cut
    # into millions of strings.
    try:
        text = str(payload, "ascii")
        if text.count("\n") != 6:
            raise ValueError
        number, used, tampered, attempts, compiled, total, ran = text.split("\n")

        def strings(text: str, limit=MAX_TRAILER_ITEMS) -> list[str]:
            if text.count(",") >= limit:
                raise ValueError
            items = text.split(",") if text else []
            return [bytes.fromhex(item).decode("utf-8", "replace") for item in items]

        return {"number": int(number), "monitor": {"used": strings(used), "tampered": tampered == "1",
                                                   "ran": strings(ran, MAX_RAN_ITEMS)},
                "attempts": strings(attempts), "compiled": strings(compiled), "output_total": int(total)}
    except ValueError:
        raise WireError("a trailer that is not the worker's") from None
