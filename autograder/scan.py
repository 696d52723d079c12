"""Read a cell's source, without running it, for ways to slip past the grader.

Two steps, both cheap and neither able to raise:

``python_source``  what IPython would execute for a notebook cell: line magics and
                   ``!shell`` lines become ``get_ipython()`` calls (line numbers kept),
                   ``%%time``/``%%timeit``/``%%capture`` give their body, any other cell
                   magic (``%%bash``, ``%%writefile``...) gives "" (not Python: skipped).
``scan``           findings in that Python source, each a ``Finding``:

- ``tampering``: a name no honest exercise needs, that reaches into PyTorch's internals,
  autograd's recorded graph, the grader, other frames or objects, threads and processes,
  native code or unpickling (the groups in ``TAMPERING``).
- ``review``: something an honest solution could write but that is exactly how a name
  is hidden from this scan: an attribute name built at run time, a lookup by name
  (``vars``, ``sys.modules``, ``importlib``), code run from a string (``eval``).

A finding is not a verdict. ``evidence`` holds a part only for the groups with no honest use
under that part's rule, and only where the part's graded calls ran the finding's line; every
other finding is reported to the instructor and costs nothing.

A name counts wherever it appears: as a variable, an attribute (``x._C``), a part of an
imported module path, a keyword of a ``match`` class pattern, or inside a string
constant ("torch._C" hidden in a longer string too). Identifiers match exactly, so a
variable called ``library_size`` is fine. A cell that does not parse is still read: as
many of its statements as can be parsed are scanned, and every other line's names.
"""

from __future__ import annotations

import ast
import gc
import re
from dataclasses import dataclass
from functools import lru_cache

# --- what is looked for ---------------------------------------------------------------------------------------

OS_PROCESS = ["fork", "forkpty", "system", "popen", "kill", "killpg", "register_at_fork", "posix_spawn",
              "posix_spawnp", *(f"exec{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
              *(f"spawn{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe"))]

# group -> (what the learner reads, names matched exactly, dotted paths matched as a prefix)
TAMPERING = {
    # PyTorch's dispatch machinery: the grader's monitor is a torch function mode and a
    # dispatch mode, and the blocked built-ins are aten kernels; these switch them off or
    # call around them. Any private (``_x``) part of a path under ``torch`` counts too.
    "torch": ("reaches into PyTorch's dispatch internals", {
        "_C", "_refs", "_decomp", "_prims", "_prims_common", "_meta_registrations", "_functorch", "_dynamo",
        "_inductor", "_python_dispatch", "overrides", "library", "_ops", "_library", "_subclasses",
        "_higher_order_ops", "TorchFunctionMode", "TorchDispatchMode", "_disable_torch_function",
        "_disable_current_modes", "DisableTorchFunction", "DisableTorchFunctionSubclass", "_pop_mode", "_push_mode",
        "_set_torch_function_mode", "_get_current_dispatch_mode_stack", "_get_current_function_mode_stack",
        # global module hooks run inside every module call, the grader's reference modules too
        "register_module_forward_hook", "register_module_forward_pre_hook", "register_module_backward_hook",
        "register_module_full_backward_hook", "register_module_full_backward_pre_hook",
    }, {"torch.library", "torch.overrides"}),
    # The grader itself: its package, the worker's folder and the monitor object.
    "grader": ("reaches for the grader itself", {"autograder", "sandboxed", "zygote", "Monitor"}, set()),
    # Interpreter introspection that reaches other frames (the grader's, below the
    # student's call) or every live object, or hooks every call and line.
    "introspection": ("reaches into other frames or objects of the interpreter", {
        "settrace", "setprofile", "addaudithook", "get_objects", "get_referrers", "get_referents", "__subclasses__",
        "__globals__", "__closure__", "__code__", "f_back", "f_locals", "f_globals", "f_builtins", "f_code",
        "f_trace", "tb_frame", "gi_frame", "cr_frame", "ag_frame", "_getframe", "_getframemodulename", "cell_contents",
        "_current_frames", "_current_exceptions", "currentframe", "walk_stack", "walk_tb", "pdb", "bdb",
        "call_tracing",
    }, {"sys.monitoring", "sys.settrace", "sys.setprofile", "gc.get_objects"}),
    # Concurrency and processes: code that keeps running after a call returns, or
    # outside the worker's view (a thread, a child, a signal handler, a socket).
    "processes": ("starts threads, processes, signals or connections", {
        "threading", "_thread", "multiprocessing", "concurrent", "signal", "subprocess", "_posixsubprocess",
        "posix_spawn", "posix_spawnp", "socket", "_socket", "asyncio", "pty", "posix",
    }, {f"os.{name}" for name in OS_PROCESS}),
    # Native code: anything that runs machine code or writes memory behind Python's back.
    "native": ("loads or runs native code", {
        "ctypes", "_ctypes", "cffi", "_imp", "marshal", "load_library", "cpp_extension", "load_inline",
        "_testcapi", "_xxsubinterpreters", "_interpreters",
    }, {"torch.ops.load_library"}),
    # Autograd's graph: a hand-written backward that reads it replays autograd instead.
    "autograd": ("reaches into autograd's recorded graph", {"grad_fn", "next_functions"}, set()),
    # Unpickling looks names up from data and calls them: it runs any code it is given.
    "unpickling": ("unpickles data, which can run any code", {
        "pickle", "_pickle", "cPickle", "cloudpickle", "dill", "copyreg", "copy_reg", "shelve", "joblib",
        "__reduce__", "__reduce_ex__", "unsafe_load", "UnsafeLoader",
    }, {"torch.load", "torch.hub", "torch.package", "torch.serialization", "torch.jit.load", "yaml.load",
        "yaml.full_load", "yaml.Loader"}),
}

