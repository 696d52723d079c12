"""The "from scratch" and "no autograd" rules hold against a student who has read ``autograder/``.

Each attack replaces one answer cell of the reference notebook. Two classes are graded, one
run each: ex2_layernorm (task 1, ``layer_norm``, from scratch; task 3, the backward by hand,
no autograd) and ex5_rmsnorm (``rms_norm`` from scratch). An attack must score, on the task
it attacks, no more than an honest wrong answer (``BASELINE``: zeros). Where the grader holds
a submission for review, the points its tests *measured* are checked too, so each runtime
defence is tested on its own and not only through the source scan. Most attacks hide their
names from the scan on purpose (names built at run time): they are held for review, and
what they measured shows whether the sandbox stopped them. The honest reference, graded
in the same run, keeps full marks.
"""

import json

import pytest

from grading import max_scores, part_scores, reference, results_of, run_grader, with_cell, write_class

# A baseline is an honest wrong answer to the attacked task; for the backward task it has an honest forward, as
# the attacks do (their forwards are their own work and earn their points).
# Shared preludes: an own forward written from elementary operations, and a way to import a module whose
# name the source scan cannot see.
OWN_LN = """
def own_ln(x, w, b, eps):
    m = x.mean(-1, keepdim=True)
    v = ((x - m) ** 2).mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(v + eps) * w + b
"""
HIDDEN_IMPORT = "load = __builtins__['__imp' + 'ort__'] if type(__builtins__) is dict else __builtins__.__dict__['__imp' + 'ort__']\n"
AUTOGRAD_BACKWARD = """
def layer_norm_forward(x, weight, bias, eps=1e-5):
    return own_ln(x, weight, bias, eps), (x, weight, bias, eps)
def grads_by_autograd(dout, cache):
    x, w, b, eps = cache
    with torch.enable_grad():
        leaves = [t.detach().clone().requires_grad_() for t in (x, w, b)]
        return list(torch.autograd.grad(own_ln(*leaves, eps), leaves, dout))
"""

EX2 = "ex2_layernorm"
EX5 = "ex5_rmsnorm"
BASELINE = {
    (EX2, "layer_norm"): "def layer_norm(x, weight, bias, eps=1e-5):\n    return torch.zeros_like(x)\n",
    (EX2, "layer_norm_forward_backward"): OWN_LN + """
def layer_norm_forward(x, weight, bias, eps=1e-5):
    return own_ln(x, weight, bias, eps), (x, weight)
def layer_norm_backward(dout, cache):
    x, w = cache
    return torch.zeros_like(x), torch.zeros_like(w), torch.zeros_like(w)
""",
    (EX5, "rms_norm"): "def rms_norm(x, weight, eps=1e-6):\n    return torch.zeros_like(x)\n",
}

