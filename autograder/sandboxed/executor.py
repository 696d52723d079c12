"""Run a submission's cells, then answer the grader's requests about what they defined.

A request is a small dict (``op`` plus arguments, see ``Executor.handle``); the answer is
a dict of plain values and tensors, which ``wire`` encodes. Objects that are not plain
values (modules, classes, functions) stay here and travel as numbered handles.

While student code runs, a ``Monitor`` records every call to a normalization built-in
and every use of autograd, however it was reached (by name, through ``getattr``, through
``torch.ops``): the grader decides from that record whether a task used something it
forbids. The monitor lives in the same process as the student code, so the grader also
scans the source for ways to switch it off (see ``autograder.load``).
"""

from __future__ import annotations

import io
import re
import sys
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from autograder import wire
from autograder.sandboxed import fixtures

OUTPUT_LIMIT = 64 * 1024  # characters of print() output kept per submission
ERROR_LIMIT = 300  # characters of an exception message sent back

# Built-ins by what they implement. Matched by identity where Python can see the
# function, and by operator name for torch.ops and the aten level below autograd.
BUILTINS = {
    F.layer_norm: "layer_norm", torch.layer_norm: "layer_norm", torch.native_layer_norm: "layer_norm",
    F.batch_norm: "batch_norm", torch.batch_norm: "batch_norm", torch.native_batch_norm: "batch_norm",
    F.instance_norm: "instance_norm", torch.instance_norm: "instance_norm",
    F.rms_norm: "rms_norm", torch.rms_norm: "rms_norm",
    torch.autograd.grad: "autograd", torch.autograd.backward: "autograd", torch.Tensor.backward: "autograd",
}
OPERATOR_NAME = re.compile(r"(layer_norm|batch_norm|instance_norm|rms_norm)")


# The aten kernels behind each forbidden tag. In the sandbox they are replaced, before any
# student code runs, by kernels that refuse (``block_builtins``): whatever path reaches
# them (a module, getattr, torch.ops, modes switched off), the call fails and is recorded.
KERNELS = {
    "layer_norm": [("native_layer_norm", "CPU")],
    "batch_norm": [("native_batch_norm", "CPU"), ("_native_batch_norm_legit", "CPU"),
                   ("_native_batch_norm_legit.no_stats", "CPU"), ("_native_batch_norm_legit_no_training", "CPU")],
    "instance_norm": [("instance_norm", "CompositeImplicitAutograd")],
    "rms_norm": [("rms_norm", "CompositeImplicitAutograd")],
}
_ACTIVE: list["Monitor"] = []
_BLOCKS: list = []  # keeps the override library alive


def block_builtins(tags) -> None:
    """Make the kernels of ``tags`` raise, for the rest of this process's life."""
    import warnings

    library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel" is the point
        for tag in sorted(set(tags) & set(KERNELS)):
            for op, key in KERNELS[tag]:
                library.impl(op, _refusal(tag), key)
    _BLOCKS.append(library)


def _refusal(tag: str):
    def refuse(*args, **kwargs):
        for monitor in _ACTIVE:
            monitor.used.add(tag)
        raise RuntimeError(f"a PyTorch {tag.replace('_', '-')} built-in was called: this exercise asks you to "
                           "write it yourself")
    return refuse