# group -> (what the learner reads, names matched exactly, dotted path prefixes)
REVIEW = {
    # Lookups by name: each turns a string into an object, so the name never appears.
    "lookup": ("looks objects up by a name given as data", {
        "__dict__", "__getattribute__", "__getattr__", "__builtins__", "builtins", "__import__", "importlib",
        "attrgetter", "methodcaller", "pydoc", "pkgutil", "resolve_name", "get_field", "meta_path", "path_hooks",
        "dictConfig", "fileConfig", "__self__", "__objclass__",
    }, {"torch.ops", "sys.modules", "sys.path", "operator.attrgetter", "operator.methodcaller", "string.Formatter",
        "unittest.mock", "logging.config"}),
    # Code run from a string (the modules ``code``, ``timeit``, ``doctest``, ``cProfile`` run strings too).
    "code": ("runs code given as a string", {"runpy", "codeop", "zipimport", "get_type_hints", "ForwardRef",
                                            "__annotations__", "InteractiveInterpreter", "InteractiveConsole"},
             set()),
    # Introspection of classes, modules and exceptions: the way to objects not named in the code.
    "introspection": ("inspects classes, modules or tracebacks", {
        "inspect", "weakref", "__bases__", "__base__", "__mro__", "__match_args__", "__loader__", "__spec__",
        "__traceback__",
    }, {"sys.exc_info", "sys.exception", "sys.last_traceback", "sys.last_exc", "types"}),
}
# Modules whose names are common variable names (``code``, ``trace``): they count only when imported.
IMPORTED = {"trace": ("tampering", "introspection"), "code": ("review", "code"), "timeit": ("review", "code"),
            "doctest": ("review", "code"), "cProfile": ("review", "code"), "profile": ("review", "code"),
            "imp": ("review", "lookup"), "site": ("review", "lookup")}
# Built-ins that count only as the bare name (``model.eval()`` and ``torch.compile`` are fine).
BARE = {"eval": "code", "exec": "code", "compile": "code", "breakpoint": "code", "vars": "lookup",
        "globals": "lookup", "locals": "lookup"}
ATTRIBUTE_GETTERS = {"getattr", "setattr", "delattr", "hasattr"}
VALUE_GETTERS = {"getattr", "setattr", "delattr"}  # passed as a value (reduce(getattr, ...)), not called
# Modules whose ``import *`` would bring a flagged name in without its module path.
STAR_IMPORT_REVIEW = {"os", "sys", "gc", "operator", "builtins", "torch", "importlib", "inspect", "string",
                      "logging", "types", "pickle", "ctypes", "threading", "signal"}
# torch.ops namespaces: ``.ops.aten`` is torch.ops however torch was reached.
OPERATOR_NAMESPACES = {"aten", "prims", "higher_order", "quantized", "_quantized", "profiler", "_c10d_functional"}
# Common names the notebooks give to torch's modules, when the cell itself does not import them.
DEFAULT_ROOTS = {"torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional"}