# name -> (assignment, answer cell it replaces, source, statuses the result may carry)
HELD_OR_STOPPED = {"review", "tampering", "sandbox_violation", "cell_errors", "ok"}
ATTACKS = {
    # 1. Threads: the monitor's modes are thread-local; the worker may not start a thread at all.
    "autograd-in-a-thread": (EX2, "layer_norm_forward_backward", OWN_LN + AUTOGRAD_BACKWARD + HIDDEN_IMPORT + """
def layer_norm_backward(dout, cache):
    box = {}
    worker = load('thr' + 'eading').Thread(target=lambda: box.update(g=grads_by_autograd(dout, cache)))
    worker.start(); worker.join()
    return box['g']
""", HELD_OR_STOPPED),
    "autograd-in-a-thread-pool": (EX2, "layer_norm_forward_backward", OWN_LN + AUTOGRAD_BACKWARD + HIDDEN_IMPORT + """
def layer_norm_backward(dout, cache):
    pool = load('concurrent.fut' + 'ures').ThreadPoolExecutor(1)
    return pool.submit(grads_by_autograd, dout, cache).result()
""", HELD_OR_STOPPED),
    "fused-rms-norm-in-a-low-level-thread": (EX5, "rms_norm", HIDDEN_IMPORT + """
def rms_norm(x, weight, eps=1e-6):
    box, done = {}, load('_thr' + 'ead').allocate_lock()
    def work():
        box['y'] = getattr(torch.ops.aten, '_fused_' + 'rms_norm')(x, [x.shape[-1]], weight, eps)[0]
        done.release()
    done.acquire()
    load('_thr' + 'ead').start_new_thread(work, ())
    done.acquire()
    return box['y']
""", HELD_OR_STOPPED),
    "autograd-in-a-forked-child": (EX2, "layer_norm_forward_backward", OWN_LN + AUTOGRAD_BACKWARD + HIDDEN_IMPORT + """
def layer_norm_backward(dout, cache):
    os = load('o' + 's')
    read, write = os.pipe()
    if getattr(os, 'fo' + 'rk')() == 0:
        import pickle
        os.write(write, pickle.dumps([g.tolist() for g in grads_by_autograd(dout, cache)]))
        os._exit(0)
    import pickle
    return [torch.tensor(g, dtype=dout.dtype) for g in pickle.loads(os.read(read, 1 << 20))]
""", HELD_OR_STOPPED),
    # 2. PyTorch's own implementations, whatever namespace they live in.
    "refs-native-layer-norm": (EX2, "layer_norm", HIDDEN_IMPORT + """
def layer_norm(x, weight, bias, eps=1e-5):
    refs = load('torch._r' + 'efs')
    return getattr(refs, 'native_layer' + '_norm')(x, [x.shape[-1]], weight, bias, eps)[0]
""", HELD_OR_STOPPED),
    "decomposition-table": (EX2, "layer_norm", HIDDEN_IMPORT + """
def layer_norm(x, weight, bias, eps=1e-5):
    table = load('torch._dec' + 'omp').decomposition_table
    for op, fn in table.items():
        if str(op).startswith('aten.native_layer' + '_norm.'):
            return fn(x, [x.shape[-1]], weight, bias, eps)[0]
""", HELD_OR_STOPPED),
    "decomposed-backward": (EX2, "layer_norm_forward_backward", OWN_LN + HIDDEN_IMPORT + """
def layer_norm_forward(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    rstd = 1 / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + eps)
    return own_ln(x, weight, bias, eps), (x, weight, bias, mean, rstd)
def layer_norm_backward(dout, cache):
    x, w, b, mean, rstd = cache
    fn = getattr(load('torch._decomp.decompo' + 'sitions'), 'native_layer' + '_norm_backward')
    dx, dw, db = fn(dout, x, [x.shape[-1]], mean, rstd, w, b, [True, True, True])
    return dx, dw, db
""", HELD_OR_STOPPED),
    "fused-rms-norm-decomposition": (EX5, "rms_norm", HIDDEN_IMPORT + """
def rms_norm(x, weight, eps=1e-6):
    fn = getattr(load('torch._decomp.decompo' + 'sitions'), '_fused_rms' + '_norm')
    return fn(x, [x.shape[-1]], weight, eps)[0]
""", HELD_OR_STOPPED),
    "group-norm-in-disguise": (EX2, "layer_norm", """
def layer_norm(x, weight, bias, eps=1e-5):
    flat = x.reshape(-1, 1, x.shape[-1])
    return F.group_norm(flat, 1, eps=eps).reshape(x.shape) * weight + bias
""", HELD_OR_STOPPED),
    "batch-norm-on-the-transpose": (EX2, "layer_norm", """
def layer_norm(x, weight, bias, eps=1e-5):
    flat = x.reshape(-1, x.shape[-1]).t()
    return F.batch_norm(flat, None, None, training=True, eps=eps).t().reshape(x.shape) * weight + bias
""", HELD_OR_STOPPED),
    "nested-tensor-path": (EX5, "rms_norm", """
def rms_norm(x, weight, eps=1e-6):
    nested = torch.nested.nested_tensor([x.reshape(-1, x.shape[-1])])
    return F.layer_norm(nested, (x.shape[-1],), eps=eps).unbind()[0].reshape(x.shape) * weight
""", HELD_OR_STOPPED),
    "functorch-grad": (EX2, "layer_norm_forward_backward", OWN_LN + """
def layer_norm_forward(x, weight, bias, eps=1e-5):
    return own_ln(x, weight, bias, eps), (x, weight, bias, eps)
def layer_norm_backward(dout, cache):
    x, w, b, eps = cache
    from torch.func import vjp
    _, pull = vjp(lambda a, c, d: own_ln(a, c, d, eps), x, w, b)
    return pull(dout)
""", HELD_OR_STOPPED),
    "forward-mode-dual-numbers": (EX2, "layer_norm_forward_backward", OWN_LN + """
import torch.autograd.forward_ad as fwad
def layer_norm_forward(x, weight, bias, eps=1e-5):
    return own_ln(x, weight, bias, eps), (x, weight, bias, eps)
def layer_norm_backward(dout, cache):
    x, w, b, eps = cache
    grads = []
    for which, t in enumerate((x, w, b)):
        g = torch.zeros(t.numel(), dtype=t.dtype)
        for j in range(t.numel()):
            tangent = torch.zeros(t.numel(), dtype=t.dtype)
            tangent[j] = 1
            with fwad.dual_level():
                args = [x, w, b]
                args[which] = fwad.make_dual(t, tangent.reshape(t.shape))
                g[j] = (fwad.unpack_dual(own_ln(*args, eps)).tangent * dout).sum()
        grads.append(g.reshape(t.shape))
    return grads
""", HELD_OR_STOPPED),
    # 3. Switching the defences off from inside the worker.
    "blinds-the-monitor-by-shadowing-torch": (EX2, "layer_norm_forward_backward", OWN_LN + AUTOGRAD_BACKWARD + """
torch.is_grad_enabled = lambda: False
torch.Tensor.requires_grad = property(lambda self: False)
def layer_norm_backward(dout, cache):
    return grads_by_autograd(dout, cache)
""", HELD_OR_STOPPED),
    "rewrites-the-worker-channel": (EX2, "layer_norm_forward_backward", OWN_LN + AUTOGRAD_BACKWARD + """
import json, socket
json.dumps = lambda *a, **k: '{}'
socket.socket.sendall = lambda self, data: None
def layer_norm_backward(dout, cache):
    return grads_by_autograd(dout, cache)
""", HELD_OR_STOPPED),
    "pops-the-monitor-by-a-built-name": (EX2, "layer_norm_forward_backward", OWN_LN + AUTOGRAD_BACKWARD + """
def layer_norm_backward(dout, cache):
    core = getattr(torch, '_' + 'C')
    modes = getattr(core, '_pop_torch_function' + '_stack')(), getattr(core, '_pop_torch_dispatch' + '_stack')(None)
    try:
        return grads_by_autograd(dout, cache)
    finally:
        getattr(core, '_push_on_torch_function' + '_stack')(modes[0])
        getattr(core, '_push_on_torch_dispatch' + '_stack')(modes[1])
""", HELD_OR_STOPPED),
    "resets-the-kernel-registrations-found-by-gc": (EX5, "rms_norm", HIDDEN_IMPORT + """
def rms_norm(x, weight, eps=1e-6):
    for obj in load('g' + 'c').get_objects():
        if hasattr(obj, 'reset') and 'Dispatch' in type(obj).__name__:
            obj.reset()
    return F.rms_norm(x, (x.shape[-1],), weight, eps)
""", HELD_OR_STOPPED),
    "walks-the-frames-to-the-monitor": (EX2, "layer_norm_forward_backward", OWN_LN + AUTOGRAD_BACKWARD + """
def layer_norm_backward(dout, cache):
    try:
        raise ValueError
    except ValueError as error:
        frame = getattr(error.__traceback__, 'tb_' + 'frame')
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if type(value).__name__ == 'Monitor':
                value.used = set()
                value.record = lambda tag: None
        frame = frame.f_back
    return grads_by_autograd(dout, cache)
""", HELD_OR_STOPPED),
    "imports-the-worker-modules-again": (EX5, "rms_norm", HIDDEN_IMPORT + """
def rms_norm(x, weight, eps=1e-6):
    guard = load('autograder.sand' + 'boxed.guard', fromlist=['x'])
    guard.tag_of = lambda name: None
    return F.rms_norm(x, (x.shape[-1],), weight, eps)
""", HELD_OR_STOPPED),
    "calls-native-code-through-ctypes": (EX5, "rms_norm", HIDDEN_IMPORT + """
def rms_norm(x, weight, eps=1e-6):
    c = load('cty' + 'pes')
    c.CDLL(None).getpid()
    return F.rms_norm(x, (x.shape[-1],), weight, eps)
""", HELD_OR_STOPPED),
    "captures-a-kernel-while-the-cells-run": (EX5, "rms_norm", HIDDEN_IMPORT + """
kernel = getattr(load('torch.lib' + 'rary'), 'get_' + 'kernel')('aten::_fused_rms_norm', 'CompositeImplicitAutograd')
def rms_norm(x, weight, eps=1e-6):
    return kernel(x, [x.shape[-1]], weight, eps)[0]
""", HELD_OR_STOPPED),
    # 4. IPython lines do not hide a cell from the scan.
    "magic-line-hides-a-direct-reach": (EX2, "layer_norm", """%matplotlib inline
def layer_norm(x, weight, bias, eps=1e-5):
    with torch._C.DisableTorchFunction():
        return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)
""", {"tampering"}),
    "shell-line-and-a-built-name": (EX5, "rms_norm", """!ls
def rms_norm(x, weight, eps=1e-6):
    return getattr(F, 'rms_' + 'norm')(x, (x.shape[-1],), weight, eps)
""", {"review"}),
}