class Monitor:
    """Records the built-ins and autograd use of the student code run inside it."""

    def __init__(self, grad_expected: bool, refuse=frozenset()):
        self.grad_expected = grad_expected
        self.refuse = refuse  # tags whose built-ins fail when called, as their blocked kernels do
        self.used: set[str] = set()
        self.tampered = False
        monitor = self

        class Functions(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                monitor.saw_function(func, args)
                return func(*args, **(kwargs or {}))

        class Operators(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                monitor.saw_operator(func)
                return func(*args, **(kwargs or {}))

        self.functions, self.operators = Functions(), Operators()

    def saw_function(self, func, args) -> None:
        try:
            tag = BUILTINS.get(func)
        except TypeError:  # unhashable callables
            tag = None
        name = getattr(func, "__name__", "") or ""
        if tag is None:
            found = OPERATOR_NAME.search(name)
            tag = found.group(1) if found else None
        if tag is None and name == "_set_grad_enabled" and args and args[0] is True and not self.grad_expected:
            tag = "autograd"
        if tag is None and name in ("_make_dual", "_unpack_dual"):  # forward-mode AD (torch.func.jvp, forward_ad)
            tag = "autograd"
        if tag:
            self.used.add(tag)
            if tag in self.refuse:
                _refusal(tag)()

    def saw_operator(self, func) -> None:
        found = OPERATOR_NAME.search(str(func))
        if found and "backward" not in str(func):
            self.used.add(found.group(1))
            if found.group(1) in self.refuse:
                _refusal(found.group(1))()
        if not self.grad_expected and torch.is_grad_enabled():
            self.used.add("autograd")

    def __enter__(self):
        _ACTIVE.append(self)
        self.functions.__enter__()
        self.operators.__enter__()
        return self

    def __exit__(self, *exc):
        from torch.overrides import _get_current_function_mode_stack
        from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

        if self in _ACTIVE:
            _ACTIVE.remove(self)
        intact = (self.operators in _get_current_dispatch_mode_stack()
                  and self.functions in _get_current_function_mode_stack())
        if not intact:
            self.tampered = True
            return False
        self.operators.__exit__(*exc)
        self.functions.__exit__(*exc)
        return False

    def report(self) -> dict:
        return {"used": sorted(self.used), "tampered": self.tampered}


_ATTEMPTS: list[str] = []


def watch_for_escapes(home: str) -> None:
    """Record what the sandbox stops or limits anyway (writes outside ``home``, network, signals, forks).

    A Python audit hook cannot be removed once added; the sandbox blocks these actions
    whether or not they are recorded, and the record lets the result name the attempt.
    """
    import os
    import sys

    me = os.getpid()

    def hook(event: str, args: tuple) -> None:
        what = None
        if event == "open" and len(args) > 1 and isinstance(args[1], str) and set(args[1]) & set("wax+"):
            path = os.fsdecode(args[0]) if isinstance(args[0], (str, bytes)) else ""
            if path and not os.path.abspath(path).startswith(home + os.sep):
                what = f"writes outside its folder ({path[:80]})"
        elif event in ("socket.connect", "socket.bind", "socket.sendto"):
            what = "opens a network connection"
        elif event in ("os.kill", "os.killpg") and args and args[0] not in (me, 0):
            what = "sends a signal to another process"
        elif event in ("os.fork", "os.forkpty"):  # libraries start helper programs; none forks by hand
            what = "forks its own process"
        elif event == "ctypes.dlopen":
            what = "loads native code with ctypes"
        if what and len(_ATTEMPTS) < 20 and what not in _ATTEMPTS:
            _ATTEMPTS.append(what)

    sys.addaudithook(hook)


def drain_attempts() -> list[str]:
    found = list(_ATTEMPTS)
    _ATTEMPTS.clear()
    return found


class BoundedOutput(io.TextIOBase):
    """A stdout that keeps the first OUTPUT_LIMIT characters and counts the rest."""

    def __init__(self):
        self.parts: list[str] = []
        self.kept = 0
        self.total = 0

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        text = str(text)
        self.total += len(text)
        room = OUTPUT_LIMIT - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(room, len(text))
        return len(text)

    def getvalue(self) -> str:
        return "".join(self.parts)


def describe_error(error: BaseException) -> dict:
    message = str(error)
    if len(message) > ERROR_LIMIT:
        message = message[:ERROR_LIMIT] + "..."
    return {"type": type(error).__name__, "message": message}


def strip_magics(source: str) -> str:
    """IPython-only lines (%magic, !shell) become `pass`, keeping line numbers."""
    lines = []
    for line in source.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")):
            line = line[: len(line) - len(stripped)] + "pass"
        lines.append(line)
    return "\n".join(lines)


# Constructors the grader may ask for, to build inputs inside the worker.
CONSTRUCTORS = {
    "nn.Linear": nn.Linear, "nn.ReLU": nn.ReLU, "nn.GELU": nn.GELU, "nn.Identity": nn.Identity,
    "nn.Sequential": nn.Sequential, "nn.LayerNorm": nn.LayerNorm, "nn.Tanh": nn.Tanh,
    **{f"fixtures.{name}": value for name, value in vars(fixtures).items()
       if isinstance(value, type) and issubclass(value, nn.Module) and value.__module__ == fixtures.__name__},
}


class Executor:
    """One submission's namespace, and the request handlers the grader drives it with."""

    def __init__(self, block=frozenset(), block_kernels: bool = False):
        """``block``: tags of built-ins that fail when student code calls them (after its cells
        have run, so a notebook's own demo cells may still use them). ``block_kernels`` also
        replaces their aten kernels, which no Python-level trick gets around (sandbox only:
        it lasts for the life of the process)."""
        self.block = frozenset(block)
        self.block_kernels = block_kernels
        self.namespace: dict = {"__name__": "__main__"}
        self.objects: dict[int, object] = {}
        self.ids: dict[int, int] = {}
        self.output = BoundedOutput()

    # --- objects that stay here -------------------------------------------------------
    def handle_of(self, obj) -> wire.Handle:
        key = id(obj)
        if key not in self.ids:
            self.ids[key] = len(self.objects) + 1
            self.objects[self.ids[key]] = obj
        kind = type(obj)
        return wire.Handle(self.ids[key], f"{kind.__module__}.{kind.__qualname__}"[:200],
                           isinstance(obj, nn.Module))

    def resolve(self, number: int):
        if number not in self.objects:
            raise KeyError(f"no object #{number}")
        return self.objects[number]

    def encode(self, value) -> bytes:
        return wire.encode(value, on_object=self.handle_of)

    def decode(self, frame: bytes):
        return wire.decode(frame, resolve=self.resolve)

    # --- requests -----------------------------------------------------------------------
    def handle(self, request: dict) -> dict:
        op = request.get("op")
        method = getattr(self, f"op_{op}", None)
        if method is None:
            return {"error": {"type": "BadRequest", "message": f"unknown op {op!r}"}}
        stdout, stderr = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = self.output
        try:
            answer = method(request)
        except BaseException as error:  # student code may raise anything, SystemExit included
            answer = {"error": describe_error(error)}
        finally:
            sys.stdout, sys.stderr = stdout, stderr
        attempts = drain_attempts()
        if attempts:
            answer["attempts"] = attempts
        return answer

    def op_exec(self, request: dict) -> dict:
        """Run cells in order; a failing cell is recorded and the next one still runs."""
        results = []
        for cell in request["cells"]:
            try:
                code = compile(strip_magics(cell["source"]), f"<cell {cell['label']}>", "exec")
                exec(code, self.namespace)
                results.append({"label": cell["label"], "ok": True})
            except BaseException as error:
                results.append({"label": cell["label"], "ok": False, "error": describe_error(error),
                                "line": self.error_line(error, cell["label"])})
        if self.block_kernels and not _BLOCKS:
            block_builtins(self.block)
        names = sorted(k for k in self.namespace if not k.startswith("_"))
        return {"cells": results, "names": names[:1000]}

    @staticmethod
    def error_line(error: BaseException, label: str):
        if isinstance(error, SyntaxError):
            return error.lineno
        for frame in reversed(traceback.extract_tb(error.__traceback__)):
            if frame.filename == f"<cell {label}>":
                return frame.lineno
        return None

    def target(self, request: dict):
        """A request's target: "name" (a global of the notebook), "torch:nn.X", or an object."""
        target = request["target"]
        if type(target) is not str:
            return target
        if target.startswith("torch:"):
            return CONSTRUCTORS[target[len("torch:"):]]
        if target not in self.namespace:
            raise NameError(f"name '{target}' is not defined")
        return self.namespace[target]

    def op_has(self, request: dict) -> dict:
        return {"value": request["target"] in self.namespace}

    def op_call(self, request: dict) -> dict:
        """Call a function, a class or a method; optionally differentiate the result."""
        target = self.target(request)
        if request.get("method"):
            target = getattr(target, request["method"])
        args, kwargs = list(request.get("args", ())), dict(request.get("kwargs", {}))
        grad_wrt = request.get("grad_wrt") or []
        for index in grad_wrt:
            args[index] = args[index].detach().clone().requires_grad_(True)
        if request.get("seed") is not None:
            torch.manual_seed(request["seed"])
        no_grad = bool(request.get("no_grad"))
        monitor = Monitor(grad_expected=not no_grad, refuse=self.block)
        answer: dict = {}
        try:
            with torch.no_grad() if no_grad else torch.enable_grad():
                with monitor:
                    value = target(*args, **kwargs)
        except BaseException as error:
            answer["error"] = describe_error(error)
            answer["monitor"] = monitor.report()
            return answer
        answer["monitor"] = monitor.report()
        answer["value"] = value
        if grad_wrt:
            if not isinstance(value, torch.Tensor) or not value.requires_grad:
                answer["grads"] = [None] * len(grad_wrt)
            else:
                dout = request.get("dout")
                dout = torch.ones_like(value) if dout is None else dout
                inputs = [args[i] for i in grad_wrt]
                grads = torch.autograd.grad(value, inputs, dout.to(value.dtype), allow_unused=True)
                answer["grads"] = list(grads)
        if request.get("return_args"):
            answer["args_after"] = args
        return answer

    def op_getattr(self, request: dict) -> dict:
        value = self.target(request)
        for part in request["path"].split("."):
            value = getattr(value, part)
        return {"value": value}

    def op_describe(self, request: dict) -> dict:
        module = self.target(request)
        if not isinstance(module, nn.Module):
            return {"value": {"is_module": False, "type": type(module).__qualname__}}
        return {"value": {
            "is_module": True,
            "type": type(module).__qualname__,
            "training": bool(module.training),
            "parameters": {name: {"shape": list(p.shape), "is_parameter": isinstance(p, nn.Parameter),
                                  "requires_grad": bool(p.requires_grad)}
                           for name, p in module.named_parameters()},
            "buffers": {name: list(b.shape) for name, b in module.named_buffers()},
            "modules": {name: type(m).__qualname__ for name, m in module.named_modules() if name},
            "attributes": {k: v for k, v in vars(module).items()
                           if not k.startswith("_") and type(v) in (int, float, bool, str)},
            "parameter_ids": [id(p) for _, p in module.named_parameters(remove_duplicate=False)],
        }}

    def op_state_dict(self, request: dict) -> dict:
        return {"value": dict(self.target(request).state_dict())}

    def op_load_state_dict(self, request: dict) -> dict:
        self.target(request).load_state_dict(request["state"], strict=request.get("strict", True))
        return {"value": None}

    def op_set_grads(self, request: dict) -> dict:
        """Fill every parameter's .grad with a constant (to test code that must ignore it)."""
        for p in self.target(request).parameters():
            p.grad = torch.full_like(p, request["fill"])
        return {"value": None}

    def op_train(self, request: dict) -> dict:
        self.target(request).train(request["mode"])
        return {"value": None}

    def op_output(self, request: dict) -> dict:
        return {"value": {"kept": self.output.getvalue()[-2000:], "total": self.output.total}}