TAMPER_NAMES = {name: group for group, (_, names, _) in TAMPERING.items() for name in names}
TAMPER_PATHS = {path: group for group, (_, _, paths) in TAMPERING.items() for path in paths}
REVIEW_NAMES = {name: group for group, (_, names, _) in REVIEW.items() for name in names}
REVIEW_PATHS = {path: group for group, (_, _, paths) in REVIEW.items() for path in paths}
PATH_ROOTS = {path.split(".")[0] for path in [*TAMPER_PATHS, *REVIEW_PATHS]} | {"torch"}
ALL_NAMES = frozenset(TAMPER_NAMES) | frozenset(REVIEW_NAMES)
MAX_PATH_PREFIX = 8
# Names that are ordinary English words: inside a longer string they count only as part of a dotted
# path ("torch.library", "autograder/suites"), so a sentence printing "the library" is fine.
WORDS = {"library", "overrides", "signal", "concurrent", "socket", "marshal", "Monitor", "threading", "posix",
         "multiprocessing", "subprocess", "pickle", "shelve", "autograder", "sandboxed", "pty", "inspect", "weakref",
         "builtins", "pdb", "bdb"}
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PATHLIKE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[./\\:]+[A-Za-z_][A-Za-z0-9_]*)+")
STRING_QUOTES = re.compile(r"^[A-Za-z]*(\"\"\"|'''|\"|')|(\"\"\"|'''|\"|')$")
MAX_STRING = 200  # longer strings (docstrings, data) are not read for names
MAX_PARSE_ATTEMPTS = 300  # per cell, when it does not parse as a whole
MAX_PARSE_CHARS = 4 * 2**20  # characters re-parsed per cell while recovering from a syntax error
MAX_FINDINGS = 50  # of each kind per cell, after deduplication
MAX_WHAT = 200  # characters of a finding's text (it quotes the name it found)


@dataclass(frozen=True)
class Finding:
    kind: str  # "tampering" or "review"
    line: int | None  # in the cell, counting from 1
    what: str  # a short sentence for the learner
    group: str = ""  # the key of TAMPERING or REVIEW it comes from
    cell: str | None = None  # the notebook cell's label, filled in by ``load``
    quote: str = ""  # the line of the cell it is on, filled in by ``load``


# --- IPython's input transformation ----------------------------------------------------------------------------

PYTHON_CELL_MAGICS = {"time", "timeit", "capture"}  # their body is Python that IPython runs in the kernel
TIMEIT_OPTIONS = re.compile(r"^(?:\s*-(?:[nrp]\s*\S+|[tcqov]+))*\s*")
# A line IPython's token transformers could change: an escape at the start (%magic, !shell, ?help, ,quote
# ;quote /call), an assignment from one (x = %magic, x = !ls), or a trailing ? (help).
ESCAPE_LINE = re.compile(r"^\s*[%!?,;/]|=\s*[%!]|\?\s*(#.*)?$")
MAX_TRANSFORM_WORK = 1_000_000  # characters IPython tokenizes per cell; beyond it, escape lines one by one
MAX_ESCAPE_LINES = 1000  # escape lines transformed one by one; any further ones stay as they are (and fail to parse)

_manager = None


def _transformer():
    global _manager
    if _manager is None:
        from IPython.core.inputtransformer2 import TransformerManager  # imported on first use: it is slow

        _manager = TransformerManager()
    return _manager


def cell_magic(cell_source: str) -> str | None:
    """The name of the cell magic a cell starts with (``bash`` for ``%%bash``), or None."""
    for line in cell_source.splitlines():
        if line.strip():
            found = re.match(r"\s*%%(\w+)", line)
            return found.group(1) if found else None
    return None


def python_source(cell_source: str) -> str:
    """What IPython would execute for this cell, with the cell's line numbering; never raises."""
    try:
        return _python_source(cell_source, depth=0)
    except Exception:  # noqa: BLE001 - a bad cell must not stop the grader: the raw source is scanned as is
        return cell_source


