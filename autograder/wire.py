"""The wire format between the grader and the sandboxed worker: JSON plus raw tensor bytes.

Both sides use it, and it is the only thing that crosses the trust boundary. Decoding
never unpickles and never calls code the worker chose: a frame becomes plain Python
values (None, bool, int, float, str, list, tuple, dict with str keys), fresh dense CPU
tensors built from raw bytes, dtypes, and opaque ``Handle``s naming objects that stay in
the worker. Sizes and nesting are bounded, so a hostile frame is rejected, not obeyed.

Frame layout: 4-byte big-endian length of the JSON header, the header, then the blobs
the header points into (``{"tensor": {..., "offset": o, "nbytes": n}}``).
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass

import torch

MAX_FRAME_BYTES = 256 * 2**20
MAX_DEPTH = 32
MAX_ITEMS = 100_000

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


def encode(value, on_object=None) -> bytes:
    """value -> one frame. ``on_object(obj) -> Handle`` encodes anything not plain (worker side)."""
    blobs: list[bytes] = []
    offset = [0]

    def tensor(t: torch.Tensor) -> dict:
        exact = type(t) in (torch.Tensor, torch.nn.Parameter)
        plain = torch.Tensor._make_subclass(torch.Tensor, t.detach()) if not exact else t.detach()
        plain = plain.to("cpu").contiguous().clone()
        name = DTYPE_NAMES.get(plain.dtype)
        if name is None:
            raise WireError(f"tensors of dtype {plain.dtype} are not supported")
        raw = plain.reshape(-1).view(torch.uint8).numpy().tobytes() if plain.numel() else b""
        blobs.append(raw)
        entry = {
            "dtype": name, "shape": list(plain.shape), "offset": offset[0], "nbytes": len(raw),
            "requires_grad": bool(t.requires_grad), "has_grad": t.grad is not None if t.is_leaf else False,
            "is_parameter": isinstance(t, torch.nn.Parameter), "exact_type": exact,
        }
        offset[0] += len(raw)
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
    body = b"".join(blobs)
    if len(header) + len(body) > MAX_FRAME_BYTES:
        raise WireError("frame too large")
    return struct.pack(">I", len(header)) + header + body


def decode(frame: bytes, resolve=None):
    """One frame -> plain values and fresh tensors. ``resolve(id) -> object`` maps handles (worker side)."""
    if len(frame) < 4 or len(frame) > MAX_FRAME_BYTES:
        raise WireError("frame has a bad size")
    (length,) = struct.unpack(">I", frame[:4])
    if length > len(frame) - 4:
        raise WireError("header longer than the frame")
    try:
        tree = json.loads(frame[4:4 + length])
    except (ValueError, RecursionError) as error:
        raise WireError(f"header is not JSON: {error}") from None
    body = memoryview(frame)[4 + length:]
    count = [0]

    def tensor(entry: dict) -> torch.Tensor:
        dtype = DTYPES.get(entry.get("dtype"))
        shape, start, nbytes = entry.get("shape"), entry.get("offset"), entry.get("nbytes")
        if dtype is None or type(shape) is not list or not all(type(n) is int and n >= 0 for n in shape):
            raise WireError("bad tensor header")
        if type(start) is not int or type(nbytes) is not int or start < 0 or start + nbytes > len(body):
            raise WireError("tensor bytes out of range")
        numel = math.prod(shape)
        if numel * torch.empty((), dtype=dtype).element_size() != nbytes:
            raise WireError("tensor size does not match its shape")
        raw = bytearray(body[start:start + nbytes])
        flat = torch.frombuffer(raw, dtype=dtype) if nbytes else torch.empty(0, dtype=dtype)
        out = flat.reshape(shape).clone()
        out._wire_info = TensorInfo(
            requires_grad=entry.get("requires_grad") is True, has_grad=entry.get("has_grad") is True,
            is_parameter=entry.get("is_parameter") is True, exact_type=entry.get("exact_type") is not False,
        )
        return out

    def walk(v, depth: int):
        count[0] += 1
        if depth > MAX_DEPTH or count[0] > MAX_ITEMS:
            raise WireError("value too large or nested too deeply")
        if v is None or type(v) in (bool, int, float, str):
            return v
        if type(v) is list:
            return [walk(x, depth + 1) for x in v]
        if type(v) is not dict or len(v) != 1:
            raise WireError("unknown value in frame")
        (key, inner), = v.items()
        if key == "tensor" and type(inner) is dict:
            return tensor(inner)
        if key == "tuple" and type(inner) is list:
            return tuple(walk(x, depth + 1) for x in inner)
        if key == "dict" and type(inner) is dict:
            return {str(k): walk(x, depth + 1) for k, x in inner.items()}
        if key == "float" and type(inner) in (str, float):
            return float(inner)
        if key == "dtype" and type(inner) is str:
            return DTYPES.get(inner, inner)
        if key == "object" and type(inner) is dict and type(inner.get("id")) is int:
            if resolve is not None:
                return resolve(inner["id"])
            return Handle(inner["id"], str(inner.get("type", "object"))[:200], inner.get("is_module") is True)
        raise WireError(f"unknown value kind {key!r}")

    return walk(tree, 0)


def tensor_info(t: torch.Tensor) -> TensorInfo:
    """What the worker said about a decoded tensor (defaults for tensors made locally)."""
    return getattr(t, "_wire_info", TensorInfo())
