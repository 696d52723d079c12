"""The rules of an exercise, watched inside the worker: set up before any student code runs.

Points follow run-time evidence, so what lives here records what student code did during each
graded call, and refuses only the tools that would hide it:

1. ``remove_capabilities`` (in the zygote, before it forks): PyTorch's Python implementations of
   the normalization family (``torch._refs``, ``torch._decomp``, ``torch._prims``, meta
   registrations, functorch), which compute a norm from elementary operators the monitor could
   not tell from the learner's own, get code that refuses. PyTorch's operators stay: a learner may
   compare with ``F.layer_norm`` in a cell. ``recording_kernels`` gives the two norms that
   decompose above the dispatch mode (``aten::rms_norm``, ``aten::_fused_rms_norm``) kernels that
   record their use and compute exactly what PyTorch's do.
2. ``audit_hook`` (in each worker, after the cells are compiled, before they run): refuses the
   tools that could undo the monitor or reach the grader's own objects (ctypes, building code
   objects, the garbage collector's object lists, tracers and profilers, frames of tracebacks and
   generators, ``sys._getframe`` but for library code that hands back only text, unmarshalling
   code outside the import system, replacing a function's code or defaults, importing PyTorch's
   implementation packages or the grader's own modules, opening the grader's files) and records
   every attempt; it also keeps every source compiled at run time (a library's too: ``typing``
   evaluates string annotations), so the grader scans generated code too. It is also the
   **evidence channel**: every record (``evidence(tag)``) goes through it to a pipe only the
   grader reads, as it happens, and the **vault**: autograd's entry points that run below the
   monitor's modes (``take_away_autograd_entries``: functorch's transforms, forward-mode levels,
   saved-tensor hooks) reach their originals only through it, which records ``autograd`` first.
   An audit hook cannot be listed, read or removed from Python. ``permit`` lets the worker's own
   loop switch the code recorder on and off.
3. ``Monitor``: a function mode and a dispatch mode, entered for good in the zygote before it
   forks (``take_away_mode_switches`` then removes the functions that pop a dispatch mode or hide
   its key). The worker has exactly one thread (its seccomp filter refuses new ones), so the
   thread-local modes see everything student code does: each use of a normalization built-in,
   every operator that records an autograd graph, makes dual numbers or is handed a tensor from a
   graph recorded earlier, and every call a tensor subclass's own handler takes over. Their
   handlers hold what they call as defaults. ``seal`` fingerprints the monitor, its modes and this
   module, so that a patch that outlives a request shows; ``dispatch_state`` is compared around
   every graded call; ``autograd_watch`` is a pair of saved-tensor hooks the worker sets around
   the calls of a part that forbids autograd, which records inside autograd itself.
4. ``code_recorder``: a profile function, installed only while a graded request runs, that notes
   which notebook code (cell and line range) the request ran, so that a construct the scan found
   counts only against the parts whose calls ran it.

What the hook and the recorder saw, and the fingerprint, reach the grader in the trailer that
follows the answer to the request during which it happened, stamped with a number that student
code never sees (``zygote.serve``); the evidence went before, on its own pipe.
"""

from __future__ import annotations

import operator
import re
import sys

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from autograder.sandboxed.wire import EVIDENCE_TAGS

# A norm of the family in any operator or function name, whatever separates its parts: ``aten::layer_norm``,
# ``quantized.layer_norm.default``, ``_fused_rms_norm``, ``onednn::qbatch_norm2d`` (q for quantized), ``BatchNorm1d``
# and ``RMSNorm`` once camel case is split. Not ``norm``, ``renorm``, ``linalg_vector_norm``, ``weight_norm``.
FAMILY = re.compile(r"(?<![a-z])q?(layer|batch|group|instance|rms)_?norm")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
NORM_TAGS = ("layer_norm", "batch_norm", "group_norm", "instance_norm", "rms_norm")
# PyTorch's own Python implementations of operators: references, decompositions, primitives, meta
# functions and functorch. A student has no use for them; they contain a norm's forward and backward.
IMPLEMENTATIONS = ("torch._refs", "torch._decomp", "torch._prims", "torch._prims_common", "torch._meta_registrations",
                   "torch._functorch", "torch._inductor", "torch._dynamo", "torch._higher_order_ops",
                   "torch.fx.experimental", "torch._subclasses")
PRELOADED = ("torch._refs", "torch._refs.nn.functional", "torch._refs.linalg", "torch._refs.special", "torch._decomp",
             "torch._decomp.decompositions", "torch._prims", "torch._meta_registrations", "torch._functorch",
             "torch.func")
AUTOGRAD_OPS = re.compile(r"_make_dual|_unpack_dual|_fw_primal")


class Refused(ValueError):
    """What student code gets when it reaches for something the exercise or the sandbox forbids.

    A ValueError, so that the standard library's own callers of ``sys._getframe`` (namedtuple,
    enum, typing) fall back quietly, as they do where frames are not available.
    """


def tag_of(name: str, _family=FAMILY.search, _camel=_CAMEL.sub) -> str | None:
    """The norm tag an operator or function name belongs to (``"layer_norm"``...), or None."""
    found = _family(str.lower(_camel("_", name)))
    return found.group(1) + "_norm" if found else None


