"""Run a submission's cells, then answer the grader's requests about what they defined.

A request is a small dict (``op`` plus arguments, see ``Executor.handle``); the answer is
a dict of plain values and tensors, which ``wire`` encodes. Objects that are not plain
values (modules, classes, functions) stay here and travel as numbered handles.

Nothing here enforces the exercise's rules: ``guard`` does, and the worker's loop
(``zygote.serve``) attaches what it recorded to each answer. Whatever student code raises
(``KeyboardInterrupt``, ``SystemExit``, an exception whose ``__str__`` raises) becomes an
error answer for that request; the worker goes on.
"""

from __future__ import annotations

import io
import linecache
import sys

import torch
import torch.nn as nn

from autograder.sandboxed import fixtures, wire

ERROR_LIMIT = 300  # characters of an exception message sent back

# What an IPython cell's magics and shell lines turn into (``get_ipython().run_line_magic(...)``):
# nothing, in the grader. Defined in the notebook's own namespace, so it leads nowhere else.
IPYTHON_STUB = """
class _GraderShell:
    def __getattr__(self, name):
        return lambda *args, **kwargs: None
def get_ipython():
    return _GraderShell()
"""


# What the cells print goes to ``sys.stdout``, which student code can reach: the class is made in a namespace
# of its own, so that its methods' ``__globals__`` lead to nothing of the grader's (this module holds the
# grader's reference functions).
BOUNDED_OUTPUT = '''
class BoundedOutput(TextIOBase):
    """A stdout that keeps the first LIMIT characters and counts the rest."""

    def __init__(self):
        self.parts = []
        self.kept = 0
        self.total = 0

    def writable(self):
        return True

    def write(self, text):
        text = text if type(text) is str else "<not text>"
        self.total += len(text)
        room = LIMIT - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(room, len(text))
        return len(text)

    def getvalue(self):
        return "".join(self.parts)
'''
_made: dict = {"TextIOBase": io.TextIOBase, "LIMIT": wire.OUTPUT_LIMIT, "__name__": "output"}
exec(compile(BOUNDED_OUTPUT, "<output>", "exec"), _made)
BoundedOutput = _made.pop("BoundedOutput")
del _made


def describe_error(error: BaseException) -> dict:
    """Type and message of an exception, even one whose ``__str__`` or class name misbehaves."""
    try:
        kind = type(error).__name__
        kind = kind if type(kind) is str else "Exception"
    except BaseException:
        kind = "Exception"
    try:
        message = str(error)
        message = message if type(message) is str else ""
    except BaseException as inner:  # noqa: BLE001 - student code raised while describing its own error
        message = f"(its message could not be read: printing it raised {type(inner).__name__})"
    if len(message) > ERROR_LIMIT:
        message = message[:ERROR_LIMIT] + "..."
    return {"type": kind[:80], "message": message}


# Constructors the grader may ask for, to build inputs inside the worker. Modules only: the grader
# never asks the worker for a value it then believes (learner code ran here, and may have patched torch).
CONSTRUCTORS = {
    "nn.Linear": nn.Linear, "nn.ReLU": nn.ReLU, "nn.GELU": nn.GELU, "nn.Identity": nn.Identity,
    "nn.Sequential": nn.Sequential, "nn.LayerNorm": nn.LayerNorm, "nn.Tanh": nn.Tanh,
    **{f"fixtures.{name}": value for name, value in vars(fixtures).items()
       if isinstance(value, type) and issubclass(value, nn.Module) and value.__module__ == fixtures.__name__},
}


# The torch classes a structural check may ask about. ``describe`` says which of them a module is an
# instance of, read from its type's own method resolution order: a subclass counts, a class that only
# shares a name does not. Held here since import, so a notebook that rebinds ``nn.Linear`` changes nothing.
KINDS = {
    "Sequential": nn.Sequential, "ModuleList": nn.ModuleList, "Linear": nn.Linear, "ReLU": nn.ReLU,
    "GELU": nn.GELU, "Identity": nn.Identity, "LayerNorm": nn.LayerNorm,
    "MultiheadAttention": nn.MultiheadAttention, "Dropout": nn.modules.dropout._DropoutNd,
}


def kinds_of(module) -> list[str]:
    """The names, in ``KINDS``, of the torch classes ``module`` is an instance of."""
    return [name for name, kind in KINDS.items() if issubclass(type(module), kind)]


# Trusted stand-ins the grader may put in place of a learner's function while it checks a module
# that calls it (``substitute``), so that a bug in the function costs only the function's task.
# They are not callable on their own: the grader evaluates the same functions on its side.
REFERENCES = {f"fixtures.{name}": getattr(fixtures, name) for name in fixtures.REFERENCE_FUNCTIONS}


MISSING = object()


def cell_line(error: BaseException):
    """The line of the cell that was running when ``error`` was raised (the cell's frame is the
    second entry of the traceback: the first is the ``exec`` that ran it)."""
    traceback = error.__traceback__
    return traceback.tb_next.tb_lineno if traceback is not None and traceback.tb_next is not None else None


def remember_source(filename: str, source: str) -> None:
    """Put ``source`` in ``linecache`` under ``filename`` as IPython puts a cell's: no modification time, so
    ``linecache.checkcache`` keeps it (there is no file to compare it with)."""
    lines = [line + "\n" for line in source.splitlines()]
    linecache.cache[filename] = (len(source), None, lines, filename)