def notebook(assignment, cell, source):
    return with_cell(assignment, cell, source)


@pytest.fixture(scope="module", params=[EX2, EX5])
def graded(request, tmp_path_factory):
    assignment = request.param
    folder = tmp_path_factory.mktemp(assignment)
    notebooks = {"honest": reference(assignment)}
    notebooks |= {f"baseline-{cell}": notebook(assignment, cell, source)
                  for (a, cell), source in BASELINE.items() if a == assignment}
    notebooks |= {name: notebook(assignment, cell, source)
                  for name, (a, cell, source, _) in ATTACKS.items() if a == assignment}
    write_class(folder / "class", notebooks)
    done = run_grader("grade", assignment, folder / "class", "--results", folder / "results", "--jobs", 2,
                      "--timeout", 60)
    return assignment, done, results_of(folder / "results")


def measured(result: dict) -> dict[str, float]:
    """What the tests measured per part: the held score of a submission held for review, else its score."""
    return {name: part.get("held", part["score"]) for name, part in result["extra_data"]["parts"].items()}


def attacks_of(assignment):
    return [name for name, (a, *_) in ATTACKS.items() if a == assignment]


def test_the_class_is_graded_with_status_0(graded):
    assignment, done, results = graded
    assert done.returncode == 0, done.stderr
    assert "honest" in results and set(attacks_of(assignment)) <= set(results)