def _python_source(cell: str, depth: int) -> str:
    manager = _transformer()
    if not cell.endswith("\n"):
        cell += "\n"
    lines = cell.splitlines(keepends=True)
    blank = 0  # IPython drops leading blank lines: put them back, to keep line numbers
    while blank < len(lines) and (not lines[blank] or lines[blank].isspace()):
        blank += 1
    for transform in manager.cleanup_transforms:
        lines = transform(lines)
    if lines and lines[0].startswith("%%") and not re.match(r"%%\w+\?", lines[0]):
        name, _, first_line = lines[0][2:].rstrip().partition(" ")
        if name not in PYTHON_CELL_MAGICS or depth > 3:
            return ""
        setup = TIMEIT_OPTIONS.sub("", first_line) if name == "timeit" else ""  # %%timeit's line is setup code
        body = _python_source("".join(lines[1:]), depth + 1) if len(lines) > 1 else ""
        return "\n" * blank + setup + "\n" + body
    candidates = sum(1 for line in lines if ESCAPE_LINE.search(line))
    if candidates:
        size = sum(map(len, lines))
        if size * (candidates + 1) <= MAX_TRANSFORM_WORK:
            lines = _token_transforms(manager, lines)
        else:  # IPython re-tokenizes the whole cell once per escape: transform each escape line on its own
            left = MAX_ESCAPE_LINES
            for i, line in enumerate(lines):
                if left and ESCAPE_LINE.search(line):
                    lines[i], left = _one_line(manager, line), left - 1
    return "\n" * blank + "".join(lines)


def _token_transforms(manager, lines: list[str]) -> list[str]:
    """IPython's token transforms, padding with blank lines where one joins continued lines."""
    for _ in range(500):
        changed, new = manager.do_one_token_transform(lines)
        if not changed:
            return lines
        lost = len(lines) - len(new)
        if lost > 0:  # one escaped line replaced the lines it continued over: keep the count
            at = next((i for i, (a, b) in enumerate(zip(lines, new)) if a != b), len(new) - 1)
            new = new[:at + 1] + ["\n"] * lost + new[at + 1:]
        lines = new
    return lines


def _one_line(manager, line: str) -> str:
    try:
        new = _token_transforms(manager, [line if line.endswith("\n") else line + "\n"])
    except Exception:  # noqa: BLE001
        return line
    return new[0] if len(new) == 1 else line


# --- the scan ----------------------------------------------------------------------------------------------------


def scan(source: str) -> list[Finding]:
    """Tampering and review findings in ``source`` (Python, as ``python_source`` returns it)."""
    found = _Findings()
    collecting = gc.isenabled()
    gc.disable()  # a syntax tree is millions of objects and no cycles: collecting while it is built triples the time
    try:
        for tree, offset in _parse(source, found):
            _Scan(found, offset).run(tree)
    except Exception:  # noqa: BLE001 - RecursionError, MemoryError or anything unforeseen: read the tokens
        _scan_tokens(source, 0, found)
    finally:
        if collecting:
            gc.enable()
    return found.list()


