"""Submissions that attack the grader get no more than their honest work earns, and harm no one else.

Written by reading ``autograder/``, as a determined student would; one section per class
of attack (the README's "What the grader defends against" table). Each section grades its
class of notebooks in one run of ``python -m autograder grade``, next to an honest
reference (which keeps full marks) and honest wrong answers (the baselines an attack must
not beat on the task it attacks). Most attacks hide their names from the source scan on
purpose (``HIDE``, names built at run time): they are held for review, and the points their
tests *measured* show whether each runtime defence held on its own.

1-4. the rules: threads, PyTorch's own implementations, switching the defences off, hiding
     from the scan (``RULE_ATTACKS``, ex2_layernorm and ex5_rmsnorm; ``EX6_ATTACKS``, ex6_beyond_norm);
5-7. the worker's channel and crashes: hostile frames, a crash per task, raising to pass
     (``HOSTILE_FRAMES``, ``CRASHES``, ``RAISING``);
8-10. inputs and reconnaissance (``INPUT_TRICKS``);
and the sandbox itself: files, signals, network, resources (``SANDBOX_ATTACKS``).
Malformed notebooks in detail are in ``test_autograder_inputs.py``, the scan's tricks in
``test_scan.py``, the seccomp filters' calls in ``test_seccomp.py``.
"""

import json

import pytest

from tests.grading import (REPO, max_scores, measured_scores, part_scores, reference, results_of, run_grader, with_cell,
                     with_cells, write_class)
from tests.mistakes import EX6_DYT

ASSIGNMENT = "ex2_layernorm"

pytestmark = pytest.mark.slow  # every section grades a class of attacks in the sandbox
# Imports a module by a name the source scan cannot read.
HIDE = "load = __builtins__['__imp' + 'ort__'] if type(__builtins__) is dict else __builtins__.__dict__['__imp' + 'ort__']\n"