def test_the_honest_submission_keeps_full_marks_and_status_ok(graded):
    assignment, _, results = graded
    assert part_scores(results["honest"]) == max_scores(assignment)
    assert results["honest"]["extra_data"]["status"] == "ok"


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_attack_measures_no_more_than_an_honest_wrong_answer(graded, attack):
    assignment, _, results = graded
    if ATTACKS[attack][0] != assignment:
        pytest.skip(f"graded with {ATTACKS[attack][0]}")
    part = ATTACKS[attack][1]
    baseline = part_scores(results[f"baseline-{part}"])[part]
    assert baseline < max_scores(assignment)[part] / 2
    assert part_scores(results[attack])[part] <= baseline
    assert measured(results[attack])[part] <= baseline, results[attack]["output"]


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_attack_gets_a_status_that_names_it(graded, attack):
    assignment, _, results = graded
    if ATTACKS[attack][0] != assignment:
        pytest.skip(f"graded with {ATTACKS[attack][0]}")
    assert results[attack]["extra_data"]["status"] in ATTACKS[attack][3]


def test_no_attack_is_reported_as_a_grader_error(graded):
    _, _, results = graded
    assert [name for name, r in results.items() if r["extra_data"]["status"] == "grader_error"] == []


def test_a_thread_is_refused_and_named(graded):
    assignment, _, results = graded
    if assignment != EX2:
        pytest.skip("the thread attacks are ex2's")
    notes = " ".join(results["autograd-in-a-thread"]["extra_data"]["problems"])
    assert "thread" in notes


def test_a_held_submission_says_why_in_its_feedback(graded):
    assignment, _, results = graded
    held = [r for r in results.values() if r["extra_data"]["status"] == "review"]
    assert held
    assert all("held for review" in r["output"] for r in held)


def test_the_sandbox_kept_the_monitor_intact_against_frame_walking(graded):
    assignment, _, results = graded
    if assignment != EX2:
        pytest.skip("an ex2 attack")
    result = results["walks-the-frames-to-the-monitor"]
    assert "frames are not available" in json.dumps(result)