class _Findings:
    def __init__(self):
        self.seen: dict[tuple[str, str], Finding] = {}
        self.count = {"tampering": 0, "review": 0}

    def add(self, kind: str, line: int | None, what: str, group: str = "") -> None:
        if len(what) > MAX_WHAT:  # a name can be 64 KB long: the finding quotes its start
            what = what[:MAX_WHAT - 3] + "..."
        key = (kind, what)
        known = self.seen.get(key)
        if known is None:
            if self.count[kind] < MAX_FINDINGS:  # per kind: review findings never crowd out a tampering one
                self.seen[key] = Finding(kind, line, what, group)
                self.count[kind] += 1
        elif line is not None and (known.line is None or line < known.line):
            self.seen[key] = Finding(kind, line, what, group)  # report the first line it happens on

    def name(self, name: str, line, shown: str | None = None, bare: bool = False, tampering_only: bool = False) -> bool:
        """A finding if ``name`` is flagged; ``bare``: it is a variable, not an attribute."""
        shown = shown or name
        if name in TAMPER_NAMES:
            self.add("tampering", line, f"{TAMPERING[TAMPER_NAMES[name]][0]} ({shown})", TAMPER_NAMES[name])
            return True
        if tampering_only:
            return False
        if name in REVIEW_NAMES:
            self.add("review", line, f"{REVIEW[REVIEW_NAMES[name]][0]} ({shown})", REVIEW_NAMES[name])
            return True
        if bare and name in BARE:
            self.add("review", line, f"{REVIEW[BARE[name]][0]} ({shown})", BARE[name])
            return True
        return False

    def path(self, parts: list[str], line, spelled: list[str] | None = None, shown: str | None = None) -> bool:
        """Findings for a dotted path (resolved through import aliases), checked part by part.

        ``spelled``: the path as written (``F._C`` for torch.nn.functional._C); ``shown``: what
        the finding names instead of the path up to the flagged part.
        """
        tampering = review = None
        prefix = ""
        for i, part in enumerate(parts):
            prefix = f"{prefix}.{part}" if i else part
            if i >= MAX_PATH_PREFIX:
                prefix = ""  # paths in the lists have a few parts: longer prefixes cannot match
            if tampering is None:
                if prefix in TAMPER_PATHS:
                    tampering = (TAMPER_PATHS[prefix], i)
                elif part in TAMPER_NAMES:
                    tampering = (TAMPER_NAMES[part], i)
                elif i and parts[0] == "torch" and part[:1] == "_" and not part.endswith("__"):
                    tampering = ("torch", i)
                elif i and part.startswith("_saved_"):  # grad_fn._saved_self, however grad_fn was reached
                    tampering = ("autograd", i)
            if review is None:
                if part == "ops" and parts[i + 1: i + 2] and parts[i + 1] in OPERATOR_NAMESPACES:
                    review = ("lookup", i + 1)  # x.ops.aten: torch.ops under another name
                elif prefix in REVIEW_PATHS:
                    review = (REVIEW_PATHS[prefix], i)
                elif part in REVIEW_NAMES:
                    review = (REVIEW_NAMES[part], i)
            if tampering:
                break
        found = tampering or review
        if found is None:
            return False
        if shown is None:
            spelled = spelled or parts
            shown = ".".join(spelled[: max(1, found[1] + 1 - (len(parts) - len(spelled)))][:MAX_PATH_PREFIX])
        if tampering:
            self.add("tampering", line, f"{TAMPERING[tampering[0]][0]} ({shown})", tampering[0])
        else:
            self.add("review", line, f"{REVIEW[review[0]][0]} ({shown})", review[0])
        return True

    def string(self, text: str, line) -> None:
        if len(text) < MAX_STRING:
            for kind, what, group in _string_findings(text):
                self.add(kind, line, what, group)

    def list(self) -> list[Finding]:
        return sorted(self.seen.values(), key=lambda f: (f.line or 0, f.kind, f.what))


@lru_cache(maxsize=4096)
def _string_findings(text: str) -> tuple[tuple[str, str, str], ...]:
    """Names in a string constant: the whole string, dotted or path-like words, distinctive tokens."""
    found = _Findings()
    if "/proc/" in text:
        found.add("tampering", None, f"{TAMPERING['native'][0]} (\"/proc/...\")", "native")
    stripped = text.strip()
    if not (IDENTIFIER.fullmatch(stripped) and found.name(stripped, None, f'"{stripped}"')):
        hit = False
        for word in PATHLIKE.findall(text):
            hit |= found.path([p for p in re.split(r"[./\\:]+", word) if p], None, shown=f'"{word[:60]}"')
        for token in [] if hit else IDENTIFIER.findall(text):
            if token not in WORDS and (token in TAMPER_NAMES or token in REVIEW_NAMES):
                found.name(token, None, f'"{token}"')
    return tuple((f.kind, f.what, f.group) for f in found.seen.values())


def _parse(source: str, found: _Findings):
    """(tree, line offset) for the whole source, or for every piece of it that parses.

    A piece that fails to parse is split around the line the error names, and that
    line's names are read from its tokens. At most MAX_PARSE_ATTEMPTS parses and
    MAX_PARSE_CHARS characters per cell; whatever is left is read from its tokens.
    """
    lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    attempts, budget = 0, MAX_PARSE_CHARS
    pieces = [(0, len(lines))]
    while pieces:
        start, end = pieces.pop()
        text = "\n".join(lines[start:end])
        if not text.strip():
            continue
        if attempts >= MAX_PARSE_ATTEMPTS or (attempts and budget < len(text)):
            _scan_tokens(text, start, found)
            continue
        attempts, budget = attempts + 1, budget - len(text)
        header = 0
        if text.lstrip("\n")[:1] in (" ", "\t"):  # a piece that starts inside a block
            text, header = "if True:\n" + text, 1
        try:
            tree = ast.parse(text)
        except SyntaxError as error:
            bad = (error.lineno or 0) - 1 - header
        except (ValueError, RecursionError, MemoryError, OverflowError):
            bad = -1  # null bytes, nesting too deep: read the whole piece from its tokens
        else:
            yield tree, start - header
            continue
        if not 0 <= bad < end - start:
            _scan_tokens("\n".join(lines[start:end]), start, found)
            continue
        _scan_tokens(lines[start + bad], start + bad, found)
        pieces += [(start + bad + 1, end), (start, start + bad)]


