"""Points follow run-time evidence: autograd outside the monitor's usual watch is caught, a name is not.

Two classes of notebooks, graded in the sandbox in one run per exercise:

- **autograd outside the watch**: hand-written backward parts (ex2's layer_norm_backward, ex6's
  batch_norm_backward) that really use autograd, by routes the monitor did not see before: a graph
  recorded while the cells ran and replayed at call time by calling its ``grad_fn`` nodes, and
  autograd or functorch reached inside a tensor subclass's ``__torch_function__`` or
  ``__torch_dispatch__``, where PyTorch switches the monitor's mode off. Each must end with nothing
  on its part (0 points, or its points held for review), and the other parts keep theirs.
- **constructs tied to the part that ran them**: a correct backward that also reads ``grad_fn`` in
  the graded call is held for review on that part only; the same line in a cell no graded call
  runs, and names like ``signal`` or ``inspect`` anywhere, cost nothing.

The replays look the hidden inputs up by value: an attacker who read ``autograder/suites`` can
compute them at cell time, so the tables below are built from the suites' own seeded inputs.
"""

import pytest

from tests.grading import max_scores, measured_scores, part_scores, reference, results_of, run_grader, with_cell, \
    write_class

pytestmark = [pytest.mark.slow, pytest.mark.sandbox]

EX2, EX6 = "ex2_layernorm", "ex6_beyond_norm"
BACKWARD = {EX2: "layer_norm_forward_backward", EX6: "batch_norm_forward_backward"}

# A hand forward that is the learner's own work; its cache keeps the inputs, for the attacks' backward.
EX2_FORWARD = """
def layer_norm_forward(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias, (x, weight, bias, eps)

def formula(x, w, b, eps):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + eps) * w + b
"""
EX6_FORWARD = """
def batch_norm_forward(x, gamma, beta, eps=1e-5):
    mean = x.mean(0)
    var = ((x - mean) ** 2).mean(0)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta, (x, gamma, beta, eps)

def formula(x, w, b, eps):
    mean = x.mean(0)
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean(0) + eps) * w + b
"""
FORWARD = {EX2: EX2_FORWARD, EX6: EX6_FORWARD}
NAMES = {EX2: ("layer_norm_forward", "layer_norm_backward"), EX6: ("batch_norm_forward", "batch_norm_backward")}

# A reverse-mode walk over a recorded graph, calling each node directly: autograd's engine is never entered.
WALK = """
def replay(out, leaves, dout):
    order, seen = [], set()
    def visit(node):
        if node is None or node in seen:
            return
        seen.add(node)
        for parent, _ in node.next_functions:
            visit(parent)
        order.append(node)
    visit(out.grad_fn)
    grads = {out.grad_fn: dout}
    found = {}
    for node in reversed(order):
        grad = grads.pop(node, None)
        if grad is None:
            continue
        if hasattr(node, "variable"):
            found[id(node.variable)] = grad
            continue
        outputs = node(grad)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        for (parent, _), g in zip(node.next_functions, outputs):
            if parent is not None and g is not None:
                grads[parent] = grads[parent] + g if parent in grads else g
    return [found.get(id(leaf), torch.zeros_like(leaf)) for leaf in leaves]
"""