def refusal_message(what: str) -> str:
    return (f"{what} was called, and this exercise forbids it: write the computation yourself "
            "from elementary tensor operations")


# --- 1. capabilities removed before any student code ------------------------------------

def remove_capabilities(tags) -> list:
    """Neuter PyTorch's Python implementations of the normalization family when ``tags`` name a norm.

    PyTorch's own operators stay: a learner may compare with ``F.layer_norm`` in a cell, and a use
    inside a graded call is what the monitor records (the evidence that costs a part its points).
    The Python implementations (``torch._refs``, ``torch._decomp``, ...) compute a norm from
    elementary operators, which the monitor could not tell from the learner's own; nothing honest
    uses them. Returns what must stay alive for the refusal to hold (nothing, now).
    """
    if not set(tags) & set(NORM_TAGS):
        return []
    import importlib

    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except Exception:  # an optional package that fails to import cannot be used either
            pass
    _neuter_python_implementations()
    return []


def _neuter_python_implementations() -> None:
    """Give every norm function of PyTorch's Python implementations code that refuses."""
    import gc
    import os

    roots = tuple(os.path.dirname(sys.modules[name].__file__) if sys.modules[name].__file__.endswith("__init__.py")
                  else sys.modules[name].__file__
                  for name in IMPLEMENTATIONS if name in sys.modules and getattr(sys.modules[name], "__file__", None))
    for obj in gc.get_objects():
        if type(obj) is not type(_neuter_python_implementations):
            continue
        code = obj.__code__
        if "norm" not in code.co_name.lower() or not code.co_filename.startswith(roots):
            continue
        obj.__code__ = _code_refusal(code, f"PyTorch's Python implementation {obj.__module__}.{obj.__qualname__}")


def _code_refusal(code, what: str):
    """A code object that raises ``Refused``, with as many free variables as ``code`` has."""
    free = ", ".join(f"v{i}" for i in range(len(code.co_freevars)))
    source = (f"def make({free}):\n    def refuse(*args, **kwargs):\n        raise ValueError({refusal_message(what)!r})\n"
              f"        {free or 'pass'}\n    return refuse\n")
    namespace: dict = {}
    exec(compile(source, "<refusal>", "exec"), namespace)
    return namespace["make"](*range(len(code.co_freevars))).__code__.replace(co_name=code.co_name)


# The C functions and guards that pop a dispatch mode off its stack, or hide the Python dispatch
# key: with them, student code could step around the monitor's dispatch mode, the one that sees
# every operator. Taken away in the zygote once the monitor is on (``take_away_mode_switches``),
# from ``torch._C`` and from every module that imported one. (The function-mode stack cannot be
# frozen the same way: PyTorch's own Python code pops it to run a mode's handler.)
MODE_SWITCHES = ("_DisableTorchDispatch", "ExcludeDispatchKeyGuard", "_ExcludeDispatchKeyGuard",
                 "_SetExcludeDispatchKeyGuard", "_ForceDispatchKeyGuard", "_IncludeDispatchKeyGuard",
                 "_RestorePythonTLSSnapshot", "_dispatch_tls_set_dispatch_key_excluded",
                 "_dispatch_tls_set_dispatch_key_included", "_pop_torch_dispatch_stack",
                 "_push_on_torch_dispatch_stack", "_set_dispatch_mode", "_unset_dispatch_mode")


def take_away_mode_switches() -> None:
    """Replace every mode switch, wherever a module holds it, by a function that refuses."""
    switches = [getattr(torch._C, name) for name in MODE_SWITCHES if hasattr(torch._C, name)]
    _replace_everywhere(switches, lambda switch: _switch_refusal(switch.__name__))


def _replace_everywhere(originals: list, replacement) -> None:
    """Put ``replacement(original)`` in place of each original in every module namespace that holds it."""
    by_id = {id(original): original for original in originals}
    made = {}
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if type(namespace) is not dict:
            continue
        for key, value in list(namespace.items()):
            if id(value) in by_id:
                if id(value) not in made:
                    made[id(value)] = replacement(value)
                namespace[key] = made[id(value)]


def _switch_refusal(name: str):
    def refuse(*args, **kwargs):
        sys.audit("autograder.switch", name)  # the worker's audit hook notes the attempt
        raise Refused(f"the grader's sandbox refuses this: torch._C.{name} would switch off the grader's monitor")

    return refuse


# Entry points into autograd's machinery that run below the monitor's modes or hand autograd hooks of its own:
# functorch's transforms (their gradients are computed on wrapped tensors, above the dispatch mode, which sees
# only plain ones), forward-mode levels (dual numbers), and the functions that push, pop or switch off
# saved-tensor hooks (the autograd watch is a pair of such hooks). Each is replaced, wherever a module holds it,
# by a function that reaches the original only through the worker's audit hook, which sends ``autograd`` first.
SAVED_TENSOR_HOOKS = ("_push_saved_tensors_default_hooks", "_pop_saved_tensors_default_hooks",
                      "_saved_tensors_hooks_disable", "_saved_tensors_hooks_enable")
