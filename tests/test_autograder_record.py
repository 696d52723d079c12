"""The monitor's record is out of the learner's reach (issue 33, item 3): fresh attacks of each class.

Written after a red team that read ``autograder/`` for an hour. One class of ex2_layernorm submissions is
graded in the sandbox with honest references among them; each attack must end with its attacked task at 0
(``forbidden``) or held for review, and the honest ones keep full marks and status ``ok``.

(a) Evidence that leaves the worker as it happens: taking a tag back out of the monitor's records after a
    forbidden call (through the mode's closure, its handler's defaults, or the monitor's own attributes)
    changes nothing, because the tag was already on the evidence channel.
(b) The dispatch state around every graded call: switching the monitor's sight off with the guard classes
    found through ``__subclasses__`` (the module attributes are gone, the classes live on) and running
    autograd under them, during the call or left switched off from a cell; pushing saved-tensor hooks of
    one's own over the grader's.
(c) The grader's objects: its reference implementation through ``sys.stdout``, ``__main__``, the functions
    the zygote put into PyTorch, or the grader's own files on disk.
"""

import pytest

from tests.grading import max_scores, measured_scores, part_scores, reference, results_of, run_grader, with_cell, \
    write_class
from tests.test_autograder_attacks import HIDE, OWN_LN

pytestmark = pytest.mark.slow

ASSIGNMENT = "ex2_layernorm"
FORWARD = OWN_LN + """
def layer_norm_forward(x, weight, bias, eps=1e-5):
    return own_ln(x, weight, bias, eps), (x, weight, bias, eps)
"""
# Finds a class by name among every class of the interpreter, without naming __subclasses__ in the source.
FIND_CLASS = """
def find_class(name):
    todo, seen = [object], set()
    while todo:
        for found in type.__dict__['__sub' + 'classes__'](todo.pop()):
            if found not in seen:
                seen.add(found)
                todo.append(found)
                if found.__name__ == name:
                    return found
"""
AUTOGRAD = """
        with torch.enable_grad():
            leaves = [t.detach().clone().requires_grad_() for t in (x, w, b)]
            return list(torch.autograd.grad(own_ln(*leaves, eps), leaves, dout))
"""