def graph_replay(assignment: str) -> str:
    """Graphs recorded at cell time for inputs met at call time, replayed node by node in the backward."""
    forward, backward = NAMES[assignment]
    return FORWARD[assignment] + WALK + f"""
RECORDED = {{}}
_original_forward = {forward}

def {forward}(x, weight, bias, eps=1e-5):
    out, cache = _original_forward(x, weight, bias, eps)
    key = (tuple(x.shape), x.dtype, float(x.sum()), float(weight.sum()), float(eps))
    if key not in RECORDED:  # first sight: hold on to the inputs; the graph is made by the next cell's loop
        RECORDED[key] = None
    return out, (key, cache)

def {backward}(dout, cache):
    key, (x, w, b, eps) = cache
    graph = RECORDED.get(key)
    if graph is None:
        return torch.zeros_like(x), torch.zeros_like(w), torch.zeros_like(b)
    out, leaves = graph
    return tuple(replay(out, leaves, dout))

# Record, at cell time, one graph per input the suite will use: its inputs come from seeded generators,
# which anyone who read the suite can run. Here: every shape and scale on a grid, for the seeds the suite uses.
def record(x, w, b, eps):
    leaves = [t.detach().clone().requires_grad_() for t in (x, w, b)]
    with torch.enable_grad():
        RECORDED[(tuple(x.shape), x.dtype, float(x.sum()), float(w.sum()), float(eps))] = (formula(*leaves, eps), leaves)
"""


def graph_replay_cell(assignment: str) -> str:
    """A cell that records graphs for the suite's own fixed inputs (the seeds are in autograder/suites)."""
    if assignment == EX2:
        return """
def suite_inputs(shape, seed, scale=1.0, offset=0.0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    d = shape[-1]
    x = (torch.randn(shape, generator=g, dtype=torch.float64) * scale + offset).to(dtype)
    w = (torch.rand(d, generator=g, dtype=torch.float64) + 0.5).to(dtype)
    b = torch.randn(d, generator=g, dtype=torch.float64).to(dtype)
    return x, w, b

for shape, seed in [((5, 4), 12), ((2, 1, 3, 4), 14), ((5, 4), 22), ((2, 1, 3, 4), 24), ((2, 3, 6), 33),
                    ((2, 1, 3, 5), 34)]:
    x, w, b = suite_inputs(shape, seed, scale=2.0, offset=1.0, dtype=torch.float64)
    record(x, w, b, 1e-5)
"""
    return """
def suite_batch(shape, seed, scale=1.0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    n, d = shape
    spread = scale * (torch.rand(d, generator=g, dtype=torch.float64) * 1.5 + 0.5)
    offset = scale * torch.randn(d, generator=g, dtype=torch.float64)
    x = torch.randn(n, d, generator=g, dtype=torch.float64) * spread + offset
    gamma = torch.rand(d, generator=g, dtype=torch.float64) + 0.5
    beta = torch.randn(d, generator=g, dtype=torch.float64)
    return x.to(dtype), gamma.to(dtype), beta.to(dtype)

for shape, seed in [((5, 3), 15), ((2, 7), 12), ((5, 3), 25), ((2, 7), 22), ((2, 5), 30)]:
    record(*suite_batch(shape, seed, 2.0, torch.float64), 1e-5)
"""


def subclass_vjp(assignment: str, handler: str) -> str:
    """The backward hands the work to a tensor subclass's handler, which runs torch.func.vjp there."""
    forward, backward = NAMES[assignment]
    if handler == "__torch_function__":
        subclass = """
class Courier(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.Tensor.add and PENDING:
            x, w, b, eps, dout = PENDING.pop()
            _, pull = torch.func.vjp(lambda *t: formula(*t, eps), x, w, b)
            RESULTS.append(pull(dout))
        return super().__torch_function__(func, types, args, kwargs)
"""
    else:
        subclass = """
class Courier(torch.Tensor):
    @staticmethod
    def __new__(cls, elem):
        return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype)
    def __init__(self, elem):
        self.elem = elem
    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if PENDING:
            x, w, b, eps, dout = PENDING.pop()
            _, pull = torch.func.vjp(lambda *t: formula(*t, eps), x, w, b)
            RESULTS.append(pull(dout))
        unwrap = lambda t: t.elem if isinstance(t, Courier) else t
        return func(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in (kwargs or {}).items()})
"""
    return FORWARD[assignment] + subclass + f"""
PENDING, RESULTS = [], []

def {backward}(dout, cache):
    x, w, b, eps = cache
    PENDING.append((x, w, b, eps, dout))
    Courier(torch.zeros(1)).add(1) if {handler == "__torch_dispatch__"} else torch.zeros(1).as_subclass(Courier).add(1)
    return tuple(RESULTS.pop())
"""


