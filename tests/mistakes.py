"""A catalogue of wrong implementations that learners really write.

Each entry replaces one task cell of an exercise with a plausible mistake. The
exercise's public self-check must reject it with a message that names the
problem (``hint``: a fragment of that message).
"""

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mistake:
    assignment: str
    task: str  # the grade_id of the solution cell it replaces
    what: str  # the mistake, in a few words (also the test id)
    source: str  # the wrong cell
    hint: str  # a fragment of the self-check's message
    # A fragment of the hidden suite's feedback that names the mistake (default: hint), or (fragment, *also): the
    # fragments naming other mistakes of the task that this one makes too (tests/test_catalogue_feedback.py).
    feedback: str | tuple[str, ...] = ""
    # The self-check it runs up to, when not the task's own: a mistake in task 1 seen from task 2's self-check
    # (which must say "fix task 1 first", not blame task 2's correct code).
    check: str = ""

    @property
    def self_check(self) -> str:
        return f"selfcheck_{self.check or self.task}"


@cache
def release_cell(assignment: str, grade_id: str) -> str:
    """The cell ``grade_id`` as the release hands it out: a task not written yet."""
    notebook = json.loads((ROOT / "exercises" / assignment / f"{assignment}.ipynb").read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id:
            return "".join(cell["source"])
    raise LookupError(f"{assignment} has no cell {grade_id}")


# The contract's submodules, which every block mistake below keeps.
BLOCK_INIT = """    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
"""


def block_cell(cls: str, forward: str) -> str:
    """A whole block class: the contract's __init__ and a (wrong) forward."""
    return f"\nclass {cls}(nn.Module):\n{BLOCK_INIT}{forward}"



def batch_norm_cell(update: str) -> str:
    """A whole batch_norm with PyTorch's normalization and a (wrong) running-statistics update."""
    return f"""
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    dims = [0] + list(range(2, x.dim()))
    shape = [1, -1] + [1] * (x.dim() - 2)
    if training:
        mean, var = x.mean(dims), x.var(dims, unbiased=False)
        with torch.no_grad():{update}    else:
        mean, var = running_mean, running_var
    return (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + eps) * weight.reshape(shape) + bias.reshape(shape)
"""

MISTAKES = [
    Mistake("ex1_residual", "ResidualBlock", "forgets-the-shortcut", '''
class ResidualBlock(nn.Module):
    def __init__(self, sublayer):
        super().__init__()
        self.sublayer = sublayer

    def forward(self, x):
        return self.sublayer(x)
''', "add the input x back"),
    Mistake("ex1_residual", "make_mlp", "shares-one-sublayer", '''
def make_mlp(depth, dim, residual):
    sublayer = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
    return nn.Sequential(*[ResidualBlock(sublayer) if residual else sublayer for _ in range(depth)])
''', "sharing a sublayer", feedback="some blocks share parameters"),
    Mistake("ex1_residual", "input_grad_norm", "marks-x-itself-as-requiring-grad", '''
def input_grad_norm(model, x):
    x.requires_grad_(True)
    model(x).sum().backward()
    return x.grad.norm().item()
''', "work on a detached copy",
        feedback=("x.requires_grad was False and is True", "added its gradients into the .grad")),
    Mistake("ex2_layernorm", "layer_norm", "unbiased-variance", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight + bias
''', "divide by D, not D - 1"),
    Mistake("ex2_layernorm", "layer_norm", "eps-outside-the-root", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / (x.std(-1, unbiased=False, keepdim=True) + eps) * weight + bias
''', "eps inside the square root", feedback="adds eps outside the square root"),
    Mistake("ex2_layernorm", "layer_norm", "wrong-axis", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(0)
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean(0) + eps) * weight + bias
''', "wrong axis", feedback="over dimension 0"),
    Mistake("ex2_layernorm", "LayerNorm", "ignores-eps", '''
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.eps = 1e-5
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)
''', "store the eps", feedback="self.eps is not the eps passed to LayerNorm"),
    Mistake("ex2_layernorm", "layer_norm_forward_backward", "backward-misses-the-statistics-terms", '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    inv_std = 1 / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + eps)
    x_hat = (x - mean) * inv_std
    return x_hat * weight + bias, (x_hat, inv_std, weight)


def layer_norm_backward(dout, cache):
    x_hat, inv_std, weight = cache
    d = x_hat.shape[-1]
    return dout * weight * inv_std, (dout * x_hat).reshape(-1, d).sum(0), dout.reshape(-1, d).sum(0)
''', "misses the terms"),
    Mistake("ex2_layernorm", "layer_norm_forward_backward", "backward-modifies-dout-in-place", '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    inv_std = 1 / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + eps)
    x_hat = (x - mean) * inv_std
    return x_hat * weight + bias, (x_hat, inv_std, weight)


def layer_norm_backward(dout, cache):
    x_hat, inv_std, weight = cache
    d = x_hat.shape[-1]
    dbias = dout.reshape(-1, d).sum(0)
    dweight = (dout * x_hat).reshape(-1, d).sum(0)
    g = dout.mul_(weight)
    dx = inv_std * (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True))
    return dx, dweight, dbias
