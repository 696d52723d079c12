"""The wire format rejects what breaks its bounds before allocating it, and its records cannot be forged."""

import json
import struct
import tracemalloc

import pytest
import torch

from autograder.sandboxed import wire


def payload(tree: dict, body: bytes = b"") -> bytes:
    header = json.dumps(tree).encode()
    return struct.pack(">I", len(header)) + header + body


def tensor_entry(shape, nbytes, dtype="float32", offset=0):
    return {"dict": {"value": {"tensor": {"dtype": dtype, "shape": shape, "offset": offset, "nbytes": nbytes}}}}


def byte_tensors(ranges) -> dict:
    """A tuple of uint8 tensors, one per (offset, nbytes) range."""
    return {"tuple": [{"tensor": {"dtype": "uint8", "shape": [n], "offset": o, "nbytes": n}} for o, n in ranges]}


def tiny_tensors(count: int, shape) -> dict:
    """``count`` uint8 tensors of ``shape`` (one element or none), laid back to back as the encoder lays them."""
    size = 1 if shape == [] else 0
    return {"tuple": [{"tensor": {"dtype": "uint8", "shape": shape, "offset": k * size, "nbytes": size}}
                      for k in range(count)]}


def test_a_round_trip_gives_fresh_equal_tensors_and_plain_values():
    value = {"x": torch.arange(6.0).reshape(2, 3), "dtype": torch.float16, "items": [1, 2.5, None, "s", (True,)]}
    back = wire.decode(wire.encode(value))
    assert torch.equal(back["x"], value["x"]) and back["dtype"] is torch.float16
    assert back["items"] == [1, 2.5, None, "s", (True,)]


def _views():
    """Tensors as graded functions return them: views, broadcasts, leaves with gradients, every wire dtype."""
    base = torch.linspace(-3, 3, 24, dtype=torch.float64).reshape(4, 6)
    leaf = base.clone().requires_grad_()
    leaf.grad = torch.ones_like(leaf)
    views = {"transposed": base.t(), "strided": base[:, ::2], "broadcast": base[0].expand(3, 6),
             "scalar": base[1, 2], "empty": base[:0], "parameter": torch.nn.Parameter(base.float()),
             "graph output": leaf * 2, "leaf with grad": leaf, "negated view": torch.randn(3).neg()}
    views.update({name: base.to(dtype) for name, dtype in wire.DTYPES.items()})
    return views


@pytest.mark.parametrize("name, tensor", list(_views().items()), ids=list(_views()))
def test_a_tensor_round_trips_with_its_values_shape_dtype_and_flags(name, tensor):
    back = wire.decode(wire.encode({"value": tensor}))["value"]
    assert back.dtype == tensor.dtype and back.shape == tensor.shape
    assert torch.equal(back, tensor.detach()) and back.is_contiguous()
    info = wire.tensor_info(back)
    assert info.requires_grad == tensor.requires_grad
    assert info.has_grad == (tensor.is_leaf and tensor.grad is not None)
    assert info.is_parameter == isinstance(tensor, torch.nn.Parameter)


def test_a_request_decodes_the_same_in_the_workers_single_walk():
    request = {"op": "call", "args": [*_views().values(), 1e-5], "kwargs": {"dims": (1, 2)}}
    frame = wire.encode(request)
    once, checked = wire.decode(frame, from_grader=True), wire.decode(frame)
    assert once["kwargs"] == checked["kwargs"] and once["args"][-1] == checked["args"][-1]
    assert all(torch.equal(a, b) and a.dtype == b.dtype for a, b in zip(once["args"][:-1], checked["args"][:-1]))


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


@pytest.mark.parametrize("ranges, body", [
    pytest.param([(0, 16), (0, 16)], 16, id="two-tensors-on-the-same-bytes"),
    pytest.param([(0, 16)] * 80, 16, id="eighty-tensors-on-the-same-bytes"),
    pytest.param([(0, 16), (8, 16)], 24, id="overlapping"),
    pytest.param([(16, 16), (0, 16)], 32, id="out-of-order"),
    pytest.param([(0, 16), (20, 16)], 36, id="leaving-a-gap"),
    pytest.param([(0, 16)], 20, id="leaving-bytes-after-the-last"),
    pytest.param([(0, 8), (8, 8), (0, 16)], 16, id="in-total-twice-the-body"),
])
def test_tensor_bytes_not_laid_back_to_back_over_the_whole_body_are_refused(ranges, body):
    with pytest.raises(wire.WireError):
        wire.decode(payload(byte_tensors(ranges), bytes(body)))