def subclass_autograd_grad(assignment: str) -> str:
    """torch.autograd.grad itself, called from inside a __torch_function__ handler."""
    forward, backward = NAMES[assignment]
    return FORWARD[assignment] + f"""
class Courier(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if PENDING:
            x, w, b, eps, dout = PENDING.pop()
            with torch.enable_grad():
                leaves = [t.detach().clone().requires_grad_() for t in (x, w, b)]
                RESULTS.append(torch.autograd.grad(formula(*leaves, eps), leaves, dout))
        return super().__torch_function__(func, types, args, kwargs)

PENDING, RESULTS = [], []

def {backward}(dout, cache):
    PENDING.append((*cache, dout))
    torch.zeros(1).as_subclass(Courier).mul(2)
    return tuple(RESULTS.pop())
"""


def vjp_with_the_function_mode_off(assignment: str) -> str:
    """torch.func.vjp with every function mode switched off, reached by names built at run time."""
    forward, backward = NAMES[assignment]
    return FORWARD[assignment] + f"""
def {backward}(dout, cache):
    x, w, b, eps = cache
    off = getattr(getattr(torch, '_' + 'C'), 'DisableTorch' + 'Function')
    with off():
        _, pull = getattr(torch.func, 'v' + 'jp')(lambda *t: formula(*t, eps), x, w, b)
        return tuple(pull(dout))
"""


def own_backward_reading_grad_fn(assignment: str) -> str:
    """The reference backward that also looks at grad_fn inside the graded call (and uses nothing it finds)."""
    solution = reference_source(assignment)
    _, backward = NAMES[assignment]
    return solution.replace(f"def {backward}(dout, cache):\n",
                            f"def {backward}(dout, cache):\n    assert dout.grad_fn is None\n")