''', "changed dout in place"),
    Mistake("ex3_batchnorm", "batch_norm", "running-var-biased", batch_norm_cell('''
            running_mean.mul_(1 - momentum).add_(momentum * mean)
            running_var.mul_(1 - momentum).add_(momentum * var)
'''), "uses the biased variance"),
    Mistake("ex3_batchnorm", "batch_norm", "momentum-reversed", batch_norm_cell('''
            running_mean.mul_(momentum).add_((1 - momentum) * mean)
            running_var.mul_(momentum).add_((1 - momentum) * x.var(dims))
'''), "running_mean is wrong", feedback="the momentum is reversed"),
    Mistake("ex3_batchnorm", "batch_norm", "eval-uses-batch-statistics", '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    dims = [0] + list(range(2, x.dim()))
    shape = [1, -1] + [1] * (x.dim() - 2)
    mean, var = x.mean(dims), x.var(dims, unbiased=False)
    if training:
        with torch.no_grad():
            running_mean.mul_(1 - momentum).add_(momentum * mean)
            running_var.mul_(1 - momentum).add_(momentum * x.var(dims))
    return (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + eps) * weight.reshape(shape) + bias.reshape(shape)
''', "normalize with the running statistics"),
    Mistake("ex3_batchnorm", "batch_norm", "normalizes-each-sample-like-layernorm", '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
''', "that is LayerNorm", feedback=("like LayerNorm", "did not change in training mode")),
    Mistake("ex4_prepost", "PostNormBlock", "norm-before-the-add", block_cell("PostNormBlock", '''
    def forward(self, x, attn_mask=None):
        x = x + self.norm1(self.attn(x, x, x, attn_mask=attn_mask, need_weights=False)[0])
        return x + self.norm2(self.ffn(x))
'''), "post-norm adds first"),
    Mistake("ex4_prepost", "PostNormBlock", "ignores-the-mask", block_cell("PostNormBlock", '''
    def forward(self, x, attn_mask=None):
        x = self.norm1(x + self.attn(x, x, x, need_weights=False)[0])
        return self.norm2(x + self.ffn(x))
'''), "attn_mask has no effect", feedback="it ignores attn_mask"),
    Mistake("ex4_prepost", "PreNormBlock", "normalizes-the-residual-stream", block_cell("PreNormBlock", '''
    def forward(self, x, attn_mask=None):
        x = self.norm1(x)
        x = x + self.attn(x, x, x, attn_mask=attn_mask, need_weights=False)[0]
        x = self.norm2(x)
        return x + self.ffn(x)
'''), "never normalizes the stream"),
    Mistake("ex4_prepost", "make_stack", "no-final-norm", '''
def make_stack(block_cls, depth, d_model, n_heads, d_ff):
    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(block_cls(d_model, n_heads, d_ff) for _ in range(depth))
            self.final_norm = nn.Identity()

        def forward(self, x, attn_mask=None):
            for block in self.blocks:
                x = block(x, attn_mask=attn_mask)
            return self.final_norm(x)

    return Stack()
''', "final_norm of a PreNormBlock stack", feedback="final_norm is always nn.Identity()"),
    Mistake("ex4_prepost", "ffn_grad_norms", "reads-accumulated-grad", '''
def ffn_grad_norms(stack, x, target):
    F.mse_loss(stack(x), target).backward()
    return [block.ffn[2].weight.grad.norm().item() for block in stack.blocks]
''', "gradients stored on the parameters leaked", feedback="it reads .grad after .backward()"),
    Mistake("ex5_rmsnorm", "rms_norm", "re-centres", '''
def rms_norm(x, weight, eps=1e-6):
    x = x - x.mean(-1, keepdim=True)
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
''', "RMSNorm does not re-centre",
        feedback=("RMSNorm does not re-centre", "it computes in torch.float16 itself")),
    Mistake("ex5_rmsnorm", "rms_norm", "sum-instead-of-mean", '''
def rms_norm(x, weight, eps=1e-6):
    return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps) * weight