# --- 1-4. The rules: "from scratch" and "no autograd" ----------------------------------------------------------

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
# Quantized tensors PyTorch's quantized norms take: qint32 fine enough for the suites' tolerances, quint8 coarse;
# OUT, an output scale for results under 2**10 in magnitude; own, a layer norm of the learner's own.
QUANTIZED = """
def fine(t):
    return torch.quantize_per_tensor(t.float(), float(t.abs().max()) / 2**30 + 1e-30, 0, torch.qint32)
def coarse(t):
    return torch.quantize_per_tensor(t.float(), float(t.abs().max()) / 127 + 1e-30, 128, torch.quint8)
OUT = 2.0 ** -20
def own(x, w, b, eps):
    m = x.mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(((x - m) ** 2).mean(-1, keepdim=True) + eps) * w + b
"""
RULE_BASELINES = {
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
HELD_OR_STOPPED = {"review", "forbidden", "sandbox_violation", "protocol_violation", "cell_errors", "ok"}
RULE_ATTACKS = {
    # 1. Threads: the monitor's modes are thread-local; the worker may not start a thread at all.
    "autograd-in-a-thread": (EX2, "layer_norm_forward_backward", OWN_LN + AUTOGRAD_BACKWARD + HIDE + """
def layer_norm_backward(dout, cache):
    box = {}
    worker = load('thr' + 'eading').Thread(target=lambda: box.update(g=grads_by_autograd(dout, cache)))
    worker.start(); worker.join()
    return box['g']
""", HELD_OR_STOPPED),
    "autograd-in-a-thread-pool": (EX2, "layer_norm_forward_backward", OWN_LN + AUTOGRAD_BACKWARD + HIDE + """
def layer_norm_backward(dout, cache):
    pool = load('concurrent.fut' + 'ures').ThreadPoolExecutor(1)
    return pool.submit(grads_by_autograd, dout, cache).result()
""", HELD_OR_STOPPED),
    "fused-rms-norm-in-a-low-level-thread": (EX5, "rms_norm", HIDE + """
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
    "autograd-in-a-forked-child": (EX2, "layer_norm_forward_backward", OWN_LN + AUTOGRAD_BACKWARD + HIDE + """
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
    "refs-native-layer-norm": (EX2, "layer_norm", HIDE + """
def layer_norm(x, weight, bias, eps=1e-5):
    refs = load('tor' + 'ch.' + '_re' + 'fs', fromlist=['__name__'])
    return getattr(refs, 'native_layer' + '_norm')(x, [x.shape[-1]], weight, bias, eps)[0]
""", HELD_OR_STOPPED),
    "decomposition-table": (EX2, "layer_norm", HIDE + """
def layer_norm(x, weight, bias, eps=1e-5):
    table = load('tor' + 'ch.' + '_dec' + 'omp', fromlist=['__name__']).decomposition_table
    for op, fn in table.items():
        if str(op).startswith('aten.native_layer' + '_norm.'):
            return fn(x, [x.shape[-1]], weight, bias, eps)[0]
""", HELD_OR_STOPPED),
    "decomposed-backward": (EX2, "layer_norm_forward_backward", OWN_LN + HIDE + """
def layer_norm_forward(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    rstd = 1 / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + eps)
    return own_ln(x, weight, bias, eps), (x, weight, bias, mean, rstd)
def layer_norm_backward(dout, cache):
    x, w, b, mean, rstd = cache
    fn = getattr(load('tor' + 'ch.' + '_dec' + 'omp.decompositions', fromlist=['__name__']), 'native_layer' + '_norm_backward')
    dx, dw, db = fn(dout, x, [x.shape[-1]], mean, rstd, w, b, [True, True, True])
    return dx, dw, db
""", HELD_OR_STOPPED),
    "fused-rms-norm-decomposition": (EX5, "rms_norm", HIDE + """
def rms_norm(x, weight, eps=1e-6):
    fn = getattr(load('tor' + 'ch.' + '_dec' + 'omp.decompositions', fromlist=['__name__']), '_fused_rms' + '_norm')
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
    "resets-the-kernel-registrations-found-by-gc": (EX5, "rms_norm", HIDE + """
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
        frame = getattr(getattr(error, '__trace' + 'back__'), 'tb_' + 'frame')
    while frame is not None:
        for value in list(getattr(frame, 'f_' + 'locals').values()):
            if type(value).__name__ == 'Mon' + 'itor':
                value.used = set()
                value.record = lambda tag: None
        frame = getattr(frame, 'f_' + 'back')
    return grads_by_autograd(dout, cache)
""", HELD_OR_STOPPED),
    "walks-the-frames-through-torchscripts-resolver": (EX2, "layer_norm_forward_backward", OWN_LN
                                                       + AUTOGRAD_BACKWARD + """
def layer_norm_backward(dout, cache):
    resolver = getattr(torch, '_jit_' + 'internal').createResolutionCallbackFromFrame
    for up in range(1, 12):
        found = resolver(frames_up=up)('Mon' + 'itor')
        if found is not None:
            found.record = lambda self, tag: None
    return grads_by_autograd(dout, cache)
""", HELD_OR_STOPPED),
    "imports-the-worker-modules-again": (EX5, "rms_norm", HIDE + """
def rms_norm(x, weight, eps=1e-6):
    guard = load('auto' + 'grader.' + 'sand' + 'boxed.guard', fromlist=['__name__'])
    guard.tag_of = lambda name: None
    return F.rms_norm(x, (x.shape[-1],), weight, eps)
""", HELD_OR_STOPPED),
    "calls-native-code-through-ctypes": (EX5, "rms_norm", HIDE + """
def rms_norm(x, weight, eps=1e-6):
    c = load('cty' + 'pes')
    c.CDLL(None).getpid()
    return F.rms_norm(x, (x.shape[-1],), weight, eps)
""", HELD_OR_STOPPED),
    "captures-a-kernel-while-the-cells-run": (EX5, "rms_norm", HIDE + """
kernel = getattr(load('tor' + 'ch.' + 'lib' + 'rary', fromlist=['__name__']), 'get_' + 'kernel')(
    'aten::' + 'native_layer' + '_norm', 'CPU')
keys = getattr(getattr(torch, '_' + 'C'), '_dispatch' + '_keys')(torch.ones(1))
def rms_norm(x, weight, eps=1e-6):
    scale = torch.sqrt((x * x).mean(-1, keepdim=True) + eps)
    return kernel.call_boxed(keys, x / scale * 0 + x, [x.shape[-1]], None, None, eps)[0] * 0 + x / scale * weight
""", HELD_OR_STOPPED),
    # 2b. Norm operators of other namespaces (quantized), by every route to their kernels, and a norm run by
    # TorchScript's static runtime outside the dispatcher.
    "quantized-layer-norm-on-qint32-with-torch-functions-off": (EX2, "layer_norm", QUANTIZED + """
def layer_norm(x, weight, bias, eps=1e-5):
    ops = getattr(torch.ops, 'quan' + 'tized')
    with getattr(torch, '_' + 'C').DisableTorchFunction():
        y = getattr(ops, 'layer' + '_norm')(fine(x), [x.shape[-1]], weight.float(), bias.float(), eps, OUT, 0)
    return y.dequantize().to(x.dtype)
""", HELD_OR_STOPPED),
    "quantized-layer-norm-on-quint8-beside-its-own-answer": (EX2, "layer_norm", QUANTIZED + """
def layer_norm(x, weight, bias, eps=1e-5):
    ops = getattr(torch.ops, 'quan' + 'tized')
    y = getattr(ops, 'layer' + '_norm')(coarse(x), [x.shape[-1]], weight.float(), bias.float(), eps, 0.05, 128)
    return own(x, weight, bias, eps) + 0 * y.dequantize().to(x.dtype)
""", HELD_OR_STOPPED),
    "quantized-layer-norm-kernel-fetched-while-the-cells-run": (EX2, "layer_norm", QUANTIZED + """
core = getattr(torch, '_' + 'C')
kernel = getattr(core, '_dispatch_get_computed' + '_kernel_for_dispatch_key')(
    'quan' + 'tized::layer' + '_norm', getattr(core, 'Dispatch' + 'Key').QuantizedCPU)
def layer_norm(x, weight, bias, eps=1e-5):
    qx = fine(x)
    keys = getattr(core, '_dispatch' + '_keys')(qx)
    return kernel.call_boxed(keys, qx, [x.shape[-1]], weight.float(), bias.float(), eps, OUT, 0).dequantize().to(x.dtype)
""", HELD_OR_STOPPED),
    "quantized-layer-norm-redispatched-by-a-name-found-at-run-time": (EX2, "layer_norm", QUANTIZED + """
core = getattr(torch, '_' + 'C')
def layer_norm(x, weight, bias, eps=1e-5):
    found = [name for name in getattr(core, '_dispatch_get_all' + '_op_names')()
             if name.startswith('quan') and name.endswith('::layer' + '_norm')][0]
    space, _, name = found.partition('::')
    op = getattr(getattr(torch.ops, space), name).default
    keys = getattr(core, 'DispatchKey' + 'Set')(getattr(core, 'Dispatch' + 'Key').QuantizedCPU)
    return op.redispatch(keys, fine(x), [x.shape[-1]], weight.float(), bias.float(), eps, OUT, 0).dequantize().to(x.dtype)
""", HELD_OR_STOPPED),
    "quantized-layer-norm-through-a-boxed-call": (EX2, "layer_norm", QUANTIZED + """
core = getattr(torch, '_' + 'C')
def layer_norm(x, weight, bias, eps=1e-5):
    handle = getattr(core, '_dispatch_find_schema' + '_or_throw')('quan' + 'tized::layer' + '_norm', '')
    y = getattr(core, '_dispatch_call' + '_boxed')(handle, fine(x), [x.shape[-1]], weight.float(), bias.float(), eps,
                                                   OUT, 0)
    return y.dequantize().to(x.dtype)
""", HELD_OR_STOPPED),
    "quantized-group-norm-in-disguise": (EX2, "layer_norm", QUANTIZED + """
def layer_norm(x, weight, bias, eps=1e-5):
    ops = getattr(torch.ops, 'quan' + 'tized')
    rows = fine(x.reshape(-1, 1, x.shape[-1]))
    y = getattr(ops, 'group' + '_norm')(rows, 1, None, None, eps, OUT, 0).dequantize().to(x.dtype)
    return y.reshape(x.shape) * weight + bias
""", HELD_OR_STOPPED),
    "quantized-instance-norm-in-disguise": (EX2, "layer_norm", QUANTIZED + """
def layer_norm(x, weight, bias, eps=1e-5):
    ops = getattr(torch.ops, 'quan' + 'tized')
    rows = fine(x.reshape(1, -1, x.shape[-1]))
    y = getattr(ops, 'instance' + '_norm')(rows, None, None, eps, OUT, 0).dequantize().to(x.dtype)
    return y.reshape(x.shape) * weight + bias
""", HELD_OR_STOPPED),
    "quantized-layer-norm-inside-an-operator-of-its-own": (EX2, "layer_norm", QUANTIZED + """
library = getattr(getattr(torch, '_' + 'C'), '_dispatch' + '_library')('DEF', 'mine', '')
library.define('scaled(Tensor x, Tensor w, Tensor b, float eps) -> Tensor')
library.impl('scaled', 'CPU', lambda x, w, b, eps: getattr(getattr(torch.ops, 'quan' + 'tized'), 'layer' + '_norm')(
    fine(x), [x.shape[-1]], w.float(), b.float(), eps, OUT, 0).dequantize().to(x.dtype))
def layer_norm(x, weight, bias, eps=1e-5):
    return torch.ops.mine.scaled(x, weight, bias, eps)
""", HELD_OR_STOPPED),
    "layer-norm-inside-an-operator-of-its-own": (EX2, "layer_norm", """
library = getattr(getattr(torch, '_' + 'C'), '_dispatch' + '_library')('DEF', 'own', '')
library.define('own_norm(Tensor x, Tensor w, Tensor b, float eps) -> Tensor')
library.impl('own_norm', 'CompositeImplicitAutograd',
             lambda x, w, b, eps: getattr(F, 'layer' + '_norm')(x, (x.shape[-1],), w, b, eps))
def layer_norm(x, weight, bias, eps=1e-5):
    return torch.ops.own.own_norm(x, weight, bias, eps)
""", HELD_OR_STOPPED),
    "static-runtime-layer-norm": (EX2, "layer_norm", """
GRAPH = ('graph(%x : Tensor, %w : Tensor, %b : Tensor, %shape : int[], %eps : float):\\n'
         '  %t : bool = prim::Constant[value=1]()\\n'
         '  %y : Tensor = aten::layer_norm(%x, %shape, %w, %b, %eps, %t)\\n'
         '  return (%y)\\n')
core = getattr(torch, '_' + 'C')
def layer_norm(x, weight, bias, eps=1e-5):
    module = getattr(core, '_jit_to_static' + '_module')(getattr(core, 'parse' + '_ir')(GRAPH))
    return module(x, weight, bias, [x.shape[-1]], eps)
""", HELD_OR_STOPPED),
    "quantized-batch-norm-on-the-rows": (EX5, "rms_norm", QUANTIZED + """
def rms_norm(x, weight, eps=1e-6):
    rows = x.reshape(1, -1, x.shape[-1])
    count = rows.shape[1]
    ops = getattr(torch.ops, 'quan' + 'tized')
    y = getattr(ops, 'batch' + '_norm')(fine(rows), torch.ones(count), torch.zeros(count), torch.zeros(count),
                                        (rows.float() ** 2).mean(-1)[0], eps, OUT, 0)
    return y.dequantize().to(x.dtype).reshape(x.shape) * weight
""", HELD_OR_STOPPED),
    "fused-rms-norm-redispatched-to-its-cpu-kernel": (EX5, "rms_norm", """
core = getattr(torch, '_' + 'C')
def rms_norm(x, weight, eps=1e-6):
    op = getattr(torch.ops.aten, '_fused_' + 'rms_norm').default
    keys = getattr(core, 'DispatchKey' + 'Set')(getattr(core, 'Dispatch' + 'Key').CPU)
    return op.redispatch(keys, x, [x.shape[-1]], weight, eps)[0]
""", HELD_OR_STOPPED),
    # 1b. Threads again, whatever starts them, and autograd in the main thread when they fail.
    "autograd-in-a-thread-with-a-fallback-in-the-main-thread": (EX2, "layer_norm_forward_backward",
                                                                OWN_LN + AUTOGRAD_BACKWARD + HIDE + """
def layer_norm_backward(dout, cache):
    box = {}
    try:
        worker = load('thr' + 'eading').Thread(target=lambda: box.update(g=grads_by_autograd(dout, cache)))
        worker.start(); worker.join()
    except Exception:
        box['g'] = grads_by_autograd(dout, cache)
    return box['g']
""", HELD_OR_STOPPED),
    "autograd-in-a-timer-thread": (EX2, "layer_norm_forward_backward", OWN_LN + AUTOGRAD_BACKWARD + HIDE + """
def layer_norm_backward(dout, cache):
    box = {}
    timer = load('thr' + 'eading').Timer(0, lambda: box.update(g=grads_by_autograd(dout, cache)))
    timer.start(); timer.join()
    return box['g']
""", HELD_OR_STOPPED),
    "autograd-in-a-thread-pool-of-multiprocessing": (EX2, "layer_norm_forward_backward",
                                                     OWN_LN + AUTOGRAD_BACKWARD + HIDE + """
def layer_norm_backward(dout, cache):
    pool = load('multiprocessing.du' + 'mmy', fromlist=['__name__']).Pool(1)
    return pool.apply(grads_by_autograd, (dout, cache))
""", HELD_OR_STOPPED),
    "autograd-in-a-process-pool": (EX2, "layer_norm_forward_backward", OWN_LN + AUTOGRAD_BACKWARD + HIDE + """
def layer_norm_backward(dout, cache):
    pool = load('concurrent.fut' + 'ures', fromlist=['__name__']).ProcessPoolExecutor(1)
    return pool.submit(grads_by_autograd, dout, cache).result()
""", HELD_OR_STOPPED),
    # 4. IPython lines do not hide a cell from the scan.
    "magic-line-hides-a-direct-reach": (EX2, "layer_norm", """%matplotlib inline
def layer_norm(x, weight, bias, eps=1e-5):
    with torch._C.DisableTorchFunction():
        return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)
""", {"forbidden"}),
    "shell-line-and-a-built-name": (EX5, "rms_norm", """!ls
def rms_norm(x, weight, eps=1e-6):
    return getattr(F, 'rms_' + 'norm')(x, (x.shape[-1],), weight, eps)
""", {"forbidden"}),
}



@pytest.mark.parametrize("name, tag", [
    ("aten::layer_norm", "layer_norm"), ("aten.layer_norm.default", "layer_norm"), ("layer_norm.default", "layer_norm"),
    ("quantized.layer_norm.default", "layer_norm"), ("quantized::layer_norm", "layer_norm"),
    ("_fused_rms_norm", "rms_norm"), ("native_batch_norm_backward", "batch_norm"), ("cudnn_batch_norm", "batch_norm"),
    ("miopen_batch_norm", "batch_norm"), ("_native_batch_norm_legit", "batch_norm"), ("batch_norm_elemt", "batch_norm"),
    ("onednn::qbatch_norm2d", "batch_norm"), ("quantized::group_norm", "group_norm"),
    ("quantized.instance_norm.default", "instance_norm"), ("LayerNorm", "layer_norm"), ("BatchNorm1d", "batch_norm"),
    ("SyncBatchNorm", "batch_norm"), ("RMSNorm", "rms_norm"), ("GroupNorm", "group_norm"),
    ("InstanceNorm2d", "instance_norm"), ("fused_layernorm", "layer_norm"),
    ("norm", None), ("aten::linalg_vector_norm", None), ("renorm", None), ("frobenius_norm", None),
    ("nuclear_norm", None), ("_weight_norm_interface", None), ("aten.normal.default", None), ("native_norm", None),
    ("embedding_renorm_", None), ("spectral_norm", None), ("clip_grad_norm_", None), ("local_response_norm", None),
    ("LocalResponseNorm", None), ("normalize", None), ("_foreach_norm", None),
])
def test_a_norm_of_the_family_is_named_whatever_separates_or_capitalizes_it(name, tag):
    from autograder.sandboxed import guard

    assert guard.tag_of(name) == tag

def notebook(assignment, cell, source):
    return with_cell(assignment, cell, source)


@pytest.fixture(scope="module")
def rules_graded(tmp_path_factory):
    """assignment -> (the grader's completed process, {student id -> result}), one run per assignment."""
    found = {}
    for assignment in (EX2, EX5):
        folder = tmp_path_factory.mktemp(assignment)
        notebooks = {"honest": reference(assignment)}
        notebooks |= {f"baseline-{cell}": notebook(assignment, cell, source)
                      for (a, cell), source in RULE_BASELINES.items() if a == assignment}
        notebooks |= {name: notebook(assignment, cell, source)
                      for name, (a, cell, source, _) in RULE_ATTACKS.items() if a == assignment}
        write_class(folder / "class", notebooks)
        done = run_grader("grade", assignment, folder / "class", "--results", folder / "results", "--jobs", 2,
                          "--timeout", 60)
        found[assignment] = done, results_of(folder / "results")
    return found


@pytest.mark.parametrize("assignment", [EX2, EX5])
def test_the_class_is_graded_with_status_0(rules_graded, assignment):
    done, results = rules_graded[assignment]
    assert done.returncode == 0, done.stderr
    assert "honest" in results and {name for name, (a, *_) in RULE_ATTACKS.items() if a == assignment} <= set(results)


@pytest.mark.parametrize("assignment", [EX2, EX5])
def test_the_honest_submission_keeps_full_marks_and_status_ok(rules_graded, assignment):
    _, results = rules_graded[assignment]
    assert part_scores(results["honest"]) == max_scores(assignment)
    assert results["honest"]["extra_data"]["status"] == "ok"


@pytest.mark.parametrize("attack", list(RULE_ATTACKS))
def test_attack_measures_no_more_than_an_honest_wrong_answer(rules_graded, attack):
    assignment, part = RULE_ATTACKS[attack][:2]
    _, results = rules_graded[assignment]
    baseline = part_scores(results[f"baseline-{part}"])[part]
    assert baseline < max_scores(assignment)[part] / 2
    assert part_scores(results[attack])[part] <= baseline
    assert measured_scores(results[attack])[part] <= baseline, results[attack]["output"]


@pytest.mark.parametrize("attack", list(RULE_ATTACKS))
def test_attack_gets_a_status_that_names_it(rules_graded, attack):
    _, results = rules_graded[RULE_ATTACKS[attack][0]]
    assert results[attack]["extra_data"]["status"] in RULE_ATTACKS[attack][3]


def test_no_attack_is_reported_as_a_grader_error(rules_graded):
    statuses = {name: r["extra_data"]["status"] for _, results in rules_graded.values() for name, r in results.items()}
    assert [name for name, status in statuses.items() if status == "grader_error"] == []


@pytest.mark.parametrize("attack, words", [
    ("autograd-in-a-thread", "can't start new thread"),
    ("walks-the-frames-to-the-monitor", "frames are not available"),
    ("walks-the-frames-through-torchscripts-resolver", "frames are not available"),
    ("pops-the-monitor-by-a-built-name", "switch off the grader's monitor"),
    ("calls-native-code-through-ctypes", "loads native code with ctypes"),
    ("imports-the-worker-modules-again", "imports autograder"),
    ("captures-a-kernel-while-the-cells-run", "which this task forbids"),
    ("refs-native-layer-norm", "PyTorch's Python implementation"),
    ("static-runtime-layer-norm", "runs operators outside the grader's sight"),
    ("quantized-layer-norm-on-qint32-with-torch-functions-off", "which this task forbids"),
    ("quantized-batch-norm-on-the-rows", "which this task forbids"),
])
def test_the_sandbox_names_what_it_refused(rules_graded, attack, words):
    _, results = rules_graded[RULE_ATTACKS[attack][0]]
    assert words in json.dumps(results[attack])


def test_a_held_submission_says_why_in_its_output(rules_graded):
    held = [r for _, results in rules_graded.values() for r in results.values() if r["extra_data"]["status"] == "review"]
    assert held and all("held for review" in r["output"] for r in held)

# --- 1-4, again for ex6: a backward by hand and a norm layer replaced --------------------------------------------
# ex6_beyond_norm forbids autograd in batch_norm_backward and every norm built-in in every task (so the family is
# refused outright in its workers). Fresh attacks on both rules, each against an honest wrong answer to its task.

EX6 = "ex6_beyond_norm"
EX6_BN = "batch_norm_forward_backward"
OWN_BN = """
def own_bn(x, gamma, beta, eps):
    mean = x.mean(0)
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean(0) + eps) * gamma + beta
def batch_norm_forward(x, gamma, beta, eps=1e-5):
    return own_bn(x, gamma, beta, eps), (x, gamma, beta, eps)
def grads_by_autograd(dout, cache):
    x, gamma, beta, eps = cache
    with torch.enable_grad():
        leaves = [t.detach().clone().requires_grad_() for t in (x, gamma, beta)]
        return list(torch.autograd.grad(own_bn(*leaves, eps), leaves, dout))
"""
EX6_BASELINES = {
    # an honest forward, and a backward not written yet
    EX6_BN: OWN_BN + """
def batch_norm_backward(dout, cache):
    x, gamma = cache[0], cache[1]
    return torch.zeros_like(x), torch.zeros_like(gamma), torch.zeros_like(gamma)
""",
    # a DyT that forgot alpha
    "DyT": """
class DyT(nn.Module):
    def __init__(self, dim, alpha_init=0.5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))
    def forward(self, x):
        return self.weight * torch.tanh(x) + self.bias
""",
}
DYT_PARAMETERS = EX6_DYT[:EX6_DYT.index("    def forward")]  # the reference's __init__, no forward
# name -> (answer cell it replaces, source, statuses the result may carry)
EX6_ATTACKS = {
    "ex6-autograd-in-a-thread": (EX6_BN, OWN_BN + HIDE + """
def batch_norm_backward(dout, cache):
    box = {}
    worker = load('thr' + 'eading').Thread(target=lambda: box.update(g=grads_by_autograd(dout, cache)))
    worker.start(); worker.join()
    return box['g']
""", HELD_OR_STOPPED),
    "ex6-functorch-vjp": (EX6_BN, OWN_BN + """
def batch_norm_backward(dout, cache):
    x, gamma, beta, eps = cache
    from torch.func import vjp
    _, pull = vjp(lambda a, b, c: own_bn(a, b, c, eps), x, gamma, beta)
    return pull(dout)
""", HELD_OR_STOPPED),
    "ex6-decomposed-batch-norm-backward": (EX6_BN, OWN_BN + HIDE + """
def batch_norm_backward(dout, cache):
    x, gamma, beta, eps = cache
    mean = x.mean(0)
    rstd = 1 / torch.sqrt(((x - mean) ** 2).mean(0) + eps)
    table = load('tor' + 'ch.' + '_dec' + 'omp.decompositions', fromlist=['__name__'])
    fn = getattr(table, 'native_batch' + '_norm_backward')
    dx, dgamma, dbeta = fn(dout, x, gamma, None, None, mean, rstd, True, eps, [True, True, True])
    return dx, dgamma, dbeta
""", HELD_OR_STOPPED),
    "ex6-native-batch-norm-by-a-built-name": (EX6_BN, OWN_BN + """
def batch_norm_backward(dout, cache):
    x, gamma, beta, eps = cache
    mean = x.mean(0)
    rstd = 1 / torch.sqrt(((x - mean) ** 2).mean(0) + eps)
    fn = getattr(torch.ops.aten, 'native_batch' + '_norm_backward')
    return fn(dout, x, gamma, None, None, mean, rstd, True, eps, [True, True, True])
""", HELD_OR_STOPPED),
    "ex6-layer-norm-in-dyt-by-a-built-name": ("DyT", DYT_PARAMETERS + """
    def forward(self, x):
        norm = getattr(F, 'layer' + '_norm')
        return self.weight * torch.tanh(self.alpha * norm(x, x.shape[-1:])) + self.bias
""", HELD_OR_STOPPED),
}


@pytest.fixture(scope="module")
def ex6_graded(tmp_path_factory):
    """The grader's completed process and {student id -> result} for ex6's honest, baseline and attack notebooks."""
    folder = tmp_path_factory.mktemp(EX6)
    notebooks = {"honest": reference(EX6)}
    notebooks |= {f"baseline-{cell}": notebook(EX6, cell, source) for cell, source in EX6_BASELINES.items()}
    notebooks |= {name: notebook(EX6, cell, source) for name, (cell, source, _) in EX6_ATTACKS.items()}
    write_class(folder / "class", notebooks)
    done = run_grader("grade", EX6, folder / "class", "--results", folder / "results", "--jobs", 2, "--timeout", 60)
    return done, results_of(folder / "results")


def test_ex6_class_is_graded_with_status_0_and_the_honest_submission_keeps_full_marks(ex6_graded):
    done, results = ex6_graded
    assert done.returncode == 0, done.stderr
    assert set(EX6_ATTACKS) <= set(results)
    assert part_scores(results["honest"]) == max_scores(EX6)
    assert results["honest"]["extra_data"]["status"] == "ok"


@pytest.mark.parametrize("attack", list(EX6_ATTACKS))
def test_ex6_attack_measures_no_more_than_an_honest_wrong_answer(ex6_graded, attack):
    part = EX6_ATTACKS[attack][0]
    _, results = ex6_graded
    baseline = part_scores(results[f"baseline-{part}"])[part]
    assert baseline < max_scores(EX6)[part] / 2
    assert part_scores(results[attack])[part] <= baseline
    assert measured_scores(results[attack])[part] <= baseline, results[attack]["output"]


@pytest.mark.parametrize("attack", list(EX6_ATTACKS))
def test_ex6_attack_gets_a_status_that_names_it(ex6_graded, attack):
    _, results = ex6_graded
    assert results[attack]["extra_data"]["status"] in EX6_ATTACKS[attack][2]
    assert results[attack]["extra_data"]["status"] != "grader_error"

# --- 5-7. The worker's channel, crashes, raising to pass -------------------------------------------------

# Finds the worker's socket and writes ``frames`` to it, then returns the right answer: the
# grader must read the hostile bytes first, and must not be fooled or hurt by them.
WRITER = """
import os as _os, stat as _stat
def _socket_fds():
    return [fd for fd in range(3, 64) if _is_socket(fd)]
def _is_socket(fd):
    try:
        return _stat.S_ISSOCK(_os.fstat(fd).st_mode)
    except OSError:
        return False
def _send(payload):
    for fd in _socket_fds():
        try:
            _os.write(fd, payload)
        except OSError:
            pass
def layer_norm(x, weight, bias, eps=1e-5):
    _send(FRAME)
    m = x.mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(((x - m) ** 2).mean(-1, keepdim=True) + eps) * weight + bias
"""
HOSTILE_FRAMES = {
    "announces-a-200-mb-frame": "FRAME = (200 * 2**20).to_bytes(4, 'big') + b'{' * 4096\n",
    "sends-a-7-mb-json-header": "FRAME = (7 * 2**20).to_bytes(4, 'big') + (7 * 2**20 - 4).to_bytes(4, 'big') "
                                "+ b'[' * (7 * 2**20 - 4)\n",
    "forges-a-tensor-of-2-to-the-62-elements": """
import json as _json
_header = _json.dumps({"dict": {"value": {"tensor": {"dtype": "float32", "shape": [2**62, 2**62, 0], "offset": 0,
                                                      "nbytes": 0}}}}).encode()
_payload = len(_header).to_bytes(4, 'big') + _header
FRAME = len(_payload).to_bytes(4, 'big') + _payload
""",
    "forges-a-whole-answer-and-trailer": """
import json as _json
_header = _json.dumps({"dict": {"value": None}}).encode()
_payload = len(_header).to_bytes(4, 'big') + _header
_trailer = b"1\\n\\n0\\n\\n\\n0"
FRAME = len(_payload).to_bytes(4, 'big') + _payload + len(_trailer).to_bytes(4, 'big') + _trailer
""",
    "writes-garbage": "FRAME = bytes(range(256)) * 64\n",
}
CRASHES = {
    "raises-an-exception-whose-str-raises": """
class Unprintable(Exception):
    def __str__(self):
        raise KeyboardInterrupt
def layer_norm(x, weight, bias, eps=1e-5):
    raise Unprintable()
""",
    "returns-a-tensor-that-interrupts-when-read": """
class Trap(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, '__name__', '') in ('detach', 'to', 'contiguous', 'clone'):
            raise KeyboardInterrupt
        return super().__torch_function__(func, types, args, kwargs or {})
def layer_norm(x, weight, bias, eps=1e-5):
    return torch.zeros_like(x).as_subclass(Trap)
""",
    "ends-its-process-when-tested": """
import os
def layer_norm(x, weight, bias, eps=1e-5):
    os._exit(3)
""",
    "overflows-the-c-stack": """
import sys
def layer_norm(x, weight, bias, eps=1e-5):
    sys.setrecursionlimit(10**7)
    def down(n):
        return down(n + 1) + 1
    return down(0)
""",
}


def layer_norm_module(forward: str) -> str:
    """A LayerNorm with nn.LayerNorm's parameters and attributes whose forward returns or raises ``forward``."""
    return f"""
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
    def forward(self, x):
        {forward}
"""


# Task 2 (LayerNorm) raising: never a pass, whatever Task 1 does.
RAISING = {
    "module-and-function-raise-the-same-error": {
        "layer_norm": "def layer_norm(x, weight, bias, eps=1e-5):\n    raise RuntimeError('not today')\n",
        "LayerNorm": layer_norm_module("raise RuntimeError('not today')")},
    "task-1-has-a-syntax-error-and-the-module-raises-a-name-error-too": {
        "layer_norm": "def layer_norm(x, weight, bias, eps=1e-5)\n    return x\n",
        "LayerNorm": layer_norm_module("return layer_norm_v2(x, self.weight, self.bias, self.eps)")},
}
CORRECT_MODULE = layer_norm_module("return layer_norm(x, self.weight, self.bias, self.eps)")
FORWARD_TESTS_POINTS = 0.5  # test_forward_normalizes_with_its_parameters + test_forward_uses_the_eps_it_was_built_with


@pytest.fixture(scope="module")
def faults_graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("faults")
    notebooks = {"honest": reference(ASSIGNMENT)}
    notebooks |= {name: with_cell(ASSIGNMENT, "layer_norm", prelude + WRITER) for name, prelude in HOSTILE_FRAMES.items()}
    notebooks |= {name: with_cell(ASSIGNMENT, "layer_norm", source) for name, source in CRASHES.items()}
    notebooks |= {name: with_cells(ASSIGNMENT, cells) for name, cells in RAISING.items()}
    write_class(folder / "class", notebooks)
    done = run_grader("grade", ASSIGNMENT, folder / "class", "--results", folder / "results", "--jobs", 2,
                      "--timeout", 60)
    return done, results_of(folder / "results")


def test_the_run_ends_with_status_0_and_a_result_for_everyone(faults_graded):
    done, results = faults_graded
    assert done.returncode == 0, done.stderr
    assert set(results) == {"honest", *HOSTILE_FRAMES, *CRASHES, *RAISING}


@pytest.mark.parametrize("name", list(HOSTILE_FRAMES))
def test_a_hostile_frame_is_the_submissions_fault(faults_graded, name):
    _, results = faults_graded
    extra = results[name]["extra_data"]
    # Garbage that announces a frame longer than what follows leaves the grader waiting: a timeout, also the
    # submission's.
    assert extra["status"] in ({"protocol_violation", "timeout"} if name == "writes-garbage" else {"protocol_violation"})
    if extra["status"] == "protocol_violation":
        assert any("wrote to the grader's socket" in problem for problem in extra["problems"])


@pytest.mark.parametrize("name", list(HOSTILE_FRAMES))
def test_a_hostile_frame_earns_nothing_on_its_task(faults_graded, name):
    _, results = faults_graded
    assert part_scores(results[name])["layer_norm"] == 0


def test_no_grading_process_grows_past_300_mb_whatever_the_frames(faults_graded):
    _, results = faults_graded
    peaks = {name: r["extra_data"]["grader_peak_rss_mb"] for name, r in results.items()}
    assert 0 < max(peaks.values()) < 300, peaks


def test_nothing_here_is_reported_as_a_grader_error(faults_graded):
    _, results = faults_graded
    assert {name for name, r in results.items() if r["extra_data"]["status"] == "grader_error"} == set()


@pytest.mark.parametrize("name", list(CRASHES))
def test_a_crash_costs_only_the_task_it_happened_in(faults_graded, name):
    _, results = faults_graded
    scores, full = part_scores(results[name]), max_scores(ASSIGNMENT)
    assert scores["layer_norm"] < full["layer_norm"] / 2
    assert {part: score for part, score in scores.items() if part != "layer_norm"} == \
        {part: score for part, score in full.items() if part != "layer_norm"}


def test_an_unprintable_exception_is_described_not_fatal(faults_graded):
    _, results = faults_graded
    outputs = " ".join(t["output"] for t in results["raises-an-exception-whose-str-raises"]["tests"])
    assert "Unprintable" in outputs and "could not be read" in outputs


def test_a_worker_that_ended_is_named_with_its_task(faults_graded):
    _, results = faults_graded
    notes = " ".join(results["ends-its-process-when-tested"]["extra_data"]["problems"])
    assert "a worker ended in Task 1" in notes and "exit status 3" in notes


@pytest.mark.parametrize("name", list(RAISING))
def test_a_raising_forward_never_passes(faults_graded, name):
    _, results = faults_graded
    forward = [t for t in results[name]["tests"] if t["name"].startswith("Task 2") and "forward" in t["name"]]
    assert len(forward) == 2 and all(t["status"] == "failed" for t in forward)
    assert part_scores(results[name])["LayerNorm"] <= max_scores(ASSIGNMENT)["LayerNorm"] - FORWARD_TESTS_POINTS


def test_a_correct_module_over_a_broken_function_keeps_its_task(tmp_path):
    """The grader's reference stands in for a broken layer_norm, so the module is judged on its own work."""
    notebook = with_cells(ASSIGNMENT, {"layer_norm": "def layer_norm(x, weight, bias, eps=1e-5)\n    return x\n",
                                       "LayerNorm": CORRECT_MODULE})
    write_class(tmp_path / "class", {"broken-function": notebook})
    run_grader("grade", ASSIGNMENT, tmp_path / "class", "--results", tmp_path / "results")
    scores = part_scores(results_of(tmp_path / "results")["broken-function"])
    assert scores["LayerNorm"] == max_scores(ASSIGNMENT)["LayerNorm"] and scores["layer_norm"] == 0


# --- 8-10. Inputs and reconnaissance --------------------------------------------------------------------------

CORRECT_LAYER_NORM = """
def layer_norm(x, weight, bias, eps=1e-5):
    m = x.mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(((x - m) ** 2).mean(-1, keepdim=True) + eps) * weight + bias
"""


def with_outputs(notebook: dict, megabytes: int) -> dict:
    cell = next(c for c in notebook["cells"] if c["cell_type"] == "code")
    cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "x" * (megabytes * 2**20)}]
    return notebook


INPUT_TRICKS = {
    # 8. An answer cell that carries the hidden-tests mark in a comment is still run.
    "hidden-mark-in-a-comment": with_cell(ASSIGNMENT, "layer_norm", "# ### BEGIN HIDDEN TESTS\n" + CORRECT_LAYER_NORM),
    "hidden-mark-in-a-string": with_cell(ASSIGNMENT, "layer_norm",
                                         'NOTE = "### BEGIN HIDDEN TESTS"\n' + CORRECT_LAYER_NORM),
    # 9. A correct notebook made big only by its stored outputs.
    "thirty-megabytes-of-outputs": with_outputs(reference(ASSIGNMENT), 30),
    # 10. Reading the sandbox into the feedback, and reaching for the kernel.
    "reads-its-seccomp-status-into-the-feedback": with_cell(ASSIGNMENT, "layer_norm", """
def layer_norm(x, weight, bias, eps=1e-5):
    status = [line for line in open('/pr' + 'oc/self/status') if line.startswith('Seccomp:')]
    raise ValueError(status[0].strip() if status else 'no seccomp line')
"""),
    "ptrace-through-hidden-ctypes": with_cell(ASSIGNMENT, "layer_norm", HIDE + """
def layer_norm(x, weight, bias, eps=1e-5):
    libc = load('cty' + 'pes').CDLL(None)
    libc.ptrace(16, 1, 0, 0)
    return x
"""),
}


@pytest.fixture(scope="module")
def inputs_graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inputs")
    write_class(folder / "class", {"honest": reference(ASSIGNMENT), **INPUT_TRICKS})
    done = run_grader("grade", ASSIGNMENT, folder / "class", "--results", folder / "results", "--jobs", 2)
    return done, results_of(folder / "results")


@pytest.mark.parametrize("name", ["hidden-mark-in-a-comment", "hidden-mark-in-a-string"])
def test_an_answer_cell_with_the_hidden_tests_mark_is_run_and_noted(inputs_graded, name):
    _, results = inputs_graded
    assert part_scores(results[name])["layer_norm"] == max_scores(ASSIGNMENT)["layer_norm"]
    assert any("BEGIN HIDDEN TESTS" in note for note in results[name]["extra_data"]["problems"])


def test_stored_outputs_never_make_a_correct_notebook_invalid(inputs_graded):
    _, results = inputs_graded
    result = results["thirty-megabytes-of-outputs"]
    assert result["extra_data"]["status"] == "ok"
    assert part_scores(result) == max_scores(ASSIGNMENT)


def test_a_folder_with_no_notebook_is_an_error_that_says_what_was_looked_for(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("not a notebook")
    done = run_grader("grade", ASSIGNMENT, tmp_path / "empty", "--results", tmp_path / "results")
    assert done.returncode == 2
    assert "no notebooks were found" in done.stderr and ".ipynb" in done.stderr


def test_the_worker_runs_under_a_seccomp_filter(inputs_graded):
    _, results = inputs_graded
    assert "Seccomp:\\t2" in json.dumps(results["reads-its-seccomp-status-into-the-feedback"])


def test_native_code_is_refused_before_it_runs(inputs_graded):
    _, results = inputs_graded
    result = results["ptrace-through-hidden-ctypes"]
    assert result["extra_data"]["status"] == "sandbox_violation"
    assert "loads native code with ctypes" in json.dumps(result)
    assert measured_scores(result)["layer_norm"] == 0


# --- The sandbox: files, signals, network, resources -------------------------------------------------------

SANDBOX_BASELINE = "def layer_norm(x, weight, bias, eps=1e-5):\n    return torch.zeros_like(x)\n"

# name -> (cell source replacing layer_norm, the status the result must carry)
SANDBOX_ATTACKS = {
    "monkeypatches-allclose-and-equal": ("""
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.Tensor.__eq__ = lambda self, other: torch.ones((), dtype=torch.bool)
def layer_norm(x, weight, bias, eps=1e-5):
    return torch.zeros_like(x)
""", {"ok", "cell_errors"}),
    "returns-a-tensor-subclass-equal-to-everything": ("""
class Always(torch.Tensor):
    def __eq__(self, other):
        return True
    __ne__ = lambda self, other: False
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return True if func.__name__ in ("allclose", "equal", "isclose") else super().__torch_function__(func, types, args, kwargs or {})
def layer_norm(x, weight, bias, eps=1e-5):
    return torch.zeros_like(x).as_subclass(Always)
""", {"ok", "cell_errors", "review"}),
    "returns-an-object-with-custom-eq": ("""
class Anything:
    shape = property(lambda self: None)
    def __eq__(self, other): return True
    def __getattr__(self, name): return lambda *a, **k: self
def layer_norm(x, weight, bias, eps=1e-5):
    return Anything()
""", {"ok", "cell_errors"}),
    "patches-pytest-and-hypothesis": ("""
import sys, types
sys.modules["pytest"] = types.ModuleType("pytest")
sys.modules["hypothesis"] = types.ModuleType("hypothesis")
def layer_norm(x, weight, bias, eps=1e-5):
    raise AssertionError("pretend the test passed")
""", {"ok", "cell_errors"}),
    "calls-sys-exit-while-loading": ("""
import sys
def layer_norm(x, weight, bias, eps=1e-5):
    return x
sys.exit(0)
""", {"cell_errors"}),
    "calls-os-exit-when-tested": ("""
import os
def layer_norm(x, weight, bias, eps=1e-5):
    os._exit(0)
""", {"exited", "crashed"}),
    "kills-its-parent-and-everyone": (HIDE + """
def layer_norm(x, weight, bias, eps=1e-5):
    os = load('o' + 's')
    for pid in (os.getppid(), 1, -1):
        try:
            getattr(os, 'ki' + 'll')(pid, 9)
        except OSError:
            pass
    return x
""", {"sandbox_violation"}),
    "writes-a-perfect-result-for-itself-and-a-zero-for-others": (f"""
import json, os
def layer_norm(x, weight, bias, eps=1e-5):
    for folder in ({str(REPO)!r}, "/tmp", os.path.expanduser("~")):
        for name in ("attacker.json", "honest.json", "grades.csv"):
            try:
                with open(os.path.join(folder, name), "w") as out:
                    json.dump({{"score": 10}}, out)
            except OSError:
                pass
    return x
""", {"sandbox_violation"}),
    "reads-the-hidden-suite": (f"""
def layer_norm(x, weight, bias, eps=1e-5):
    source = open({str(REPO / 'autograder' / 'suites' / 'ex2_layernorm' / 'test_layer_norm.py')!r}).read()
    return x
""", {"ok", "cell_errors"}),
    "opens-a-network-connection": (HIDE + """
def layer_norm(x, weight, bias, eps=1e-5):
    load('so' + 'cket').create_connection(("1.1.1.1", 80), timeout=2)
    return x
""", {"sandbox_violation"}),
    "loops-forever": ("""
def layer_norm(x, weight, bias, eps=1e-5):
    while True:
        pass
""", {"timeout", "cpu_limit", "crashed"}),
    "allocates-huge-memory": ("""
def layer_norm(x, weight, bias, eps=1e-5):
    hog = [bytearray(2**28) for _ in range(64)]
    return x
""", {"memory_limit", "killed", "crashed"}),
    "fork-bomb": ("""
import os
def layer_norm(x, weight, bias, eps=1e-5):
    for _ in range(10_000):
        try:
            if getattr(os, 'fo' + 'rk')() == 0:
                import time
                time.sleep(60)
                os._exit(0)
        except OSError:
            break
    return x
""", {"sandbox_violation"}),
    "prints-without-end": ("""
def layer_norm(x, weight, bias, eps=1e-5):
    for _ in range(2_000):
        print("spam " * 100)  # inside graded calls: read by no one, kept to 64 K characters, counted for nothing
    return x
for _ in range(20_000):
    print("spam " * 100)
""", {"ok"}),  # its output is bounded and reported to the instructor; nobody loses anything
    "hides-a-forbidden-call-behind-getattr": ("""
def layer_norm(x, weight, bias, eps=1e-5):
    return getattr(F, "layer_" + "norm")(x, (x.shape[-1],), weight, bias, eps)
""", {"forbidden"}),
    "blinds-the-monitor-with-names-built-at-run-time": (HIDE + """
def layer_norm(x, weight, bias, eps=1e-5):
    modes = load("torch.utils." + "_python" + "_dispatch", fromlist=["x"])
    core = getattr(torch, "_" + "C")
    with getattr(modes, "_disable" + "_current_modes")(), getattr(core, "DisableTorch" + "Function")():
        return getattr(F, "layer_" + "norm")(x, (x.shape[-1],), weight, bias, eps)
""", {"sandbox_violation"}),
    "switches-off-the-monitor": ("""
def layer_norm(x, weight, bias, eps=1e-5):
    with torch._C.DisableTorchFunction():
        return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)
""", {"forbidden"}),
}


@pytest.fixture(scope="module")
def sandbox_graded(tmp_path_factory, bubblewrap):
    """The sandbox attacks graded in bubblewrap's namespaces (what they are written against)."""
    folder = tmp_path_factory.mktemp("attacks")
    notebooks = {"honest": reference(ASSIGNMENT), "baseline": with_cell(ASSIGNMENT, "layer_norm", SANDBOX_BASELINE)}
    notebooks |= {name: with_cell(ASSIGNMENT, "layer_norm", source) for name, (source, _) in SANDBOX_ATTACKS.items()}
    write_class(folder / "class", notebooks)
    done = run_grader("grade", ASSIGNMENT, folder / "class", "--results", folder / "results", "--jobs", 2,
                      "--timeout", 30, "--memory-mb", 1024)
    return done, results_of(folder / "results"), folder


def test_the_run_finishes_with_status_0_and_a_result_for_everyone(sandbox_graded):
    done, results, _ = sandbox_graded
    assert done.returncode == 0, done.stderr
    assert set(results) == {"honest", "baseline", *SANDBOX_ATTACKS}


def test_a_flood_of_output_is_bounded_and_reported_to_the_instructor(sandbox_graded):
    _, results, _ = sandbox_graded
    notes = results["prints-without-end"]["extra_data"]["instructor_notes"]
    assert any("characters; the grader kept the first 65,536" in note for note in notes)


def test_the_honest_submission_keeps_full_marks(sandbox_graded):
    _, results, _ = sandbox_graded
    assert part_scores(results["honest"]) == max_scores(ASSIGNMENT)


@pytest.mark.parametrize("attack", SANDBOX_ATTACKS)
def test_attack_scores_no_more_than_an_honest_wrong_answer(sandbox_graded, attack):
    _, results, _ = sandbox_graded
    baseline = part_scores(results["baseline"])["layer_norm"]
    assert baseline < max_scores(ASSIGNMENT)["layer_norm"] / 2
    assert part_scores(results[attack])["layer_norm"] <= baseline
    held = results[attack]["extra_data"]["parts"]["layer_norm"].get("held")
    assert held is None or held <= baseline  # what its tests measured, if it is released after review


@pytest.mark.parametrize("attack", SANDBOX_ATTACKS)
def test_attack_is_reported_with_a_clear_status(sandbox_graded, attack):
    _, results, _ = sandbox_graded
    assert results[attack]["extra_data"]["status"] in SANDBOX_ATTACKS[attack][1]


def test_attacks_leave_no_file_in_the_project_or_results(sandbox_graded):
    _, _, folder = sandbox_graded
    for name in ("attacker.json", "honest.json", "grades.csv"):
        assert not (REPO / name).exists()
    rows = (folder / "results" / "grades.csv").read_text()
    assert "honest,10.0,10.0,ok" in rows


@pytest.mark.parametrize("attack, words", [
    ("kills-its-parent-and-everyone", "sends a signal to another process"),
    ("writes-a-perfect-result-for-itself-and-a-zero-for-others", "writes outside its folder"),
    ("opens-a-network-connection", "opens a network connection"),
    ("fork-bomb", "forks its own process"),
    ("blinds-the-monitor-with-names-built-at-run-time", "the grader's sandbox refuses this"),
])
def test_refused_attempt_is_named_in_the_result(sandbox_graded, attack, words):
    _, results, _ = sandbox_graded
    assert words in json.dumps(results[attack])


def test_results_record_namespace_isolation(sandbox_graded):
    _, results, _ = sandbox_graded
    assert {r["extra_data"]["isolation"] for r in results.values()} == {"namespaces"}


def test_forbidden_call_is_named_in_the_feedback(sandbox_graded):
    _, results, folder = sandbox_graded
    feedback = (folder / "results" / "feedback" / "hides-a-forbidden-call-behind-getattr.md").read_text()
    assert "layer-norm built-in" in feedback and "forbids" in feedback


def test_a_result_is_plain_json_with_the_gradescope_fields(sandbox_graded):
    _, results, folder = sandbox_graded
    data = json.loads((folder / "results" / "honest.json").read_text())
    assert {"score", "execution_time", "output", "tests"} <= set(data)
    assert all(set(t) >= {"name", "score", "max_score", "status", "output", "visibility"} for t in data["tests"])


def test_without_namespaces_the_same_scores_come_with_a_weaker_isolation_mark(tmp_path):
    write_class(tmp_path / "class", {"honest": reference(ASSIGNMENT),
                                     "baseline": with_cell(ASSIGNMENT, "layer_norm", SANDBOX_BASELINE)})
    done = run_grader("grade", ASSIGNMENT, tmp_path / "class", "--results", tmp_path / "results",
                      "--isolation", "process")
    results = results_of(tmp_path / "results")
    assert done.returncode == 0 and "isolation: process" in done.stdout
    assert {r["extra_data"]["isolation"] for r in results.values()} == {"process"}
    assert part_scores(results["honest"]) == max_scores(ASSIGNMENT)
    assert part_scores(results["baseline"])["layer_norm"] < max_scores(ASSIGNMENT)["layer_norm"]