# Code that does not parse, read as tokens: comments are skipped, strings are read as strings, and
# names with the dots between them as paths. One line at a time, so an unclosed quote hides nothing.
TOKEN = re.compile(r"""
    (?P<comment>\#[^\n]*)
  | (?P<string>[rRbBuUfF]{0,2}(?:\"\"\"(?:[^"\n]|"(?!""))*(?:\"\"\")?|'''(?:[^'\n]|'(?!''))*(?:''')?
                               |"(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?))
  | (?P<name>[A-Za-z_]\w*(?:[ \t]*\.[ \t]*[A-Za-z_]\w*)*)
""", re.VERBOSE)


def _scan_tokens(text: str, offset: int, found: _Findings) -> None:
    """Tampering names in code that does not parse (review findings need the syntax tree)."""
    probe, line, at = _Findings(), offset + 1, 0
    for match in TOKEN.finditer(text):
        kind = match.lastgroup
        if kind == "comment":
            continue
        line += text.count("\n", at, match.start())
        at = match.start()
        token = match.group()
        if kind == "string":
            probe.string(STRING_QUOTES.sub("", token), line)
        else:
            parts = [part.strip() for part in token.split(".")]
            if parts[0] in PATH_ROOTS or not ALL_NAMES.isdisjoint(parts):
                probe.path(parts, line)
    for finding in probe.seen.values():
        if finding.kind == "tampering":
            found.add(finding.kind, finding.line, finding.what, finding.group)


