"""The source scan, tested like a learner who has read ``autograder/scan.py`` and wants past it.

Every trick below hides a reach into PyTorch's internals, the grader, other frames,
processes, native code or unpickling (``tampering``), or builds a name at run time
(``review``): each must give a finding of that kind. Honest code (the reference
solutions, the catalogue's correct variants, common idioms) must give none.
"""

import json
import time

import pytest

from autograder import scan as scan_module
from autograder.scan import python_source, scan
from tests.catalogue import ASSIGNMENTS, variants
from tests.grading import REPO


def kinds(cell: str) -> set[str]:
    """The kinds of finding in a notebook cell, scanned as the grader scans it."""
    return {finding.kind for finding in scan(python_source(cell))}


# --- IPython's transformation -------------------------------------------------------------------------------


def test_line_magic_keeps_the_next_line_on_line_2():
    assert python_source("%matplotlib inline\nx = 1").splitlines()[1] == "x = 1"


def test_line_magic_and_shell_line_become_calls_to_get_ipython():
    assert python_source("%matplotlib inline\n!ls -l\n").splitlines() == [
        "get_ipython().run_line_magic('matplotlib', 'inline')", "get_ipython().system('ls -l')"]


def test_magic_continued_over_two_lines_keeps_the_numbering():
    assert python_source("%time x = 1 + \\\n    2\ny = 3\n").splitlines()[2] == "y = 3"


def test_leading_blank_lines_keep_the_numbering():
    assert python_source("\n\n%time 1\ny = 3\n").splitlines()[3] == "y = 3"


@pytest.mark.parametrize("magic", ["%%bash", "%%writefile helper.py", "%%html", "%%script python3", "%%sh"])
def test_cell_magic_that_is_not_python_gives_no_source(magic):
    assert python_source(f"{magic}\nimport ctypes\n") == ""


@pytest.mark.parametrize("magic", ["%%time", "%%timeit -n 1 -r 1", "%%capture captured"])
def test_python_cell_magic_gives_its_body_on_the_cell_lines(magic):
    assert python_source(f"{magic}\nx = 1\ny = x\n").splitlines()[1:] == ["x = 1", "y = x"]


def test_timeit_setup_on_the_magic_line_is_kept_as_code():
    assert python_source("%%timeit -n1 import ctypes\nx = 1\n").splitlines()[0] == "import ctypes"


def test_python_source_falls_back_to_the_raw_cell_when_the_transformation_fails(monkeypatch):
    def broken():
        raise RuntimeError("IPython is broken")

    monkeypatch.setattr(scan_module, "_transformer", broken)
    assert python_source("%time x\n") == "%time x\n"


def test_python_source_of_a_cell_with_thousands_of_magics_is_quick():
    cell = "x = 1\n" * 20_000 + "%time x\n" * 5_000
    start = time.process_time()
    python_source(cell)
    assert time.process_time() - start < 5


# --- tampering: every hiding trick is still a reach --------------------------------------------------------

