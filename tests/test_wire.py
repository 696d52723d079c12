"""The wire format rejects what breaks its bounds before allocating it, and its records cannot be forged."""

import json
import struct

import pytest
import torch

from autograder.sandboxed import wire


def payload(tree: dict, body: bytes = b"") -> bytes:
    header = json.dumps(tree).encode()
    return struct.pack(">I", len(header)) + header + body


def tensor_entry(shape, nbytes, dtype="float32", offset=0):
    return {"dict": {"value": {"tensor": {"dtype": dtype, "shape": shape, "offset": offset, "nbytes": nbytes}}}}


def test_a_round_trip_gives_fresh_equal_tensors_and_plain_values():
    value = {"x": torch.arange(6.0).reshape(2, 3), "dtype": torch.float16, "items": [1, 2.5, None, "s", (True,)]}
    back = wire.decode(wire.encode(value))
    assert torch.equal(back["x"], value["x"]) and back["dtype"] is torch.float16
    assert back["items"] == [1, 2.5, None, "s", (True,)]


def test_a_frame_length_over_the_limit_is_refused_before_its_bytes_are_read():
    asked = []

    def read_exact(n):
        asked.append(n)
        return struct.pack(">I", 200 * 2**20) if n == 4 else pytest.fail("read the announced bytes")

    with pytest.raises(wire.WireError, match="over the"):
        wire.read_frame(read_exact)
    assert asked == [4]


@pytest.mark.parametrize("shape", [[2**62, 2**62, 0], [-1, 4], [2**21, 2], [1] * 9, ["4"], [4.0]])
def test_a_tensor_shape_out_of_bounds_is_refused(shape):
    with pytest.raises(wire.WireError):
        wire.decode(payload(tensor_entry(shape, 0)))


@pytest.mark.parametrize("offset, nbytes", [(0, 17), (-4, 16), (8, 16), (0, -16)])
def test_tensor_bytes_outside_the_frame_or_of_the_wrong_size_are_refused(offset, nbytes):
    with pytest.raises(wire.WireError):
        wire.decode(payload(tensor_entry([4], nbytes, offset=offset), bytes(16)))


def test_a_header_longer_than_allowed_is_refused_before_it_is_parsed():
    body = struct.pack(">I", wire.MAX_HEADER_BYTES + 1) + b"[" * (wire.MAX_HEADER_BYTES + 1)
    with pytest.raises(wire.WireError, match="header"):
        wire.decode(body)


@pytest.mark.parametrize("tree", [{"dict": {"a": {"unknown": 1}}}, {"tuple": 5}, {"float": "not a number"},
                                  {"dict": {"a": {"tensor": {"dtype": "complex64", "shape": [1], "offset": 0,
                                                             "nbytes": 8}}}}])
def test_unknown_or_malformed_values_are_refused(tree):
    with pytest.raises(wire.WireError):
        wire.decode(payload(tree))


def test_deep_nesting_is_refused():
    tree = 0
    for _ in range(wire.MAX_DEPTH + 2):
        tree = {"tuple": [tree]}
    with pytest.raises(wire.WireError, match="nested"):
        wire.decode(payload(tree))


def test_too_many_items_are_refused():
    with pytest.raises(wire.WireError, match="too large"):
        wire.decode(payload([0] * (wire.MAX_ITEMS + 1)))


def test_a_trailer_round_trips():
    trailer = wire.encode_trailer(2**62 + 5, ["autograd"], True, ["starts a thread"], ["x = 1\n"], 42, ["7:2:5"])
    assert wire.decode_trailer(trailer) == {"number": 2**62 + 5,
                                            "monitor": {"used": ["autograd"], "tampered": True, "ran": ["7:2:5"]},
                                            "attempts": ["starts a thread"], "compiled": ["x = 1\n"],
                                            "output_total": 42}


@pytest.mark.parametrize("forged", [b"", b"1\n\n0\n\n\n0", b"1\n\n0\n\n\n\n", b"x\n\n0\n\n\n0\n",
                                    b"1\nzz\n0\n\n\n0\n", b"1\n" + b",".join([b"61"] * 101) + b"\n0\n\n\n0\n",
                                    b"1\n\n0\n\n\n0\n" + b",".join([b"61"] * (wire.MAX_RAN_ITEMS + 1)),
                                    "\u00e9".encode()])
def test_a_malformed_trailer_is_refused(forged):
    with pytest.raises(wire.WireError):
        wire.decode_trailer(forged)


def test_a_numbered_request_keeps_its_number_outside_the_json():
    framed = wire.numbered(12345, wire.encode({"op": "has", "target": "x"}))
    number, rest = wire.split_number(framed)
    assert number == 12345 and b"12345" not in rest and wire.decode(rest) == {"op": "has", "target": "x"}