POP_HOOKS = "_pop_saved_tensors_default_hooks"
REFERENCE = "fixtures."  # vault names of the grader's reference functions (``executor.REFERENCES``)
THROUGH_THE_HOOK = (("_functorch", "_grad_increment_nesting"), ("_functorch", "_jvp_increment_nesting"),
                    ("", "_enter_dual_level"), *(("_autograd", name) for name in SAVED_TENSOR_HOOKS))


def take_away_autograd_entries() -> dict:
    """Replace the functions of ``THROUGH_THE_HOOK`` wherever a module holds them by functions that call the
    originals through the audit hook (``VAULT``); returns the originals, by name, which only the audit hook and
    the worker's loop then hold. In the zygote, before any fork."""
    originals = {}
    for module, name in THROUGH_THE_HOOK:
        holder = getattr(torch._C, module) if module else torch._C
        if hasattr(holder, name):
            originals[name] = getattr(holder, name)
    by_name = {id(original): name for name, original in originals.items()}
    _replace_everywhere(list(originals.values()), lambda original: through_the_hook(by_name[id(original)]))
    return originals


def through_the_hook(name: str, audit=sys.audit, make_list=list):
    """A function that calls the vault's ``name`` (its original lives only in the audit hook).

    Arguments pass through as they came, keywords too; what the function itself uses is in its closure: a
    learner who rewrites that only breaks the function, since the original lives in the audit hook alone."""
    def call(*args, **kwargs):
        box = make_list()
        audit(VAULT, name, args, kwargs, box)
        if not box:
            raise Refused(f"the grader's sandbox refuses this: {name} is not available here")
        return box[0]

    return call


def autograd_watch():
    """``(pack, unpack)``: saved-tensor hooks that send ``autograd`` as evidence whenever autograd saves a tensor
    for a graph or unpacks one to differentiate. The worker pushes them around a graded call of a part that
    forbids autograd: they sit in autograd itself, below every dispatch key, so a graph recorded with the
    monitor's modes switched off still shows. (Not around other calls: ``torch.func`` refuses to run while
    saved-tensor hooks are set.)"""
    def pack(tensor, _send=evidence):
        _send("autograd")
        return tensor

    def unpack(tensor, _send=evidence):
        _send("autograd")
        return tensor

    return pack, unpack


def dispatch_state():
    """``state() -> tuple``: what decides whether the monitor sees a call: the dispatch keys this thread
    includes and excludes, whether torch functions are enabled, both mode stacks (their lengths and what is
    on them) and the saved-tensor hooks on top. Read with PyTorch's C functions, taken now. The worker
    compares it before and after every graded call with what it was before any student code ran."""
    C = torch._C
    excluded, included, enabled = C._dispatch_tls_local_exclude_set, C._dispatch_tls_local_include_set, \
        C._is_torch_function_enabled
    all_disabled = getattr(C, "_is_torch_function_all_disabled", lambda: False)
    function_count, function_at = C._len_torch_function_stack, C._get_function_stack_at
    dispatch_count, dispatch_at = C._len_torch_dispatch_stack, C._get_dispatch_stack_at
    top_hooks, text, identity = C._autograd._top_saved_tensors_default_hooks, repr, id

    def state() -> tuple:
        functions, dispatched = function_count(), dispatch_count()
        hooks = top_hooks(True)
        return (text(excluded()), text(included()), enabled(), all_disabled(), functions,
                tuple(identity(function_at(i)) for i in range(min(functions, 8))), dispatched,
                tuple(identity(dispatch_at(i)) for i in range(min(dispatched, 8))),
                None if hooks is None else identity(hooks[0]))

    return state


# --- 2. the audit hook ----------------------------------------------------------------------

REFUSED_EVENTS = {
    "ctypes.dlopen": "loads native code with ctypes", "ctypes.dlsym": "looks up native code with ctypes",
    "ctypes.dlsym/handle": "looks up native code with ctypes", "ctypes.call_function": "calls native code with ctypes",
    "ctypes.addressof": "reads raw memory with ctypes", "ctypes.cdata": "reads raw memory with ctypes",
    "ctypes.cdata/buffer": "reads raw memory with ctypes", "ctypes.string_at": "reads raw memory with ctypes",
    "ctypes.wstring_at": "reads raw memory with ctypes", "ctypes.PyObj_FromPtr": "turns an address into an object",
    "code.__new__": "builds a code object by hand", "marshal.load": "unmarshals code",
    "gc.get_objects": "lists every object in the interpreter", "gc.get_referrers": "searches objects' referrers",
    "gc.get_referents": "searches objects' referents", "sys.settrace": "installs a tracer",
    "sys.setprofile": "installs a profiler", "sys._current_frames": "reads the interpreter's frames",
    "sys.addaudithook": "adds an audit hook",
}
QUIET_REFUSALS = {"sys._getframe"}  # also refused, without a note: the standard library asks for it harmlessly
IMPORT_SYSTEM = {"<frozen importlib._bootstrap_external>", "<frozen importlib._bootstrap>"}  # unmarshals .pyc files
FRAME_ATTRIBUTES = {"tb_frame", "gi_frame", "cr_frame", "ag_frame"}
MAX_SOURCES = 64
# What makes a source a library compiles worth scanning: a way to reach objects, frames, names or code that the
# scan reads for (generated __init__s and parser tables have none of these).
WORTH_A_LOOK = re.compile(r"getattr|eval|exec|compile|import|_C\b|subclasses|globals|closure|cell_contents|"
                          r"_getframe|f_back|\bgc\b|ctypes|library|overrides|dispatch|Disable|\bvars\b|__dict__|"
                          r"__self__|__func__|__defaults__|_modes?\b|sys\b")