def test_tensors_laid_back_to_back_over_the_whole_body_are_read():
    back = wire.decode(payload(byte_tensors([(0, 2), (2, 0), (2, 3)]), bytes(range(5))))
    assert [t.tolist() for t in back] == [[0, 1], [], [2, 3, 4]]


def test_tensors_nested_in_dicts_tuples_and_lists_round_trip_in_the_encoders_order():
    value = {"b": [torch.ones(2), (torch.arange(3), {"c": torch.zeros(0)})], "a": torch.full((2, 2), 7.0)}
    back = wire.decode(wire.encode(value))
    assert list(back) == ["b", "a"] and torch.equal(back["b"][1][0], torch.arange(3))
    assert torch.equal(back["a"], value["a"]) and back["b"][1][1]["c"].shape == (0,)


# As many one-byte tensors as a header at its limit holds (about 16 thousand; 100 thousand would not fit),
# and one over the limit, of one element and of none.
LONGEST_ENTRY = {"tensor": {"dtype": "uint8", "shape": [], "offset": 99_999, "nbytes": 1}}
FILLING_A_HEADER = (wire.MAX_HEADER_BYTES - 64) // (len(json.dumps(LONGEST_ENTRY, separators=(",", ":"))) + 1)


@pytest.mark.parametrize("count", [wire.MAX_TENSORS + 1, FILLING_A_HEADER])
@pytest.mark.parametrize("shape", [[], [0]], ids=["one-element", "empty"])
def test_more_tensors_than_a_frame_holds_are_refused(count, shape):
    tree = tiny_tensors(count, shape)
    header = json.dumps(tree, separators=(",", ":")).encode()
    assert len(header) <= wire.MAX_HEADER_BYTES
    body = bytes(count if shape == [] else 0)
    with pytest.raises(wire.WireError, match="more tensors"):
        wire.decode(struct.pack(">I", len(header)) + header + body)


def test_more_elements_in_all_than_a_frame_holds_are_refused():
    half = wire.MAX_ELEMENTS // 2 + 1  # each tensor under the limit, the two over it
    with pytest.raises(wire.WireError, match="more elements"):
        wire.decode(payload(byte_tensors([(0, half), (half, half)]), bytes(2 * half)))


@pytest.mark.parametrize("value", [
    pytest.param([torch.zeros(2)] * wire.MAX_TENSORS, id="as-many-tensors-as-allowed"),
    pytest.param([torch.zeros(wire.MAX_ELEMENTS // 2, dtype=torch.uint8)] * 2, id="as-many-elements-as-allowed"),
])
def test_a_value_at_the_limits_in_sum_round_trips(value):
    assert len(wire.decode(wire.encode(value))) == len(value)


@pytest.mark.parametrize("value", [
    pytest.param([torch.zeros(())] * (wire.MAX_TENSORS + 1), id="too-many-tensors"),
    pytest.param([torch.zeros(wire.MAX_ELEMENTS // 2 + 1, dtype=torch.uint8)] * 2, id="too-many-elements-in-all"),
])
def test_the_encoder_refuses_what_the_decoder_would(value):
    with pytest.raises(wire.WireError, match="in all"):
        wire.encode(value)


def test_a_handles_type_that_is_not_a_string_reads_as_object():
    back = wire.decode(payload({"object": {"id": 3, "type": ["x"] * 1000}}))
    assert back == wire.Handle(3, "object")


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


# A trailer as long as a frame allows, all separators: the old decoder split it into millions of strings.
SEPARATORS = {
    "commas": b"1\n" + b"61," * ((wire.MAX_FRAME_BYTES - 16) // 3) + b"\n0\n\n\n0",
    "newlines": b"\n" * wire.MAX_FRAME_BYTES,
}


@pytest.fixture
def traced():
    tracemalloc.start()
    yield tracemalloc
    tracemalloc.stop()


@pytest.mark.parametrize("forged", list(SEPARATORS.values()), ids=list(SEPARATORS))
def test_a_trailer_of_separators_is_refused_within_three_times_its_size(traced, forged):
    with pytest.raises(wire.WireError):
        wire.decode_trailer(forged)
    assert traced.get_traced_memory()[1] < 3 * len(forged)