TAMPERING = {
    # PyTorch's dispatch internals
    "magic-line-before-torch._C": "%matplotlib inline\nwith torch._C.DisableTorchFunction():\n    y = x\n",
    "time-cell-magic-body": "%%time\nfrom torch.overrides import TorchFunctionMode\n",
    "capture-then-time-cell-magics": "%%capture out\n%%time\nimport torch.utils._python_dispatch\n",
    "line-magic-argument": "%time torch._C._disable_torch_function_impl\n",
    "string-inside-a-longer-string": 'note = "see torch._C for the good stuff"\n',
    "dispatch-module-in-an-f-string": 'm = importlib.import_module(f"torch.utils._python_dispatch")\n',
    "dispatch-module-in-bytes": 'm = importlib.import_module(b"torch.utils._python_dispatch".decode())\n',
    "private-torch-module": "from torch.nn.modules import _functions\n",
    "attribute-in-a-format-string": 'print("{0._C}".format(torch))\n',
    "torch.library-kernel-override": 'lib = torch.library.Library("aten", "IMPL")\n',
    "global-module-hook": "nn.modules.module.register_module_forward_hook(spy)\n",
    # the grader
    "grader-package-import": "from autograder.sandboxed import guard\n",
    "hidden-suite-path": 'suite = open("/course/autograder/suites/ex2_layernorm/test_layer_norm.py").read()\n',
    "monitor-class-name": 'found = [o for o in objs if type(o).__name__ == "Monitor"]\n',
    # other frames and objects
    "caller-frame": "import sys\ncaller = sys._getframe(1).f_locals\n",
    "frame-from-a-traceback": "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    frame = e.__traceback__.tb_frame\n",
    "frame-of-a-generator": "def g():\n    yield\nframe = g().gi_frame.f_back\n",
    "function-globals-in-a-match-class-pattern": "match f:\n    case object(__globals__=g):\n        pass\n",
    "subclasses-of-object": "every = ().__class__.__base__.__subclasses__()\n",
    "tracer-through-renamed-sys": "import sys as s\ns.settrace(spy)\n",
    "every-object-from-gc": "import gc\nfrom gc import get_referrers\n",
    # threads, processes, signals, sockets
    "thread-pool": "from concurrent.futures import ThreadPoolExecutor\n",
    "fork": "import os\nif os.fork() == 0:\n    pass\n",
    "system-imported-by-name": "from os import system\n",
    "signal-module-named-in-a-string": 'sig = importlib.import_module("signal")\n',
    "socket": "import socket\n",
    # native code
    "ctypes": "import ctypes\n",
    "inline-cpp-extension": "from torch.utils.cpp_extension import load_inline\n",
    "own-process-memory": 'open("/proc/self/mem", "r+b")\n',
    "marshal": "import marshal\n",
    # unpickling
    "pickle": "import pickle\nobj = pickle.loads(blob)\n",
    "torch.load-imported-by-name": "from torch import load as read_weights\n",
    "reduce-method": "class Payload:\n    def __reduce__(self):\n        return (print, ('hi',))\n",
    "dill": "import dill\n",
    # a cell that does not parse hides nothing
    "syntax-error-on-line-1-reach-on-line-5": "x = (\n1\n2\n\ntorch._C._disable_torch_function_impl\n",
    "unterminated-string-then-reach": 'x = """\ntorch._C\n',
    "null-byte-then-reach": "x = 1\x00\ntorch._C\n",
    "broken-indentation-then-reach": "def f():\n    x = )\n    return torch._C\n",
}


@pytest.mark.parametrize("trick", TAMPERING)
def test_hidden_reach_into_internals_is_tampering(trick):
    assert "tampering" in kinds(TAMPERING[trick])


# --- review: names built at run time, or looked up by a name given as data ---------------------------------