MAX_SOURCE_CHARS = 64 * 1024


EVIDENCE = "autograder.evidence"  # the audit event that carries one tag of evidence out of the worker
VAULT = "autograder.vault"  # the audit event through which a taken-away function reaches its original
PROTECTED_ATTRIBUTES = {"__defaults__", "__kwdefaults__"}  # what the grader's functions hold their callees in


def evidence(tag: str, _audit=sys.audit) -> None:
    """Send one tag of evidence out of the worker now (``audit_hook`` writes it to the evidence channel)."""
    _audit(EVIDENCE, tag)


def audit_hook(home: str, me: int, evidence_fd: int | None = None, vault: dict | None = None):
    """Install the worker's audit hook.

    Returns ``drain() -> (attempts, sources)``, ``permit(function, *args)``, which calls one
    refused function for the trusted loop (``sys.setprofile``, to switch the code recorder on and
    off around a graded call), and ``arm(names)``, the grader's reference functions (``REFERENCE``
    names in the vault) that may run during the next request. All stay in the loop's frame, out of
    student code's reach.

    The hook is also where the worker's evidence leaves it, as it happens: each ``EVIDENCE`` event
    (``evidence(tag)``, from the monitor, the recording kernels and the autograd watch) writes the tag
    to ``evidence_fd``, a pipe whose other end only the grader reads, once per tag and request. What
    is written cannot be read back or taken back, and nothing but this hook holds the state: an audit
    hook cannot be listed, read or removed from Python. A tag the worker cannot write ends the worker
    (exit status 71), which the grader takes as a changed monitor. ``vault``: name -> an original that
    ``take_away_autograd_entries`` replaced with a function that reaches it only through this hook.
    """
    import os
    import traceback

    permitted = [False]
    attempts: list[str] = []
    sources: list[str] = []
    blocked_imports = IMPLEMENTATIONS + ("autograder",)
    grader_files = os.path.dirname(os.path.dirname(os.path.realpath(__file__))) + os.sep  # the worker's own code
    written: set = set()  # tags written during this request
    armed: set = set()  # the grader's references that may run now (``arm``: the request substitutes them)
    write, leave, originals = os.write, os._exit, dict(vault or {})
    watch_pack = originals.pop("watch", (None,))[0]  # the autograd watch's pack hook
    top_hooks = torch._C._autograd._top_saved_tensors_default_hooks

    def send(tag) -> None:
        tag = tag if type(tag) is str and tag in EVIDENCE_TAGS else "tampered"
        if tag in written:
            return
        written.add(tag)
        if evidence_fd is None:
            return
        try:
            data = str.encode(tag, "ascii") + b"\n"
            while data:
                data = data[write(evidence_fd, data):]
        except BaseException:  # noqa: BLE001 - the channel was taken away: the worker ends, the grader sees why
            leave(71)

    def from_vault(args: tuple) -> None:
        """``(name, arguments, keywords, box)``: call the original ``name``, its result into ``box``.
        Pushing or switching off saved-tensor hooks is autograd's machinery (evidence where a part forbids
        it); popping the autograd watch off its stack is tampering, and refused."""
        name, arguments, keywords, box = args if len(args) == 4 else (None, None, None, None)
        original = originals.get(name) if type(name) is str else None
        if original is None or type(box) is not list or type(arguments) is not tuple or type(keywords) is not dict:
            raise Refused("the grader's sandbox refuses this call")
        if name.startswith(REFERENCE):
            if name not in armed:  # kept from a module check and called since: not the learner's own work
                send("reference")
                raise Refused("the grader's sandbox refuses this: the grader's reference implementation stands in "
                              "for your function only while the grader checks a module that calls it")
            box.append(original(*arguments, **keywords))
            return
        if name == POP_HOOKS:
            top = top_hooks(True)
            if top is not None and top[0] is watch_pack:
                send("tampered")
                raise Refused("the grader's sandbox refuses this: it would take away the grader's autograd watch")
        else:
            send("autograd")
        box.append(original(*arguments, **keywords))

    def note(what: str) -> None:
        """Record what the sandbox refused or stopped: reported with the submission, never held on."""
        if len(attempts) < 20 and what not in attempts:
            attempts.append(what)

    looking = [False]  # inside the hook's own look at its caller (an audited event too)
    text_only = {(traceback.__file__, name) for name in ("extract_stack", "format_stack", "print_stack")}

    def caller() -> tuple[str, str]:
        """File and function of the code that raised the event (the frame below the hook)."""
        looking[0] = True
        try:
            code = sys._getframe(2).f_code
            return code.co_filename, code.co_name
        except ValueError:
            return "", ""
        finally:
            looking[0] = False

    def graders(function) -> bool:
        """Is ``function`` one of the grader's own (its defaults hold what the monitor calls)? Libraries set the
        defaults of their own functions (matplotlib does): that is no one's business."""
        code = getattr(function, "__code__", None)
        name = getattr(code, "co_filename", None)
        return type(name) is str and name.startswith(grader_files)

    def callers(count: int) -> list[tuple[str, str]]:
        """``caller()`` and its callers, ``count`` frames in all (called from the hook, as ``caller`` is)."""
        looking[0] = True
        try:
            found, frame = [], sys._getframe(2)
            while frame is not None and len(found) < count:
                found.append((frame.f_code.co_filename, frame.f_code.co_name))
                frame = frame.f_back
            return found
        except ValueError:
            return []
        finally:
            looking[0] = False

    # TorchScript scripting a container (nn.Sequential, nn.ModuleList) defines its __len__ through
    # ScriptModule.define, which resolves names in the frame of define's caller, and of no other:
    # PyTorch's own frame when PyTorch calls it, the learner's own when the learner does.
    import inspect

    from torch import _jit_internal
    from torch.jit import _script

    torchscript_define = [(inspect.__file__, "currentframe"),
                          (_jit_internal.__file__, "createResolutionCallbackFromFrame"),
                          (_script.__file__, "define")]

    def frames_stay_inside(where: tuple[str, str]) -> bool:
        """Library code that reads frames but hands back only text (stack summaries, warnings' levels)."""
        plotting = sys.modules.get("matplotlib._api")
        return where in text_only or (plotting is not None and where == (getattr(plotting, "__file__", None),
                                                                         "warn_external"))

    def hook(event: str, args: tuple) -> None:
        if event == EVIDENCE:
            send(args[0] if args else None)
            return
        if event == VAULT:
            from_vault(args)
            return
        if looking[0] or permitted[0]:
            return
        if event == "marshal.loads" and caller()[0] not in IMPORT_SYSTEM:
            note("unmarshals code")
            raise Refused("the grader's sandbox refuses this: the code unmarshals code")
        if event == "autograder.switch":
            note(f"tries to switch off the grader's monitor (torch._C.{str(args[0])[:60] if args else ''})")
            return
        if event == "sys._getframe" and (frames_stay_inside(caller()) or callers(3) == torchscript_define):
            return
        if event in REFUSED_EVENTS:
            note(REFUSED_EVENTS[event])
            raise Refused(f"the grader's sandbox refuses this: the code {REFUSED_EVENTS[event]}")
        if event in QUIET_REFUSALS:
            raise Refused("frames are not available in the grader's sandbox")
        if event == "object.__getattr__" and len(args) > 1 and args[1] in FRAME_ATTRIBUTES:
            raise Refused("frames are not available in the grader's sandbox")
        if event in ("object.__setattr__", "object.__delattr__") and len(args) > 1 and \
                (args[1] == "__code__" or args[1] in PROTECTED_ATTRIBUTES and graders(args[0])):
            note("replaces a function's code, or the defaults of one of the grader's")
            raise Refused("the grader's sandbox refuses this: the code replaces a function's code, or the defaults "
                          "of one of the grader's functions")
        if event == "compile":
            source = args[0] if args else None
            if type(source) is bytes:
                source = bytes.decode(source, "utf-8", "replace")
            if caller()[0].startswith("/"):
                # A library compiling: its own generated code (namedtuple, dataclasses, a parser's tables), or text
                # it was handed (typing evaluates string annotations). Kept where it could do what the scan looks for.
                if type(source) is str and WORTH_A_LOOK.search(source) and len(sources) < MAX_SOURCES:
                    sources.append(str.__getitem__(source, slice(0, MAX_SOURCE_CHARS)))
                return
            if type(source) is not str:  # an AST or a str subclass: not text the grader can scan as given
                note("compiles code from something other than plain text")
            elif len(sources) < MAX_SOURCES:
                sources.append(str.__getitem__(source, slice(0, MAX_SOURCE_CHARS)))
            else:
                note("compiles more code at run time than the grader inspects")
        elif event == "import" and args and isinstance(args[0], str) and _within(args[0], blocked_imports):
            note(f"imports {args[0]}, which the sandbox keeps out of reach")
            raise Refused(f"the grader's sandbox refuses this: the code imports {args[0]}")
        elif event == "open" and args and type(args[0]) in (str, bytes) and os.path.abspath(
                args[0] if type(args[0]) is str else bytes.decode(args[0], "utf-8", "replace")).startswith(grader_files):
            note("reads the grader's own files")
            raise Refused("the grader's sandbox refuses this: the code reads the grader's own files")
        elif event == "open" and len(args) > 1 and isinstance(args[1], str) and set(args[1]) & set("wax+"):
            path = args[0] if type(args[0]) is str else bytes.decode(args[0], "utf-8", "replace") \
                if type(args[0]) is bytes else ""
            if path and not os.path.abspath(path).startswith(home + os.sep):
                note(f"writes outside its folder ({path[:80]})")
        elif event in ("socket.connect", "socket.bind", "socket.sendto"):
            note("opens a network connection")
        elif event in ("os.kill", "os.killpg") and args and args[0] not in (me, 0):
            note("sends a signal to another process")
        elif event in ("os.fork", "os.forkpty"):
            note("forks its own process")
        elif event in ("os.system", "os.exec"):  # libraries may try subprocess quietly (matplotlib's fc-list)
            note("starts a process")

    def drain() -> tuple[list[str], list[str]]:
        found, compiled = list(attempts), list(sources)
        attempts.clear()
        sources.clear()
        written.clear()  # a new request: every tag is written again when it happens
        return found, compiled

    def permit(function, *args):
        permitted[0] = True
        try:
            return function(*args)
        finally:
            permitted[0] = False

    def arm(names) -> None:
        armed.clear()
        armed.update(names)

    sys.addaudithook(hook)
    return drain, permit, arm