class _Scan:
    """One pass over a syntax tree, parents before children."""

    def __init__(self, found: _Findings, offset: int, depth: int = 0):
        self.found, self.offset, self.depth = found, offset, depth
        self.aliases = dict(DEFAULT_ROOTS)
        self.called: set[int] = set()  # ids of nodes that are the function of a call
        self.inner: set[int] = set()  # ids of nodes inside an attribute chain (checked with the whole chain)

    def line(self, node) -> int | None:
        line = getattr(node, "lineno", None)
        return line + self.offset if line is not None else None

    def run(self, tree: ast.AST) -> None:
        nodes = _walk(tree)
        for node in nodes:  # aliases first: "import torch as t" anywhere makes t.ops torch.ops
            kind = type(node)
            if kind is ast.Import:
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
            elif kind is ast.ImportFrom and node.module and not node.level:
                for alias in node.names:
                    self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        for node in nodes:
            if type(node) is ast.Assign and len(node.targets) == 1 and type(node.targets[0]) is ast.Name:
                parts = self.chain(node.value)[0]
                if parts[0] in PATH_ROOTS:  # s = sys makes s.modules sys.modules
                    self.aliases.setdefault(node.targets[0].id, ".".join(parts))
        visit = {ast.Call: self.call, ast.Attribute: self.attribute, ast.Name: self.name, ast.Import: self.imports,
                 ast.ImportFrom: self.imports, ast.Constant: self.constant, ast.MatchClass: self.match_class,
                 ast.FunctionDef: self.definition, ast.AsyncFunctionDef: self.definition,
                 ast.ClassDef: self.definition, ast.Global: self.declaration, ast.Nonlocal: self.declaration}
        for node in nodes:
            method = visit.get(type(node))
            if method is not None:
                method(node)

    def chain(self, node) -> tuple[list[str], list[str]]:
        """(resolved parts, parts as spelled) of ``a.b.c``; the root is "" when it is not a name."""
        attrs = []
        while type(node) is ast.Attribute:
            attrs.append(node.attr)
            node = node.value
        attrs.reverse()
        if type(node) is ast.Name:
            root = self.aliases.get(node.id, node.id)
            return root.split(".") + attrs, [node.id, *attrs]
        return ["", *attrs], ["", *attrs]

    def call(self, node: ast.Call) -> None:
        self.called.add(id(node.func))
        func, args = node.func, node.args
        if type(func) is ast.Name and func.id in ATTRIBUTE_GETTERS:
            if len(args) < 2 or any(type(a) is ast.Starred for a in args[:2]) or node.keywords or not (
                    type(args[1]) is ast.Constant and type(args[1].value) is str):
                self.found.add("review", self.line(node), f"builds an attribute name at run time ({func.id} with a "
                                                          "computed name)", "lookup")
            else:  # getattr(torch, "ops") is torch.ops
                parts, spelled = self.chain(args[0])
                if parts[0]:
                    self.found.path([*parts, args[1].value], self.line(node), [*spelled, args[1].value])
        elif (type(func) is ast.Attribute and func.attr == "run_line_magic" and len(args) == 2 and self.depth < 3
              and all(type(a) is ast.Constant and type(a.value) is str for a in args)
              and args[0].value in ("time", "timeit", "prun")):
            self.magic_argument(args[0].value, args[1].value, self.line(node))

    def attribute(self, node: ast.Attribute) -> None:
        self.inner.add(id(node.value))
        if node.attr == "modules" and id(node) not in self.called and self.chain(node)[0][0] not in ("sys", "torch"):
            self.found.add("review", self.line(node), f"{REVIEW['lookup'][0]} (.modules)", "lookup")  # sys.modules
        if id(node) in self.inner:
            return
        parts, spelled = self.chain(node)
        if not parts[0]:  # (expression).a.b: the attributes alone
            parts, spelled = parts[1:], ["." + parts[1], *parts[2:]]
        self.found.path(parts, self.line(node), spelled)

    def name(self, node: ast.Name) -> None:
        if id(node) in self.inner:
            return
        if node.id in VALUE_GETTERS and id(node) not in self.called:
            self.found.add("review", self.line(node), f"passes {node.id} around as a value, so the names it reads "
                                                      "are not in the code", "lookup")
        elif node.id in ALL_NAMES or node.id in BARE:
            self.found.name(node.id, self.line(node), bare=True)

    def imports(self, node) -> None:
        module = node.module if type(node) is ast.ImportFrom and not node.level else None
        if type(node) is ast.ImportFrom and node.level:
            return  # a relative import names no module of the course's
        line = self.line(node)
        for alias in node.names:
            if alias.name == "*":
                parts = (module or "").split(".")
                self.found.path(parts, line)
                if parts[0] in STAR_IMPORT_REVIEW:
                    self.found.add("review", line, f"imports every name of {module} (import *)", "lookup")
                continue
            parts = (f"{module}.{alias.name}" if module else alias.name).split(".")
            if parts[0] in IMPORTED:
                kind, group = IMPORTED[parts[0]]
                self.found.add(kind, line, f"{(TAMPERING if kind == 'tampering' else REVIEW)[group][0]} ({parts[0]})",
                               group)
            self.found.path(parts, line)

    def constant(self, node: ast.Constant) -> None:
        if type(node.value) is str:
            self.found.string(node.value, self.line(node))
        elif type(node.value) is bytes and len(node.value) < MAX_STRING:
            self.found.string(node.value.decode("latin-1"), self.line(node))

    def match_class(self, node: ast.MatchClass) -> None:  # case C(attr=...) reads attributes by name
        for name in node.kwd_attrs:
            self.found.name(name, self.line(node), "." + name)

    def definition(self, node) -> None:  # def __reduce__ counts; a class's own __getattr__ is fine
        self.found.name(node.name, self.line(node), tampering_only=True)

    def declaration(self, node) -> None:
        for name in node.names:
            self.found.name(name, self.line(node), bare=True)

    def magic_argument(self, magic: str, argument: str, line) -> None:
        """``%time x`` and ``%timeit x`` run ``x`` in IPython: read it as code too."""
        code = TIMEIT_OPTIONS.sub("", argument) if magic == "timeit" else argument
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return
        inner = _Scan(self.found, (line or 1) - 1, self.depth + 1)
        inner.aliases = self.aliases
        inner.run(tree)


def _walk(tree: ast.AST) -> list[ast.AST]:
    """Every node, parents before children (like ``ast.walk``, without the contexts Load and Store)."""
    nodes, todo = [], [tree]
    skip = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)
    while todo:
        node = todo.pop()
        nodes.append(node)
        for field in node._fields:
            value = getattr(node, field, None)
            if type(value) is list:
                todo.extend(v for v in value if isinstance(v, ast.AST))
            elif isinstance(value, ast.AST) and not isinstance(value, skip):
                todo.append(value)
    return nodes