''', "root of their MEAN", feedback=("root of their MEAN", "it computes in torch.float16 itself")),
    Mistake("ex5_rmsnorm", "rms_norm", "no-float32-upcast", '''
def rms_norm(x, weight, eps=1e-6):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
''', "compute the statistics in float32",
        feedback=("it computes in torch.float16 itself", "it computes in torch.bfloat16 itself")),
    Mistake("ex5_rmsnorm", "rms_norm", "returns-float32-for-half-input", '''
def rms_norm(x, weight, eps=1e-6):
    if x.dtype in (torch.float16, torch.bfloat16):
        x, weight = x.float(), weight.float()
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
''', "output, got torch.float32", feedback="gave a torch.float32 output"),
    Mistake("ex5_rmsnorm", "rms_norm", "computes-float64-in-float32", '''
def rms_norm(x, weight, eps=1e-6):
    y = x.float()
    y = y / torch.sqrt(y.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    return y if x.dtype == torch.float64 else y.to(x.dtype)
''', "a float64 input should give a float64 output",
        feedback=("has dtype torch.float32, expected torch.float64", "keep float64 in float64")),
    Mistake("ex5_rmsnorm", "RMSNorm", "eps-not-passed-on", '''
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return rms_norm(x, self.weight)
''', "is eps passed on", feedback="does not pass self.eps on"),
]

# ex6_beyond_norm: a correct forward/backward pair, and the two modules, each with one mistake.
EX6_BN = '''
def batch_norm_forward(x, gamma, beta, eps=1e-5):
    mean = x.mean(0)
    var = x.var(0, unbiased=False)
    inv_std = 1 / torch.sqrt(var + eps)
    x_hat = (x - mean) * inv_std
    out = x_hat * gamma + beta
    return out, (x_hat, inv_std, gamma)


def batch_norm_backward(dout, cache):
    x_hat, inv_std, gamma = cache
    dbeta = dout.sum(0)
    dgamma = (dout * x_hat).sum(0)
    g = dout * gamma
    dx = inv_std * (g - g.mean(0) - x_hat * (g * x_hat).mean(0))
    return dx, dgamma, dbeta
'''
EX6_REZERO = '''
class ReZeroBlock(nn.Module):
    def __init__(self, sublayer):
        super().__init__()
        self.sublayer = sublayer
        self.alpha = nn.Parameter(torch.zeros(()))

    def forward(self, x):
        return x + self.alpha * self.sublayer(x)
'''
EX6_DYT = '''
class DyT(nn.Module):
    def __init__(self, dim, alpha_init=0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        return self.weight * torch.tanh(self.alpha * x) + self.bias
'''


def changed(template: str, old: str, new: str) -> str:
    """``template`` with ``old`` (which occurs once) replaced by ``new``."""
    assert template.count(old) == 1, old
    return template.replace(old, new)


def ex6(task: str, what: str, template: str, old: str, new: str, hint: str, feedback: str = "") -> Mistake:
    """An ex6 mistake: ``template`` with ``old`` (which occurs once) replaced by ``new``."""
    return Mistake("ex6_beyond_norm", task, what, changed(template, old, new), hint, feedback)


BN6 = "batch_norm_forward_backward"
DX = "dx = inv_std * (g - g.mean(0) - x_hat * (g * x_hat).mean(0))"
MISTAKES += [
    ex6(BN6, "dx-misses-the-mean-term", EX6_BN, DX, "dx = inv_std * (g - x_hat * (g * x_hat).mean(0))",
        "from the mean depending on x"),
    ex6(BN6, "dx-misses-the-variance-term", EX6_BN, DX, "dx = inv_std * (g - g.mean(0))",
        "from the variance depending on x"),
    ex6(BN6, "dgamma-summed-over-the-features", EX6_BN, "dgamma = (dout * x_hat).sum(0)",
        "dgamma = (dout * x_hat).sum(1)", "sum over the batch, dimension 0"),
    ex6(BN6, "batch-variance-unbiased", EX6_BN, "var = x.var(0, unbiased=False)", "var = x.var(0)",
        "divide by N, not N - 1"),
    ex6(BN6, "batch-eps-outside-the-root", EX6_BN, "inv_std = 1 / torch.sqrt(var + eps)",
        "inv_std = 1 / (torch.sqrt(var) + eps)", "eps inside the square root",
        feedback="adds eps outside the square root"),
    ex6(BN6, "backward-modifies-dout-in-place", EX6_BN, "g = dout * gamma", "g = dout.mul_(gamma)",
        "changed dout in place"),
    ex6(BN6, "backward-by-autograd", EX6_BN, DX, """with torch.enable_grad():
        leaf = x_hat.detach().clone().requires_grad_()
        (dx,) = torch.autograd.grad(leaf * gamma, leaf, dout)""", "uses autograd"),
    ex6("ReZeroBlock", "rezero-alpha-starts-at-one", EX6_REZERO, "torch.zeros(())", "torch.ones(())",
        "alpha starts at zero", feedback="alpha does not start at zero"),
    ex6("ReZeroBlock", "rezero-alpha-is-a-vector", EX6_REZERO, "torch.zeros(())", "torch.zeros(1)",
        "one scalar for the whole block"),
    ex6("ReZeroBlock", "rezero-scales-x-instead-of-the-branch", EX6_REZERO, "x + self.alpha * self.sublayer(x)",
        "self.alpha * x + self.sublayer(x)", "alpha scales the branch", feedback="scales x instead of the branch"),
    ex6("DyT", "dyt-alpha-is-a-vector", EX6_DYT, "torch.tensor(float(alpha_init))",
        "torch.full((dim,), float(alpha_init))", "one scalar shared by every feature"),
    ex6("DyT", "dyt-weight-and-bias-are-scalars", EX6_DYT, "self.weight = nn.Parameter(torch.ones(dim))",
        "self.weight = nn.Parameter(torch.ones(()))", "one value per feature"),
    ex6("DyT", "dyt-normalizes-before-the-tanh", EX6_DYT, "torch.tanh(self.alpha * x)",
        "torch.tanh(self.alpha * (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, "
        "keepdim=True) + 1e-5))", "you normalize x before the tanh", feedback="it normalizes x before the tanh"),
]

# --- issue 25: ex1_residual, ex2_layernorm, ex3_batchnorm ---
# A task not written yet, a function that changes its input, a statistic that lost its dimension, one missing
# backward term, and a task-1 mistake seen from task 2's self-check ("fix task 1 first"). Blank tasks are the
# release's own cells; the hidden feedback says "not implemented yet" for them. It does not name a missing keepdim
# or reshape today: it quotes PyTorch's error, whose words on the suite's first input are those entries' phrase.
EX1_ADDS_INTO_X = '''
class ResidualBlock(nn.Module):
    def __init__(self, sublayer):
        super().__init__()
        self.sublayer = sublayer

    def forward(self, x):
        x += self.sublayer(x)
        return x
'''
EX2_CENTRES_X_IN_PLACE = '''
def layer_norm(x, weight, bias, eps=1e-5):
    x -= x.mean(-1, keepdim=True)
    return x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + eps) * weight + bias
'''
EX2_UNBIASED = MISTAKES[3].source  # ex2_layernorm's unbiased-variance
# Task 3's reference pair, as the hidden catalogue writes it, for entries that change one line of it.
from tests.catalogue.ex2_layernorm import (  # noqa: E402 (needs Mistake above)
    BACKWARD as EX2_BACKWARD, FORWARD as EX2_FORWARD, WRONG as EX2_WRONG)

EX2_DX = "dx = inv_std * (g - g.mean(dim=-1, keepdim=True) - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))"
EX3_RUNNING_VAR_BIASED = MISTAKES[9].source  # ex3_batchnorm's running-var-biased
from tests.catalogue.ex3_batchnorm import WRONG as EX3_WRONG  # noqa: E402 (needs Mistake above)



assert (MISTAKES[3].what, MISTAKES[9].what) == ("unbiased-variance", "running-var-biased")
NOT_WRITTEN = "not implemented yet"
MISTAKES += [
    Mistake("ex1_residual", "ResidualBlock", "ResidualBlock-not-written-yet",
            release_cell("ex1_residual", "ResidualBlock"), "task 1 is not written yet", NOT_WRITTEN),
    Mistake("ex1_residual", "ResidualBlock", "block-adds-into-x-in-place", EX1_ADDS_INTO_X,
            "ResidualBlock changed x in place", "changed x in place"),
    Mistake("ex1_residual", "ResidualBlock", "ResidualBlock-not-written-yet-seen-from-make_mlp",
            release_cell("ex1_residual", "ResidualBlock"), "fix task 1 first: task 1 is not written yet", NOT_WRITTEN,
            check="make_mlp"),
    Mistake("ex1_residual", "ResidualBlock", "block-adds-into-x-in-place-seen-from-make_mlp", EX1_ADDS_INTO_X,
            "fix task 1 first: ResidualBlock changed x in place", "changed x in place", check="make_mlp"),
    Mistake("ex1_residual", "make_mlp", "make_mlp-not-written-yet", release_cell("ex1_residual", "make_mlp"),
            "task 2 is not written yet", NOT_WRITTEN),
    Mistake("ex1_residual", "input_grad_norm", "input_grad_norm-not-written-yet",
            release_cell("ex1_residual", "input_grad_norm"), "task 3 is not written yet", NOT_WRITTEN),
    Mistake("ex2_layernorm", "layer_norm", "layer_norm-not-written-yet", release_cell("ex2_layernorm", "layer_norm"),
            "task 1 is not written yet", NOT_WRITTEN),
    Mistake("ex2_layernorm", "layer_norm", "centres-x-in-place", EX2_CENTRES_X_IN_PLACE,
            "layer_norm changed its input x in place", "changed x in place"),
    Mistake("ex2_layernorm", "layer_norm", "statistics-without-keepdim", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1)
    var = ((x - mean) ** 2).mean(-1)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
''', "take it with keepdim=True", "The size of tensor a (2) must match the size of tensor b (6)"),
    Mistake("ex2_layernorm", "layer_norm", "layer_norm-not-written-yet-seen-from-LayerNorm",
            release_cell("ex2_layernorm", "layer_norm"), "fix task 1 first: task 1 is not written yet", NOT_WRITTEN,
            check="LayerNorm"),
    Mistake("ex2_layernorm", "layer_norm", "centres-x-in-place-seen-from-LayerNorm", EX2_CENTRES_X_IN_PLACE,
            "fix task 1 first: layer_norm changed its input x in place", "changed x in place", check="LayerNorm"),
    Mistake("ex2_layernorm", "layer_norm", "unbiased-variance-seen-from-LayerNorm", EX2_UNBIASED,
            "fix task 1 first: your variance looks unbiased", "divide by D, not D - 1", check="LayerNorm"),
    Mistake("ex2_layernorm", "LayerNorm", "LayerNorm-not-written-yet", release_cell("ex2_layernorm", "LayerNorm"),
            "task 2 is not written yet", NOT_WRITTEN),
    Mistake("ex2_layernorm", "LayerNorm", "stores-eps-but-does-not-pass-it-on", next(
        wrong.source for wrong in EX2_WRONG if wrong.what == "eps-stored-but-not-passed-on"),
        "your module does not pass self.eps on to layer_norm", "does not pass self.eps on"),
    Mistake("ex2_layernorm", "layer_norm_forward_backward", "forward-backward-not-written-yet",
            release_cell("ex2_layernorm", "layer_norm_forward_backward"), "task 3 is not written yet", NOT_WRITTEN),
    Mistake("ex2_layernorm", "layer_norm_forward_backward", "forward-centres-x-in-place",
            changed(EX2_FORWARD, "x_hat = (x - mean) * inv_std", "x_hat = x.sub_(mean).mul_(inv_std)") + EX2_BACKWARD,
            "layer_norm_forward changed x in place", "changed x in place"),
    Mistake("ex2_layernorm", "layer_norm_forward_backward", "forward-variance-unbiased",
            changed(EX2_FORWARD, "((x - mean) ** 2).mean(dim=-1, keepdim=True)", "x.var(-1, keepdim=True)") + EX2_BACKWARD,
            "the forward output differs from F.layer_norm: your variance looks unbiased", "divide by D, not D - 1"),
    Mistake("ex2_layernorm", "layer_norm_forward_backward", "dx-misses-only-the-mean-term",
            EX2_FORWARD + changed(EX2_BACKWARD, EX2_DX,
                                  "dx = inv_std * (g - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))"),
            "dx misses the term from the mean", "misses the term from the mean"),
    Mistake("ex2_layernorm", "layer_norm_forward_backward", "dx-misses-only-the-variance-term",
            EX2_FORWARD + changed(EX2_BACKWARD, EX2_DX, "dx = inv_std * (g - g.mean(dim=-1, keepdim=True))"),
            "dx misses the term from the variance", "misses the term from the variance"),
    Mistake("ex2_layernorm", "layer_norm_forward_backward", "backward-row-mean-without-keepdim",
            EX2_FORWARD + changed(EX2_BACKWARD, EX2_DX,
                                  "dx = inv_std * (g - g.mean(-1) - x_hat * (g * x_hat).mean(-1))"),
            "take it with keepdim=True", "The size of tensor a (9) must match the size of tensor b (3)"),
    Mistake("ex3_batchnorm", "batch_norm", "batch_norm-not-written-yet", release_cell("ex3_batchnorm", "batch_norm"),
            "task 1 is not written yet", NOT_WRITTEN),
    Mistake("ex3_batchnorm", "batch_norm", "statistics-not-reshaped-for-3d-input", '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    dims = [0] + list(range(2, x.dim()))
    if training:
        mean, var = x.mean(dims), x.var(dims, unbiased=False)
        with torch.no_grad():
            running_mean.mul_(1 - momentum).add_(momentum * mean)
            running_var.mul_(1 - momentum).add_(momentum * x.var(dims))
    else:
        mean, var = running_mean, running_var
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
''', "reshape it to (1, C, 1)",
        feedback=("The size of tensor a (7) must match the size of tensor b (2)", "over N and L for (N, C, L) inputs")),
    Mistake("ex3_batchnorm", "batch_norm", "batch_norm-not-written-yet-seen-from-BatchNorm1d",
            release_cell("ex3_batchnorm", "batch_norm"), "fix task 1 first: task 1 is not written yet", NOT_WRITTEN,
            check="BatchNorm1d"),
    Mistake("ex3_batchnorm", "batch_norm", "running-var-biased-seen-from-BatchNorm1d", EX3_RUNNING_VAR_BIASED,
            "fix task 1 first: running_var uses the biased variance", "uses the biased variance", check="BatchNorm1d"),
    Mistake("ex3_batchnorm", "BatchNorm1d", "BatchNorm1d-not-written-yet", release_cell("ex3_batchnorm", "BatchNorm1d"),
            "task 2 is not written yet", NOT_WRITTEN),
    Mistake("ex3_batchnorm", "BatchNorm1d", "module-does-not-pass-its-momentum-on", next(
        wrong.source for wrong in EX3_WRONG if wrong.what == "module-ignores-its-momentum"),
        "is momentum passed to batch_norm?", "not the momentum it was built with"),
]

# --- issue 25: ex4_prepost, ex5_rmsnorm, ex6_beyond_norm ---
# Some entries reuse a wrong cell that the hidden suite's catalogue already grades (tests/catalogue), seen here by
# the self-checks: tests.catalogue.catalogue() grades each wrong cell once.

from tests.catalogue.ex5_rmsnorm import WRONG as EX5_WRONG, rms_norm_with  # noqa: E402 (needs Mistake above)

EX5 = "ex5_rmsnorm"
EX5_WRONG_SOURCE = {wrong.what: wrong.source for wrong in EX5_WRONG}
MISTAKES += [
    Mistake(EX5, "rms_norm", "mean-square-without-keepdim", rms_norm_with("xc / torch.sqrt(xc.pow(2).mean(-1) + eps)"),
            "take it with keepdim=True", feedback="must match the size of tensor b"),
    Mistake(EX5, "rms_norm", "mean-square-over-dim-1", EX5_WRONG_SOURCE["mean-square-over-dim-1-only-right-for-2-d"],
            "over dimension 1", feedback="over dimension 1"),
    Mistake(EX5, "rms_norm", "bfloat16-computed-in-bfloat16", EX5_WRONG_SOURCE["upcasts-float16-but-not-bfloat16"],
            "you compute in torch.bfloat16 itself", feedback="it computes in torch.bfloat16 itself"),
    Mistake(EX5, "rms_norm", "half-normalized-with-float32-statistics",
            EX5_WRONG_SOURCE["statistics-in-float32-normalization-in-half"], "only the statistics are in float32",
            feedback=("only the statistics are in float32", "keep float64 in float64")),
    Mistake(EX5, "rms_norm", "float64-computed-in-float32-like-llama", '''
def rms_norm(x, weight, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * weight
''', "keep float64 in float64", feedback="keep float64 in float64"),
    Mistake(EX5, "rms_norm", "eps-outside-the-root-seen-from-the-module", EX5_WRONG_SOURCE["eps-outside-the-root"],
            "fix task 1 first: the eps argument is ignored, or is not inside the square root",
            feedback="adds eps outside the square root", check="RMSNorm"),
]

EX6 = "ex6_beyond_norm"
MISTAKES += [
    ex6(BN6, "dx-misses-the-direct-term", EX6_BN, DX, "dx = inv_std * (-g.mean(0) - x_hat * (g * x_hat).mean(0))",
        "dx misses the direct term"),
    ex6(BN6, "dx-has-only-the-direct-term", EX6_BN, DX, "dx = inv_std * g",
        "misses both terms that come from the mean and the variance",
        feedback="misses both terms that come from the statistics"),
]

EX4 = "ex4_prepost"
NO_FINAL_NORM = next(m for m in MISTAKES if m.assignment == EX4 and m.what == "no-final-norm")
NORMALIZED_STREAM = next(m for m in MISTAKES if m.assignment == EX4 and m.what == "normalizes-the-residual-stream")
MISTAKES += [
    Mistake(EX4, "PostNormBlock", "post-norm-adds-the-attention-in-place", block_cell("PostNormBlock", '''
    def forward(self, x, attn_mask=None):
        x += self.attn(x, x, x, attn_mask=attn_mask, need_weights=False)[0]
        x = self.norm1(x)
        return self.norm2(x + self.ffn(x))
'''), "PostNormBlock changed x in place", feedback="changed x in place"),
    Mistake(EX4, "PreNormBlock", "normalized-stream-seen-from-the-stack", NORMALIZED_STREAM.source,
            "fix task 2 first: the output has the spread of a normalized tensor", feedback=NORMALIZED_STREAM.hint,
            check="make_stack"),
    Mistake(EX4, "make_stack", "no-final-norm-seen-from-the-gradients", NO_FINAL_NORM.source,
            "fix task 3 first: final_norm of a PreNormBlock stack", feedback=NO_FINAL_NORM.feedback,
            check="ffn_grad_norms"),
]

# A task not written yet (the release's cell), seen from its own self-check or a later one.
MISTAKES += [
    Mistake(assignment, task, f"{task}-not-written-yet{'-seen-from-' + check if check else ''}",
            release_cell(assignment, task), hint, feedback="not implemented yet", check=check)
    for assignment, task, check, hint in [
        (EX4, "PostNormBlock", "", "task 1 is not written yet"),
        (EX4, "PreNormBlock", "", "task 2 is not written yet"),
        (EX4, "make_stack", "", "task 3 is not written yet"),
        (EX4, "ffn_grad_norms", "", "task 4 is not written yet"),
        (EX4, "PreNormBlock", "make_stack", "fix task 2 first: task 2 is not written yet"),
        (EX5, "rms_norm", "", "task 1 is not written yet"),
        (EX5, "RMSNorm", "", "task 2 is not written yet"),
        (EX5, "rms_norm", "RMSNorm", "fix task 1 first: task 1 is not written yet"),
        (EX6, BN6, "", "task 1 is not written yet"),
        (EX6, "ReZeroBlock", "", "task 2 is not written yet"),
        (EX6, "DyT", "", "task 3 is not written yet"),
    ]
]