def _within(module: str, packages) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


# --- 3. the monitor ---------------------------------------------------------------------------

BUILTINS = {
    torch.autograd.grad: "autograd", torch.autograd.backward: "autograd", torch.Tensor.backward: "autograd",
}
# Taken from PyTorch's C types now: student code can shadow ``torch.is_grad_enabled`` or
# ``torch.Tensor.requires_grad`` with Python attributes, but not these.
_grad_enabled = torch._C.is_grad_enabled
_TensorBase = torch._C.TensorBase
_requires_grad = torch._C.TensorBase.requires_grad.__get__


# PyTorch's own handlers: the default __torch_function__ of torch.Tensor and the disabled ones (nn.Parameter's).
_DEFAULT_HANDLERS = {torch.Tensor.__torch_function__.__func__, torch._C._disabled_torch_function_impl,
                     torch._C._disabled_torch_dispatch_impl}
_handler_of: dict = {}  # (type, name) -> whether the type has a handler of its own


def _own_handler(types, name: str) -> bool:
    """Does one of ``types`` (the tensor types PyTorch is about to hand the call to) define ``name`` itself?"""
    for kind in types:
        known = _handler_of.get((kind, name))
        if known is None:
            handler = getattr(kind, name, None)
            known = _handler_of[(kind, name)] = getattr(handler, "__func__", handler) not in _DEFAULT_HANDLERS
        if known:
            return True
    return False