REVIEW = {
    # torch.ops looks operators up by name; the contract forbids the norm ones, which the sandbox refuses anyway.
    "torch-renamed-on-import": "import torch as t\nop = t.ops.aten.native_layer_norm\n",
    "torch-renamed-by-assignment": "t = torch\nop = t.ops.aten.native_layer_norm\n",
    "torch.ops-through-a-literal-getattr": 'ops = getattr(torch, "ops")\n',
    "aten-namespace-from-any-object": "def f(m):\n    return m.ops.aten.native_layer_norm\n",
    "shell-line-and-getattr-of-underscore-plus-C": '!ls\ncore = getattr(torch, "_" + "C")\n',
    "import-of-a-concatenated-name": "load = __builtins__['__imp' + 'ort__']\nsock = load('so' + 'cket')\n",
    "getattr-of-a-join": 'core = getattr(torch, "".join(["_", "C"]))\n',
    "getattr-of-hex-bytes": 'core = getattr(torch, bytes.fromhex("5f43").decode())\n',
    "getattr-of-an-f-string": "core = getattr(torch, f\"{'_'}{'C'}\")\n",
    "getattr-passed-to-reduce": "from functools import reduce\ncore = reduce(getattr, names, torch)\n",
    "getattr-renamed": "g = getattr\ncore = g(torch, name)\n",
    "getattr-as-a-decorator": "@getattr\ndef f():\n    pass\n",
    "setattr-with-a-computed-name": "setattr(torch, name, fake)\n",
    "hasattr-with-a-computed-name": "ok = hasattr(torch, name)\n",
    "dunder-import": "m = __import__(name)\n",
    "importlib": 'm = importlib.import_module("torch.utils." + suffix)\n',
    "sys.modules": "import sys\nm = sys.modules[name]\n",
    "sys.modules-of-renamed-sys": "import sys as s\nm = s.modules[name]\n",
    "vars": "core = vars(torch)[name]\n",
    "module-dict": "core = torch.__dict__[name]\n",
    "globals": "f = globals()[name]\n",
    "attrgetter": "import operator\ncore = operator.attrgetter(name)(torch)\n",
    "attrgetter-imported-by-name": "from operator import attrgetter as ag\n",
    "getattribute": "core = object.__getattribute__(torch, name)\n",
    "eval": "core = eval(name)\n",
    "exec": "exec(code)\n",
    "compile": 'code = compile(source, "<cell>", "exec")\n',
    "builtins-module": "import builtins\n",
    "builtins-of-a-function": "b = print.__self__\n",
    "class-hierarchy": "bases = type(x).__mro__\nparent = x.__class__.__bases__\n",
    "match-args-with-a-computed-name": "class Pattern:\n    __match_args__ = (name,)\n",
    "inspect": "import inspect\n",
    "types-module": "import types\nf = types.FunctionType(code, {})\n",
    "exception-info": "import sys\ninfo = sys.exc_info()\n",
    "pydoc-locate": "import pydoc\nobj = pydoc.locate(name)\n",
    "formatter-get-field": 'from string import Formatter\nobj = Formatter().get_field(name, [torch], {})\n',
    "star-import-of-os": "from os import *\n",
    "type-hints-evaluate-strings": "import typing\nhints = typing.get_type_hints(f)\n",
}


@pytest.mark.parametrize("trick", REVIEW)
def test_name_built_at_run_time_is_held_for_review(trick):
    assert kinds(REVIEW[trick]) == {"review"}


# --- honest code ---------------------------------------------------------------------------------------------


def reference_cells() -> list:
    """Every code cell of the reference solutions but the course's graded and self-check cells.

    The graded cells hold the course's own call into the grader (``from autograder.kernel
    import grade_part``) and the locked self-checks may patch autograd to catch its use (ex6);
    the grader never runs either (``load.cells`` skips them by grade_id, copies too).
    """
    return [pytest.param("".join(cell["source"]), id=f"{assignment}-cell{number}")
            for assignment in ASSIGNMENTS
            for number, cell in enumerate(json.loads((REPO / "solutions" / assignment / f"{assignment}.ipynb")
                                                     .read_text())["cells"], start=1)
            if cell["cell_type"] == "code" and not course_cell(cell["metadata"].get("nbgrader", {}))]


def course_cell(nbgrader: dict) -> bool:
    return bool(nbgrader.get("grade")) or nbgrader.get("grade_id", "").startswith("selfcheck_")


@pytest.mark.parametrize("source", reference_cells())
def test_reference_solution_cell_gives_no_finding(source):
    assert scan(python_source(source)) == []


@pytest.mark.parametrize("right", variants(), ids=lambda r: f"{r.assignment}-{r.what}")
def test_correct_variant_gives_no_finding(right):
    assert scan(python_source(right.source)) == []