class Executor:
    """One submission's namespace, and the request handlers the grader drives it with."""

    def __init__(self):
        self.namespace: dict = {"__name__": "__main__"}
        exec(compile(IPYTHON_STUB, "<ipython stub>", "exec"), self.namespace)
        self.objects: dict[int, object] = {}
        self.ids: dict[int, int] = {}
        self.output = BoundedOutput()  # what the cells print: the notebook's own output, counted
        self.call_output = BoundedOutput()  # what graded calls print: nobody reads it, so it counts for nothing
        self.references = REFERENCES  # the sandboxed worker puts stand-ins that reach them through its audit hook

    # --- objects that stay here -------------------------------------------------------
    def handle_of(self, obj) -> wire.Handle:
        key = id(obj)
        if key not in self.ids:
            self.ids[key] = len(self.objects) + 1
            self.objects[self.ids[key]] = obj
        kind = type(obj)
        name = f"{type.__getattribute__(kind, '__module__')}.{type.__getattribute__(kind, '__qualname__')}"
        return wire.Handle(self.ids[key], str(name)[:200], issubclass(kind, nn.Module))

    def resolve(self, number: int):
        if number not in self.objects:
            raise KeyError(f"no object #{number}")
        return self.objects[number]

    def encode(self, value) -> bytes:
        return wire.encode(value, on_object=self.handle_of)

    def decode(self, payload: bytes):
        """A request from the grader (``Executor`` serves no one else)."""
        return wire.decode(payload, resolve=self.resolve, from_grader=True)

    # --- requests -----------------------------------------------------------------------
    def handle(self, request: dict) -> dict:
        op = request.get("op")
        method = getattr(self, f"op_{op}", None) if type(op) is str and op != "exec" else None
        if op == "exec":
            method = self.op_exec
        if method is None:
            return {"error": {"type": "BadRequest", "message": f"unknown op {str(op)[:40]!r}"}}
        stdout, stderr = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = self.output if op == "exec" else self.call_output
        try:
            answer = method(request)
        except BaseException as error:  # student code may raise anything, SystemExit included
            answer = {"error": describe_error(error)}
        finally:
            sys.stdout, sys.stderr = stdout, stderr
        return answer

    def compile_cells(self, cells: list) -> list:
        """Each cell's code object, or the error compiling it raised (all compiled before any runs).

        Each cell's text is registered with ``linecache`` under its filename, as IPython does, so
        that what reads a function's source back (``inspect.getsource``, TorchScript's compiler,
        a traceback quoting the line) finds it here as it does in Jupyter.
        """
        compiled = []
        for cell in cells:
            filename = f"<cell {cell['label']}>"
            try:
                remember_source(filename, cell["source"])
                compiled.append((cell["label"], compile(cell["source"], filename, "exec")))
            except BaseException as error:  # SyntaxError, or a source nested too deeply to compile
                compiled.append((cell["label"], error))
        return compiled

    def run_cells(self, compiled: list, upto=None, skip=()) -> dict:
        """Run compiled cells in order; a failing cell is recorded and the next one still runs.

        ``upto``: run only the first ``upto`` cells; ``skip``: labels of cells not to run (cells
        that ended an earlier worker, which the grader found by running fewer and fewer).
        """
        results = []
        stdout, stderr = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = self.output
        try:
            for label, code in compiled[:upto]:
                if label in skip:
                    continue
                if isinstance(code, BaseException):
                    results.append({"label": label, "ok": False, "error": describe_error(code),
                                    "line": getattr(code, "lineno", None)})
                    continue
                try:
                    exec(code, self.namespace)
                    results.append({"label": label, "ok": True})
                except BaseException as error:
                    results.append({"label": label, "ok": False, "error": describe_error(error),
                                    "line": cell_line(error)})
        finally:
            sys.stdout, sys.stderr = stdout, stderr
        names = sorted(k for k in self.namespace if type(k) is str and not k.startswith("_"))
        return {"cells": results, "names": names[:1000]}

    def op_exec(self, request: dict) -> dict:
        """Compile and run cells in one go (in-process use; the sandboxed worker installs its audit
        hook between the two, see ``zygote.serve``)."""
        return self.run_cells(self.compile_cells(request["cells"]), request.get("upto"), request.get("skip") or ())

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
        saved = self.substitute(request.get("substitute") or {})
        try:
            with torch.no_grad() if no_grad else torch.enable_grad():
                value = target(*args, **kwargs)
        finally:
            for name, before in saved.items():
                if before is MISSING:
                    self.namespace.pop(name, None)
                else:
                    self.namespace[name] = before
        answer: dict = {}
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

    def substitute(self, replacements: dict) -> dict:
        """Put trusted reference functions in place of notebook globals (defined or not); returns what to restore."""
        saved = {}
        for name, reference in replacements.items():
            if type(name) is str and type(reference) is str and reference in self.references:
                saved[name] = self.namespace.get(name, MISSING)
                self.namespace[name] = self.references[reference]
        return saved

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
            "kinds": kinds_of(module),
            "training": bool(module.training),
            "parameters": {name: {"shape": list(p.shape), "is_parameter": isinstance(p, nn.Parameter),
                                  "requires_grad": bool(p.requires_grad)}
                           for name, p in module.named_parameters()},
            "buffers": {name: list(b.shape) for name, b in module.named_buffers()},
            "modules": {name: type(m).__qualname__ for name, m in module.named_modules() if name},
            "module_kinds": {name: kinds_of(m) for name, m in module.named_modules() if name},
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