def _carries_grad(args, kwargs, _base=_TensorBase, _requires=_requires_grad, _values=dict.values) -> bool:
    """True when some tensor argument requires grad (with grad mode on, the operator records a graph;
    with it off, the tensor comes from a graph recorded earlier). On every operator: kept lean."""
    for values in (args, _values(kwargs) if kwargs else ()):
        for value in values:
            if isinstance(value, _base):
                if _requires(value):
                    return True
            elif type(value) in (list, tuple):
                for item in value:
                    if isinstance(item, _base) and _requires(item):
                        return True
    return False


class Monitor:
    """Records the normalization built-ins and the autograd use of the code run while it is active.

    Tags recorded: a norm's (``layer_norm``...), ``autograd`` (the engine's entry points, forward-mode
    dual numbers, or any operator given a tensor that requires grad or carries a graph: under the
    hand-written backward parts' ``no_grad`` that is a recorded graph being replayed) and
    ``subclass`` (a tensor subclass's own ``__torch_function__`` or ``__torch_dispatch__`` handled
    the call: PyTorch runs it with this mode switched off, so what it does is out of sight).

    ``refuse``: tags whose built-ins fail when called (the in-kernel nbgrader mode).
    """

    def __init__(self, refuse=frozenset()):
        self.refuse = frozenset(refuse)
        self.used: set[str] = set()
        self.functions_seen: dict = {}  # function -> its tag or None
        self.operators_seen: dict = {}  # operator -> (its norm tag or None, whether it makes dual numbers)
        monitor = self

        # The handlers hold what they call as defaults (a function's defaults cannot be replaced in the worker):
        # patching the monitor's attributes during a call does not change what they record.
        class Functions(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None, _saw=self.saw_function):
                _saw(func, types)
                return func(*args, **(kwargs or {}))

        class Operators(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                return False  # else PyTorch wraps the handler in one that imports torch._dynamo on first use

            def __torch_dispatch__(self, func, types, args=(), kwargs=None, _saw=self.saw_operator):
                _saw(func, types, args, kwargs)
                return func(*args, **(kwargs or {}))

        # The function mode sees Python-level entry points the dispatch mode cannot tell apart (functorch's
        # transforms run their autograd below it); the dispatch mode sees every operator, however reached.
        self.functions, self.operators = Functions(), Operators()

    def record(self, tag: str, _evidence=evidence) -> None:
        _evidence(tag)  # out of the worker first: nothing done to ``used`` later can take it back
        self.keep(tag)

    def keep(self, tag: str) -> None:
        """``tag`` in this process's own record (the in-kernel mode reads it; it refuses what it must)."""
        self.used.add(tag)
        if tag in self.refuse:
            raise Refused(refusal_message(f"a PyTorch {tag.replace('_', '-')} built-in"))

    def saw_function(self, func, types=(), _own=_own_handler, _evidence=evidence, _builtins=BUILTINS,
                     _tag_of=tag_of, _dual=AUTOGRAD_OPS.search) -> None:
        if types and _own(types, "__torch_function__"):
            _evidence("subclass")
            self.keep("subclass")
        try:
            tag = self.functions_seen.get(func, False)
        except TypeError:  # unhashable callables
            tag = False
        if tag is False:
            tag = _builtins.get(func) if func in _builtins else None
            name = getattr(func, "__name__", "") or ""
            if tag is None and type(name) is str:
                tag = _tag_of(name) or ("autograd" if _dual(name) else None)
            try:
                self.functions_seen[func] = tag
            except TypeError:
                pass
        if tag:
            _evidence(tag)
            self.keep(tag)

    def saw_operator(self, func, types, args, kwargs, _own=_own_handler, _evidence=evidence,
                     _carries=_carries_grad, _tag_of=tag_of, _dual=AUTOGRAD_OPS.search) -> None:
        if types and _own(types, "__torch_dispatch__"):
            _evidence("subclass")
            self.keep("subclass")
        known = self.operators_seen.get(func)
        if known is None:
            name = str(func)
            known = self.operators_seen[func] = (_tag_of(name) if "backward" not in name else None,
                                                 bool(_dual(name)))
        tag, dual = known
        if tag:
            _evidence(tag)
            self.keep(tag)
        if dual or _carries(args, kwargs):
            _evidence("autograd")
            self.keep("autograd")

    def __enter__(self):
        self.functions.__enter__()
        self.operators.__enter__()
        return self

    def __exit__(self, *exc):
        if self.intact():
            self.operators.__exit__(*exc)
            self.functions.__exit__(*exc)
        return False

    def intact(self) -> bool:
        """Are the modes still where they were entered?"""
        from torch.overrides import _get_current_function_mode_stack
        from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

        return self.operators in _get_current_dispatch_mode_stack() and \
            self.functions in _get_current_function_mode_stack()

    def drain(self) -> dict:
        report = {"used": sorted(self.used), "tampered": not self.intact()}
        self.used = set()
        return report

    def seal(self):
        """``unchanged() -> bool``: are the monitor's objects the ones in place now?

        Student code can patch Python objects it reaches; a patch to the monitor, its modes, their
        classes or this module that outlives a request is evidence that the monitor was switched
        off. Made in the zygote, before any student code; called by the worker's loop after each
        request.
        """
        classes = (Monitor, type(self.functions), type(self.operators))
        functions = [value for cls in classes for value in vars(cls).values() if hasattr(value, "__code__")]
        cells = [cell for function in functions for cell in function.__closure__ or ()]
        spaces = [globals()] + [vars(cls) for cls in classes]
        # Compared object by object with ``operator.is_``, in C: ``id`` and reading ``__code__`` are audit events,
        # each a call of the worker's audit hook (216 of them made this check 0.19 ms a request), and ``==`` would
        # ask the objects themselves. The functions' code is not read: the audit hook refuses every assignment
        # of a ``__code__``. These built-ins are this closure's own, so patching ``builtins`` changes nothing.
        identical, each, every, together, copy, count = operator.is_, map, all, tuple, dict, len

        def objects() -> tuple:
            mine = copy(vars(self))
            mine.pop("used", None)  # a fresh set every request
            found = []
            for space in spaces + [mine]:
                found += space  # the names, and what they name
                found += space.values()
            found += (cell.cell_contents for cell in cells)
            return together(found)

        sealed = objects()

        def unchanged() -> bool:
            now = objects()
            return count(now) == count(sealed) and every(each(identical, now, sealed))

        return unchanged


# --- 4. what student code ran during a graded call -------------------------------------------------

MAX_CODES = 100_000  # distinct code objects looked at per request (library code included)
MAX_CELL_CODES = 4096  # notebook code objects recorded per request


def code_recorder():
    """``(profile, drain)``: a profile function that notes the notebook code objects called while it
    is installed, and ``drain() -> ["label:first:last", ...]`` naming them (cell and line range). The
    grader uses it to tell which cells' code a graded call ran, so that a construct found in a cell
    counts only against the parts whose calls ran it.
    """
    seen: dict = {}  # code -> is it notebook code
    cells: dict = {}

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            known = seen.get(code)
            if known is None and len(seen) < MAX_CODES:
                name = code.co_filename
                known = seen[code] = type(name) is str and name.startswith("<cell ") and name.endswith(">")
            if known and len(cells) < MAX_CELL_CODES:
                cells[code] = None

    def drain() -> list[str]:
        ran = set()
        for code in cells:
            lines = [line for _, _, line in code.co_lines() if line is not None]
            ran.add(f"{code.co_filename[6:-1]}:{min([code.co_firstlineno, *lines])}:{max([code.co_firstlineno, *lines])}")
        cells.clear()
        return sorted(ran)

    return profile, drain


# --- 5. recording kernels ------------------------------------------------------------------------

# Keys whose kernels pass a call on to the keys below them (autograd's, tracing, autocast, views,
# functionalization) or compute only shapes (Meta): every call still ends in a kernel that computes.
PASSING_ON = re.compile(r"(Autograd|Autocast)\w*|Tracer|ADInplaceOrView|Functionalize|Meta|BackendSelect|Python\w*")
# An alias key's kernel is captured through a runtime key it fills in (one without a kernel of its own).
THROUGH = {"CompositeImplicitAutograd": ("CPU", "AutogradCPU", "QuantizedCPU"),
           "CompositeExplicitAutograd": ("CPU", "QuantizedCPU", "SparseCPU", "SparseCsrCPU"),
           "CompositeExplicitAutogradNonFunctional": ("CPU", "QuantizedCPU", "SparseCPU", "SparseCsrCPU"),
           "FuncTorchBatchedDecomposition": ("FuncTorchBatched",),
           "CompositeImplicitAutogradNestedTensor": ("NestedTensorCPU", "AutogradNestedTensor")}
_REGISTERED = re.compile(r"(\w+)(?:\[alias\])?: registered at (.*?)(?: :: |$)")
# TorchScript's own native implementations, run without the dispatcher: the static runtime runs
# ``aten::layer_norm`` straight into its CPU code, and the TensorExpr compiler lowers a graph's
# norms to loops of its own. No honest answer builds either. (``module`` -> entry points)
OUTSIDE_THE_DISPATCHER = {"torch._C": ("_jit_to_static_module", "_fuse_to_static_module", "StaticModule",
                                       "_jit_override_can_fuse_on_cpu", "_jit_override_can_fuse_on_cpu_legacy"),
                          "torch._C._te": ("lower", "TensorExprKernel")}


def recording_kernels(record) -> list:
    """Give every operator of the normalization family, in every namespace the dispatcher lists
    (``aten``, ``quantized``, ``onednn``...), on every key it has a kernel of its own for, a kernel
    that calls ``record(tag)``, then the operator's own kernel, captured here before any student code
    (so results are PyTorch's, bit for bit); a kernel that cannot be captured is replaced by one
    that records and refuses.

    The dispatch mode sees an operator only when it is dispatched through the Python key; a kernel
    fetched by its key and called with an explicit key set (``torch.library.get_kernel(...).call_boxed``,
    ``OpOverload.redispatch``) skips that key, and two norms (``rms_norm``, ``_fused_rms_norm``)
    decompose above it into pow, mean and rsqrt. The kernels themselves are where every route ends.
    The originals live only in these closures, which the dispatcher holds: no Python object points
    at them. TorchScript's entry points that run a norm without the dispatcher refuse. Returns the
    registrations, which must stay alive.

    An operator a learner defines at cell time (``torch.library``) runs the learner's own Python,
    whose operators reach these kernels like any other call.
    """
    import warnings

    libraries: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel" is the point
        for qualified in torch._C._dispatch_get_all_op_names():
            tag = tag_of(qualified)
            if not tag:
                continue
            namespace, _, name = qualified.partition("::")
            own = _own_kernels(qualified)
            for key, where in own.items():
                if PASSING_ON.fullmatch(key):
                    continue
                if namespace not in libraries:
                    libraries[namespace] = torch._C._dispatch_library("IMPL", namespace, "")
                original = _captured(qualified, key, where, own)
                if original is None:
                    libraries[namespace].impl(name, key, _refusing(record, tag, qualified, key))
                else:
                    libraries[namespace].impl(name, key, _recording(record, tag, original), True)
    _refuse_outside_the_dispatcher()
    return list(libraries.values())


def _own_kernels(qualified: str) -> dict:
    """key -> where its kernel was registered, for every key ``qualified`` has a kernel of its own for
    (fallthroughs and backend fallbacks are not its own), as the dispatcher lists them."""
    own = {}
    for line in torch._C._dispatch_dump(qualified).splitlines():
        found = _REGISTERED.match(line)
        if found and found.group(1) != "debug":
            own[found.group(1)] = found.group(2)
    return own


def _captured(qualified: str, key: str, where: str, own: dict):
    """The kernel registered for ``key`` (at ``where``), as a kernel Python can call; None if it cannot be
    captured (checked: the captured kernel says it was registered where the dispatcher says)."""
    try:
        alias = torch._C._dispatch_is_alias_key(torch._C._dispatch_key_parse(key))
        for runtime in (THROUGH.get(key, ()) if alias else (key,)):
            if alias and runtime in own:
                continue  # a kernel of its own there, not the alias's
            kernel = torch._C._dispatch_get_computed_kernel_for_dispatch_key(
                qualified, torch._C._dispatch_key_parse(runtime))
            if f"registered at {where}" in repr(kernel):
                return kernel
    except RuntimeError:  # a key Python cannot name, or no kernel there
        pass
    return None


def _refuse_outside_the_dispatcher() -> None:
    """Replace TorchScript's entry points that bypass the dispatcher, wherever a module holds them."""
    entries = {id(entry): (entry, f"{module}.{name}") for module, names in OUTSIDE_THE_DISPATCHER.items()
               for name in names if (entry := getattr(sys.modules.get(module), name, None)) is not None}
    _replace_everywhere([entry for entry, _ in entries.values()], lambda entry: _entry_refusal(entries[id(entry)][1]))


def _entry_refusal(name: str):
    def refuse(*args, **kwargs):
        raise Refused(f"the grader's sandbox refuses this: {name} runs operators outside the grader's sight")

    return refuse


def _refusing(record, tag: str, qualified: str, key: str):
    def kernel(*args, **kwargs):
        record(tag)
        raise Refused(refusal_message(f"PyTorch's {qualified} operator (its {key} kernel)"))

    return kernel


def _recording(record, tag: str, original):
    def kernel(keyset, *args, **kwargs):
        record(tag)
        return original.call_boxed(keyset, *args, **kwargs)

    return kernel