def reference_source(assignment: str) -> str:
    for cell in reference(assignment)["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == BACKWARD[assignment]:
            return "".join(cell["source"])
    raise LookupError(assignment)


def zero_backward(assignment: str) -> str:
    """The baseline: an honest forward and a backward that returns zeros."""
    forward, backward = NAMES[assignment]
    return FORWARD[assignment] + f"""
def {backward}(dout, cache):
    x, w, b, eps = cache
    return torch.zeros_like(x), torch.zeros_like(w), torch.zeros_like(b)
"""


def appended(notebook: dict, source: str) -> dict:
    notebook["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                              "source": source})
    return notebook


def attacks(assignment: str) -> dict[str, dict]:
    part = BACKWARD[assignment]
    return {
        "graph-recorded-at-cell-time-replayed-node-by-node": appended(
            with_cell(assignment, part, graph_replay(assignment)), graph_replay_cell(assignment)),
        "torch.func-inside-a-torch-function-handler": with_cell(assignment, part,
                                                                 subclass_vjp(assignment, "__torch_function__")),
        "torch.func-inside-a-torch-dispatch-handler": with_cell(assignment, part,
                                                                 subclass_vjp(assignment, "__torch_dispatch__")),
        "autograd.grad-inside-a-torch-function-handler": with_cell(assignment, part,
                                                                    subclass_autograd_grad(assignment)),
        "torch.func-with-the-function-mode-off": with_cell(assignment, part, vjp_with_the_function_mode_off(assignment)),
    }


HONEST_OR_HELD = {
    "reads-grad-fn-in-the-graded-call": lambda a: with_cell(a, BACKWARD[a], own_backward_reading_grad_fn(a)),
    "reads-grad-fn-in-a-cell-no-graded-call-runs": lambda a: appended(
        reference(a), "probe = torch.ones(2, requires_grad=True) * 3\nprint(probe.grad_fn, probe.grad_fn.next_functions)\n"),
    "names-that-look-like-tools": lambda a: appended(
        reference(a), "import inspect\nsignal = socket = 3\nprint(inspect.signature(print), signal + socket)\n"
                      "for name in ['a', 'b']:\n    setattr(inspect, '_probe_' + name, getattr(inspect, 'signature'))\n"),
}


@pytest.fixture(scope="module", params=[EX2, EX6])
def graded(request, tmp_path_factory):
    assignment = request.param
    folder = tmp_path_factory.mktemp(f"evidence-{assignment}")
    notebooks = {"reference": reference(assignment), "zero-backward": with_cell(assignment, BACKWARD[assignment],
                                                                               zero_backward(assignment))}
    notebooks.update(attacks(assignment))
    notebooks.update({name: make(assignment) for name, make in HONEST_OR_HELD.items()})
    write_class(folder / "class", notebooks)
    done = run_grader("grade", assignment, folder / "class", "--results", folder / "results", "--jobs", "2",
                      "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    return assignment, results_of(folder / "results")


ATTACKS = list(attacks(EX2))


def test_the_reference_keeps_full_marks_and_status_ok(graded):
    assignment, results = graded
    assert (results["reference"]["score"], results["reference"]["extra_data"]["status"]) == (
        sum(max_scores(assignment).values()), "ok")


@pytest.mark.parametrize("attack", ATTACKS)
def test_an_attack_on_the_backward_keeps_no_points_on_it(graded, attack):
    assignment, results = graded
    assert part_scores(results[attack])[BACKWARD[assignment]] == 0


@pytest.mark.parametrize("attack", ATTACKS)
def test_an_attack_is_not_graded_ok(graded, attack):
    assignment, results = graded
    part = results[attack]["extra_data"]["parts"][BACKWARD[assignment]]
    assert "held" in part or part["note"].startswith("0 points: it uses autograd")


@pytest.mark.parametrize("attack", ATTACKS)
def test_an_attack_costs_nothing_on_the_other_parts(graded, attack):
    assignment, results = graded
    others = {name: score for name, score in part_scores(results[attack]).items() if name != BACKWARD[assignment]}
    assert others == {name: score for name, score in max_scores(assignment).items() if name in others}


def test_the_replay_measured_more_than_the_zero_baseline_so_the_defence_is_what_stopped_it(graded):
    assignment, results = graded
    replay = results["graph-recorded-at-cell-time-replayed-node-by-node"]["extra_data"]["parts"][BACKWARD[assignment]]
    assert "autograd" in replay["note"]  # measured points, taken away on the monitor's evidence


def test_reading_grad_fn_in_the_graded_call_holds_that_part_only(graded):
    assignment, results = graded
    result = results["reads-grad-fn-in-the-graded-call"]
    held = sorted(name for name, part in result["extra_data"]["parts"].items() if "held" in part)
    assert (held, result["extra_data"]["status"], result["extra_data"]["status_after_release"],
            measured_scores(result)) == ([BACKWARD[assignment]], "review", "ok", max_scores(assignment))


def test_the_hold_quotes_the_line_it_rests_on(graded):
    _, results = graded
    assert any("`assert dout.grad_fn is None`" in problem
               for problem in results["reads-grad-fn-in-the-graded-call"]["extra_data"]["problems"])


@pytest.mark.parametrize("name", ["reads-grad-fn-in-a-cell-no-graded-call-runs", "names-that-look-like-tools"])
def test_a_construct_no_graded_call_ran_costs_nothing(graded, name):
    assignment, results = graded
    result = results[name]
    assert (result["score"], result["extra_data"]["status"], result["extra_data"]["problems"]) == (
        sum(max_scores(assignment).values()), "ok", [])


def test_what_costs_nothing_is_reported_to_the_instructor_with_its_line(graded):
    _, results = graded
    notes = results["names-that-look-like-tools"]["extra_data"]["instructor_notes"]
    assert any("`signal = socket = 3`" in note for note in notes)