# name -> (the answer cell it replaces, its source)
ATTACKS = {
    # (a) taking evidence back
    "discards-the-tag-through-the-mode-closure": ("layer_norm", HIDE + """
import torch.nn.functional as F
def layer_norm(x, weight, bias, eps=1e-5):
    out = F.layer_norm(x, (x.shape[-1],), weight, bias, eps)
    modes = getattr(load('torch.ov' + 'errides', fromlist=['x']), '_get_current_function_mode' + '_stack')()
    for mode in modes:
        handler = type(mode).__torch_function__
        for cell in getattr(handler, '__clo' + 'sure__') or ():
            held = getattr(cell, 'cell_con' + 'tents')
            if hasattr(held, 'used'):
                held.used.discard('layer_norm')
    return out
"""),
    "clears-the-record-through-the-handler-defaults": ("layer_norm", HIDE + """
import torch.nn.functional as F
def layer_norm(x, weight, bias, eps=1e-5):
    out = F.layer_norm(x, (x.shape[-1],), weight, bias, eps)
    stack = getattr(load('torch.utils._python_dis' + 'patch', fromlist=['x']), '_get_current_dispatch_mode' + '_stack')
    for mode in stack():
        for default in getattr(type(mode).__torch_dispatch__, '__defa' + 'ults__') or ():
            monitor = getattr(default, '__self__', None)
            if monitor is not None and hasattr(monitor, 'used'):
                monitor.used.clear()
    return out
"""),
    "silences-the-monitor-for-one-call": ("layer_norm_forward_backward", FORWARD + HIDE + """
def layer_norm_backward(dout, cache):
    x, w, b, eps = cache
    stack = getattr(load('torch.utils._python_dis' + 'patch', fromlist=['x']), '_get_current_dispatch_mode' + '_stack')
    monitor = None
    for mode in stack():
        for default in getattr(type(mode).__torch_dispatch__, '__defa' + 'ults__') or ():
            monitor = getattr(default, '__self__', monitor)
    quiet = lambda *args, **kwargs: None
    for name in ('record', 'saw_operator', 'saw_function'):
        setattr(monitor, name, quiet)
    try:
""" + AUTOGRAD + """
    finally:
        for name in ('record', 'saw_operator', 'saw_function'):
            delattr(monitor, name)
"""),
    # (b) the dispatch state
    "autograd-under-the-guard-classes": ("layer_norm_forward_backward", FORWARD + FIND_CLASS + """
def layer_norm_backward(dout, cache):
    x, w, b, eps = cache
    with find_class('_DisableTorch' + 'Dispatch')(), find_class('DisableTorch' + 'Function')():
""" + AUTOGRAD),
    "guard-left-entered-by-a-cell": ("layer_norm_forward_backward", FORWARD + FIND_CLASS + """
left_on = find_class('_DisableTorch' + 'Dispatch')()
left_on.__enter__()
def layer_norm_backward(dout, cache):
    x, w, b, eps = cache
    if True:
""" + AUTOGRAD),
    "own-saved-tensor-hooks-over-the-graders": ("layer_norm_forward_backward", FORWARD + FIND_CLASS + """
def layer_norm_backward(dout, cache):
    x, w, b, eps = cache
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        with find_class('_DisableTorch' + 'Dispatch')(), find_class('DisableTorch' + 'Function')():
""" + AUTOGRAD.replace("\n        ", "\n            ")),
    "forward-mode-under-the-guard-classes": ("layer_norm_forward_backward", FORWARD + FIND_CLASS + """
def layer_norm_backward(dout, cache):
    x, w, b, eps = cache
    dual, size, columns = torch.autograd.forward_ad, x.shape[-1], []
    with find_class('_DisableTorch' + 'Dispatch')(), find_class('DisableTorch' + 'Function')():
        with dual.dual_level():
            for j in range(size):
                direction = torch.zeros_like(x)
                direction[..., j] = 1
                columns.append(dual.unpack_dual(own_ln(dual.make_dual(x, direction), w, b, eps)).tangent)
    jacobian = torch.stack(columns, -1)  # (N, D out, D in)
    m = x.mean(-1, keepdim=True)
    xhat = (x - m) / torch.sqrt(((x - m) ** 2).mean(-1, keepdim=True) + eps)
    return (dout.unsqueeze(-1) * jacobian).sum(-2), (dout * xhat).reshape(-1, size).sum(0), \
        dout.reshape(-1, size).sum(0)
"""),
    "functorch-original-through-the-replacement": ("layer_norm_forward_backward", FORWARD + FIND_CLASS + """
def layer_norm_backward(dout, cache):
    x, w, b, eps = cache
    import torch.func
    def loss(x, w, b):
        return (own_ln(x, w, b, eps) * dout).sum()
    with find_class('_DisableTorch' + 'Dispatch')(), find_class('DisableTorch' + 'Function')():
        return list(torch.func.grad(loss, argnums=(0, 1, 2))(x, w, b))
"""),
    # (c) the grader's objects
    "reference-through-sys-stdout": ("layer_norm", """
import sys
def layer_norm(x, weight, bias, eps=1e-5):
    found = getattr(type(sys.stdout).write, '__glo' + 'bals__').get('REFERENCES')
    return found['fixtures.layer_norm'](x, weight, bias, eps)
"""),
    "reference-through-main": ("layer_norm", """
import sys
def layer_norm(x, weight, bias, eps=1e-5):
    zygote = vars(sys.modules['__main__'])['zyg' + 'ote']
    executor = vars(zygote)['Executor']
    return getattr(executor.handle, '__glo' + 'bals__')['REFERENCES']['fixtures.layer_norm'](x, weight, bias, eps)
"""),
    "reference-through-patched-pytorch": ("layer_norm", """
import torch.cuda, torch._tensor_str
def layer_norm(x, weight, bias, eps=1e-5):
    for patched in (torch.cuda._lazy_call, torch._tensor_str._str):
        space = getattr(patched, '__glo' + 'bals__')
        if 'Executor' in space:
            found = getattr(space['Executor'].handle, '__glo' + 'bals__')['REFERENCES']
            return found['fixtures.layer_norm'](x, weight, bias, eps)
    raise LookupError('not found')
"""),
    "reference-kept-from-the-module-check": ("layer_norm_forward_backward", OWN_LN + """
kept = {}
def layer_norm(x, weight, bias, eps=1e-5):
    return own_ln(x, weight, bias, eps)
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
    def forward(self, x):
        kept.setdefault('reference', globals()['layer_norm'])  # the grader's, while it checks this module
        return layer_norm(x, self.weight, self.bias, self.eps)
def layer_norm_forward(x, weight, bias, eps=1e-5):
    return kept.get('reference', own_ln)(x, weight, bias, eps), (x, weight, bias, eps)
def layer_norm_backward(dout, cache):
    x, w, b, eps = cache
    return torch.zeros_like(x), torch.zeros_like(w), torch.zeros_like(b)
"""),
    "reference-from-the-graders-file": ("layer_norm", """
import sys
def layer_norm(x, weight, bias, eps=1e-5):
    for folder in sys.path:
        try:
            text = open(folder + '/autograder/sandboxed/fixtures.py').read()
        except OSError:
            continue
        space = {}
        exec(text, space)
        return space['layer_norm'](x, weight, bias, eps)
    raise LookupError('not found')
"""),
}
ATTACKED = {name: cell if cell == "layer_norm" else "layer_norm_forward_backward"
            for name, (cell, _) in ATTACKS.items()}


@pytest.fixture(scope="module")
def graded(tmp_path_factory, bubblewrap):
    folder = tmp_path_factory.mktemp("record")
    notebooks = {"00-honest": reference(ASSIGNMENT)}
    for number, (name, (cell, source)) in enumerate(ATTACKS.items(), start=1):
        notebooks[f"{number:02d}-{name}"] = with_cell(ASSIGNMENT, cell, source)
    notebooks["99-honest"] = reference(ASSIGNMENT)
    write_class(folder / "class", notebooks)
    done = run_grader("grade", ASSIGNMENT, folder / "class", "--results", folder / "results", "--jobs", 2)
    assert done.returncode == 0, done.stderr[-2000:]
    return {name.split("-", 1)[1]: result for name, result in results_of(folder / "results").items()}


def test_honest_submissions_graded_among_the_attacks_keep_full_marks(graded):
    assert [(part_scores(graded["honest"]), graded["honest"]["extra_data"]["status"])] == \
        [(max_scores(ASSIGNMENT), "ok")]


@pytest.mark.parametrize("attack", ATTACKS)
def test_the_attacked_task_gets_nothing_or_is_held(graded, attack):
    result = graded[attack]
    part = ATTACKED[attack]
    held = "held" in result["extra_data"]["parts"][part]
    assert part_scores(result)[part] == 0, result["extra_data"]["problems"]
    if not held:  # not held: what its tests measured is what it earned, and it was not the reference's work
        assert measured_scores(result)[part] == 0