HONEST = {
    "eval-mode-and-compile-of-torch-and-re": "model.eval()\nfast = torch.compile(model)\npattern = re.compile('x')\n",
    "names-that-contain-flagged-words": "library_size = 3\nsignal_to_noise = 2.0\nops_count = 1\n",
    "literal-getattr": 'w = getattr(layer, "weight")\nhas_bias = hasattr(layer, "bias")\n',
    "prose-mentioning-flagged-words": 'print("the autograder checks this; the signal library is not needed")\n',
    "module-iteration-and-private-attributes": "for m in model.modules():\n    m._cache = None\n",
    "class-name-in-a-message": 'print(f"{x.__class__.__name__} has shape {tuple(x.shape)}")\n',
    "torch-function-with-a-types-parameter": "def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
                                              "    return [t for t in types]\n",
    "own-getattr-method": "class Box:\n    def __getattr__(self, name):\n        return 0\n",
    "variables-named-like-modules": "code = 'x'\ntrace = []\ntrace.append(code.strip())\n",
    "notebook-magics": "%matplotlib inline\n%load_ext autoreload\n!pip list\nx = 1\n",
    "timed-cell": "%%time\ny = layer_norm(x, w, b)\n",
}


@pytest.mark.parametrize("idiom", HONEST)
def test_honest_idiom_gives_no_finding(idiom):
    assert scan(python_source(HONEST[idiom])) == []


# --- what a finding says -------------------------------------------------------------------------------------


def test_finding_names_the_line_of_the_original_cell():
    findings = scan(python_source("%matplotlib inline\n!ls\n\ncore = torch._C\n"))
    assert [(f.kind, f.line) for f in findings] == [("tampering", 4)]


def test_finding_in_a_cell_that_does_not_parse_names_its_line():
    findings = scan(python_source("x = (\n1\n2\n\ntorch._C._disable_torch_function_impl\n"))
    assert [f.line for f in findings] == [5]


def test_finding_says_what_was_reached_in_words():
    assert [f.what for f in scan("core = torch._C\n")] == ["reaches into PyTorch's dispatch internals (torch._C)"]


def test_repeated_reach_gives_one_finding_on_its_first_line():
    findings = scan("a = 1\nx = torch._C\ny = torch._C\n")
    assert [(f.kind, f.line) for f in findings] == [("tampering", 2)]


def test_many_review_findings_do_not_crowd_out_a_tampering_one():
    cell = "".join(f"d{i} = x{i}.__dict__\n" for i in range(200)) + "core = torch._C\n"
    assert "tampering" in kinds(cell)


def test_computed_getattr_finding_says_the_name_is_built_at_run_time():
    assert [f.what for f in scan("core = getattr(torch, name)\n")] == [
        "builds an attribute name at run time (getattr with a computed name)"]


# --- bounded work --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", [
    pytest.param(")\n" * 5_000 + "torch._C\n", id="thousands-of-broken-lines"),
    pytest.param("(\n" * 5_000 + "torch._C\n", id="thousands-of-unclosed-brackets"),
    pytest.param("x" + ".a" * 100_000 + "\ntorch._C\n", id="attribute-chain-too-deep-to-parse"),
    pytest.param("-" * 100_000 + "1\ntorch._C\n", id="expression-too-deep-to-parse"),
])
def test_source_that_defeats_the_parser_is_still_read_quickly(source):
    start = time.process_time()
    findings = scan(python_source(source))
    assert time.process_time() - start < 5
    assert "tampering" in {f.kind for f in findings}


@pytest.fixture(scope="module")
def two_megabytes_of_cells():
    cells = [source.values[0] for source in reference_cells()]
    size = sum(map(len, cells))
    return cells * (2 * 2**20 // size + 1)


def test_a_2_mb_notebook_scans_in_under_5_seconds(two_megabytes_of_cells):
    start = time.process_time()
    for cell in two_megabytes_of_cells:
        scan(python_source(cell))
    assert time.process_time() - start < 5


def test_a_2_mb_cell_scans_in_under_5_seconds(two_megabytes_of_cells):
    cell = "\n".join(two_megabytes_of_cells)
    start = time.process_time()
    scan(python_source(cell))
    assert time.process_time() - start < 5
