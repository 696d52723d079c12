"""Honest submissions, one per entry: each must keep full marks, status ``ok`` and no note.

Every entry answers one exercise in a style that real code uses, adapted to the exercise
contract (names, signatures, dtypes, in-place rules). ``style`` names the style and where it
is from; the style is a fact, the code here was written for this corpus. Entries marked
``student`` are written as learners write notebooks: they print tensors (inside graded
functions too), inspect signatures, loop over attribute names, run magics and shell lines,
compare with the built-in in a cell of their own and check their gradients with autograd.

``Honest.notebook()`` is the reference notebook with the answer cells replaced and the extra
cells inserted right after the answer cell they follow, as a learner adds cells while working.
``tests/test_honest_corpus.py`` grades them all in the sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.grading import with_cells

ASSIGNMENTS = ("ex1_residual", "ex2_layernorm", "ex3_batchnorm", "ex4_prepost", "ex5_rmsnorm", "ex6_beyond_norm")


@dataclass(frozen=True)
class Honest:
    name: str
    assignment: str
    style: str  # the style followed and where it comes from
    answers: dict[str, str]  # grade_id of an answer cell -> its source
    extra: tuple[tuple[str, str], ...] = ()  # (grade_id of the answer cell it follows, code cell source)
    student: bool = False  # written as a learner debugs: prints, inspects, magics, checks by hand

    def notebook(self) -> dict:
        notebook = with_cells(self.assignment, {cell: source.strip("\n") for cell, source in self.answers.items()})
        cells = notebook["cells"]
        for after in dict.fromkeys(after for after, _ in self.extra):
            at = next(i for i, cell in enumerate(cells)
                      if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == after)
            cells[at + 1:at + 1] = [code_cell(f"extra-{after}-{n}", source)
                                    for n, source in enumerate(s for a, s in self.extra if a == after)]
        return notebook


def code_cell(cell_id: str, source: str) -> dict:
    """A code cell as Jupyter saves it (nbformat 4.5: every cell has an id)."""
    return {"cell_type": "code", "execution_count": None, "id": cell_id, "metadata": {}, "outputs": [],
            "source": source.strip("\n")}


# --- ex1_residual: ResidualBlock, make_mlp, input_grad_norm ------------------------------------------------

EX1 = "ex1_residual"

EX1_TORCHVISION = Honest("ex1-torchvision-basicblock", EX1,
    "torchvision's ResNet BasicBlock: keep `identity = x`, run the branch into `out`, add the shortcut; "
    "nn.ReLU(inplace=True) inside the branch (github.com/pytorch/vision, torchvision/models/resnet.py)",
    {"ResidualBlock": '''
class ResidualBlock(nn.Module):
    expansion = 1

    def __init__(self, sublayer: nn.Module):
        super().__init__()
        self.sublayer = sublayer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.sublayer(x)
        out = out + identity
        return out
''', "make_mlp": '''
def make_mlp(depth: int, dim: int, residual: bool) -> nn.Sequential:
    layers = []
    for _ in range(depth):
        branch = nn.Sequential(
            nn.Linear(dim, dim),
            nn.ReLU(inplace=True),
            nn.Linear(dim, dim),
        )
        layers.append(ResidualBlock(branch) if residual else branch)
    return nn.Sequential(*layers)
''', "input_grad_norm": '''
def input_grad_norm(model: nn.Module, x: torch.Tensor) -> float:
    inputs = x.detach().requires_grad_(True)
    outputs = model(inputs)
    (grad,) = torch.autograd.grad(outputs=outputs.sum(), inputs=inputs)
    return grad.flatten().norm(p=2).item()
'''})

EX1_D2L = Honest("ex1-d2l-residual", EX1,
    "d2l.ai's Residual class (chapter 'Residual Networks'): X in, Y = the branch, return Y + X; the net built "
    "with net.add_module in a loop (d2l.ai/chapter_convolutional-modern/resnet.html)",
    {"ResidualBlock": '''
class ResidualBlock(nn.Module):  #@save
    """The residual block: the branch's output plus its input."""

    def __init__(self, sublayer):
        super().__init__()
        self.sublayer = sublayer

    def forward(self, X):
        Y = self.sublayer(X)
        return Y + X
''', "make_mlp": '''
def make_mlp(depth, dim, residual):
    net = nn.Sequential()
    for i in range(depth):
        blk = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
        if residual:
            blk = ResidualBlock(blk)
        net.add_module(f"block{i}", blk)
    return net
''', "input_grad_norm": '''
def input_grad_norm(model, x):
    X = x.clone().detach()
    X.requires_grad_(True)
    Y = model(X).sum()
    dX = torch.autograd.grad(Y, X)[0]
    return float(torch.linalg.vector_norm(dX))
'''})

EX1_ORDEREDDICT = Honest("ex1-pytorch-docs-ordereddict", EX1,
    "PyTorch docs' nn.Sequential example with an OrderedDict of named modules (pytorch.org/docs, "
    "torch.nn.Sequential); old-style super(ResidualBlock, self) as in the 60-minute blitz tutorials",
    {"ResidualBlock": '''
class ResidualBlock(nn.Module):
    def __init__(self, sublayer):
        super(ResidualBlock, self).__init__()
        self.sublayer = sublayer

    def forward(self, x):
        return torch.add(x, self.sublayer(x))
''', "make_mlp": '''
from collections import OrderedDict


def make_mlp(depth, dim, residual):
    blocks = OrderedDict()
    for i in range(depth):
        sublayer = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
        blocks[f"block{i + 1}"] = ResidualBlock(sublayer) if residual else sublayer
    return nn.Sequential(blocks)
''', "input_grad_norm": '''
def input_grad_norm(model, x):
    x_copy = x.detach().clone()
    x_copy.requires_grad = True
    y = model(x_copy)
    grad, = torch.autograd.grad(y.sum(), [x_copy])
    return torch.sqrt((grad ** 2).sum()).item()
'''})

EX1_STUDENT_PRINTS = Honest("ex1-student-prints-and-magics", EX1,
    "student notebook: prints shapes and tensors inside forward and inside input_grad_norm, %timeit and "
    "!nvidia-smi lines, a cell that checks the gradient with .backward() on a fresh tensor",
    {"ResidualBlock": '''
class ResidualBlock(nn.Module):
    def __init__(self, sublayer: nn.Module):
        super().__init__()
        self.sublayer = sublayer
        print("built a residual block around", sublayer)

    def forward(self, x):
        fx = self.sublayer(x)
        print("x:", x.shape, "F(x):", fx.shape)
        print(f"first values of F(x): {fx.flatten()[:3]}")
        return x + fx
''', "make_mlp": '''
def make_mlp(depth: int, dim: int, residual: bool) -> nn.Sequential:
    blocks = [nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim)) for _ in range(depth)]
    if residual:
        blocks = [ResidualBlock(b) for b in blocks]
    model = nn.Sequential(*blocks)
    print(model)
    return model
''', "input_grad_norm": '''
def input_grad_norm(model: nn.Module, x: torch.Tensor) -> float:
    xg = x.detach().clone().requires_grad_(True)
    out = model(xg).sum()
    print("output sum:", out)
    g = torch.autograd.grad(out, xg)[0]
    print(f"gradient {g} with norm {g.norm():.4f}")
    return g.norm().item()
'''},
    extra=(("ResidualBlock", '''
%matplotlib inline
!nvidia-smi
blk = ResidualBlock(nn.Linear(4, 4))
t = torch.randn(2, 4)
print(t)
print(blk(t))
%timeit blk(t)
'''), ("input_grad_norm", '''
# my own check: the same gradient with .backward()
torch.manual_seed(0)
m = make_mlp(3, 4, residual=True)
xb = torch.randn(5, 4, requires_grad=True)
m(xb).sum().backward()
print("backward says", xb.grad.norm().item(), "mine says", input_grad_norm(m, xb.detach()))
assert abs(xb.grad.norm().item() - input_grad_norm(m, xb.detach())) < 1e-4
''')), student=True)

EX1_STUDENT_INSPECT = Honest("ex1-student-inspect-and-names", EX1,
    "student notebook: import inspect to print a signature, a local variable named signal (the forward "
    "signal) and one named socket, a helper function in an extra cell, time.perf_counter timing",
    {"ResidualBlock": '''
class ResidualBlock(nn.Module):
    def __init__(self, sublayer):
        super().__init__()
        self.sublayer = sublayer

    def forward(self, x):
        signal = self.sublayer(x)  # what the branch adds to the stream
        return x + signal
''', "make_mlp": '''
def make_mlp(depth, dim, residual):
    return nn.Sequential(*[wrap(branch(dim), residual) for _ in range(depth)])
''', "input_grad_norm": '''
def input_grad_norm(model, x):
    socket = x.detach().clone().requires_grad_()  # where the gradient plugs in
    signal = model(socket).sum()
    (g,) = torch.autograd.grad(signal, socket)
    return g.norm().item()
'''},
    extra=(("ResidualBlock", '''
import inspect

print(inspect.signature(ResidualBlock.__init__))
print(inspect.signature(ResidualBlock.forward))
'''), ("ResidualBlock", '''
# helpers for make_mlp
def branch(dim: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))


def wrap(block: nn.Module, residual: bool) -> nn.Module:
    return ResidualBlock(block) if residual else block
'''), ("input_grad_norm", '''
import time

start = time.perf_counter()
for depth in (1, 10, 50):
    print(depth, input_grad_norm(make_mlp(depth, 32, True), torch.randn(8, 32)))
print(f"took {time.perf_counter() - start:.2f} s")
''')), student=True)


EX1_SEQUENTIAL_SUBCLASS = Honest("ex1-torchvision-mlp-sequential-subclass", EX1,
    "torchvision's MLP, a subclass of nn.Sequential that builds its layers in __init__ and hands them to "
    "super().__init__(*layers) (github.com/pytorch/vision, torchvision/ops/misc.py); "
    "from __future__ import annotations with type hints everywhere, as torchvision's own modules write them",
    {"ResidualBlock": '''
from __future__ import annotations


class ResidualBlock(nn.Module):
    def __init__(self, sublayer: nn.Module) -> None:
        super().__init__()
        self.sublayer = sublayer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.sublayer(x)
''', "make_mlp": '''
class ResidualMLP(nn.Sequential):
    """depth blocks of Linear -> ReLU -> Linear, each wrapped in a ResidualBlock when residual is set."""

    def __init__(self, depth: int, dim: int, residual: bool = True) -> None:
        layers: list[nn.Module] = []
        for _ in range(depth):
            branch = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
            layers.append(ResidualBlock(branch) if residual else branch)
        super().__init__(*layers)
        self.depth, self.dim, self.residual = depth, dim, residual

    def extra_repr(self) -> str:
        return f"depth={self.depth}, dim={self.dim}, residual={self.residual}"


def make_mlp(depth: int, dim: int, residual: bool) -> nn.Sequential:
    return ResidualMLP(depth, dim, residual)
''', "input_grad_norm": '''
def input_grad_norm(model: nn.Module, x: torch.Tensor) -> float:
    x = x.detach().requires_grad_()
    (dx,) = torch.autograd.grad(model(x).sum(), (x,))
    return float(dx.norm())
'''})

EX1_CASTED_LINEAR = Honest("ex1-casted-linear-and-config-dataclass", EX1,
    "modded-nanogpt's CastedLinear, a subclass of nn.Linear whose forward casts the weight to the input's "
    "dtype (github.com/KellerJordan/modded-nanogpt, train_gpt.py), with nn.Linear's own initialization "
    "kept; the sizes in a config dataclass as nanoGPT's GPTConfig holds them (github.com/karpathy/nanoGPT, "
    "model.py)",
    {"ResidualBlock": '''
class ResidualBlock(nn.Module):
    def __init__(self, sublayer):
        super().__init__()
        self.sublayer = sublayer

    def forward(self, x):
        return x + self.sublayer(x)
''', "make_mlp": '''
from dataclasses import dataclass


@dataclass
class MLPConfig:
    depth: int = 4
    dim: int = 64
    residual: bool = True


class CastedLinear(nn.Linear):
    """nn.Linear whose parameters take the input's dtype when they are used."""

    def forward(self, x):
        bias = None if self.bias is None else self.bias.type_as(x)
        return F.linear(x, self.weight.type_as(x), bias)


def sublayer(config: MLPConfig) -> nn.Sequential:
    return nn.Sequential(CastedLinear(config.dim, config.dim), nn.ReLU(), CastedLinear(config.dim, config.dim))


def make_mlp(depth, dim, residual):
    config = MLPConfig(depth=depth, dim=dim, residual=residual)
    blocks = []
    for _ in range(config.depth):
        block = sublayer(config)
        blocks.append(ResidualBlock(block) if config.residual else block)
    return nn.Sequential(*blocks)
''', "input_grad_norm": '''
def input_grad_norm(model, x):
    leaf = x.detach().clone().requires_grad_(True)
    grad = torch.autograd.grad(model(leaf).sum(), leaf)[0]
    return grad.pow(2).sum().sqrt().item()
'''})


# --- ex2_layernorm: layer_norm, LayerNorm, layer_norm_forward / layer_norm_backward ------------------------

EX2 = "ex2_layernorm"

EX2_MODULE = '''
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape: int, eps: float = 1e-5):
        super().__init__()
        self.normalized_shape = (normalized_shape,)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"
'''

EX2_CS231N = Honest("ex2-cs231n-cache-tuple", EX2,
    "CS231n assignment 2 layernorm_forward/layernorm_backward: sample_mean, sample_var, x_norm, a cache tuple, "
    "and the compact backward of batchnorm_backward_alt taken over the feature axis (cs231n.github.io)",
    {"layer_norm": '''
def layer_norm(x, weight, bias, eps=1e-5):
    mu = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, unbiased=False, keepdim=True)
    x_hat = (x - mu) / torch.sqrt(var + eps)
    return weight * x_hat + bias
''', "LayerNorm": EX2_MODULE, "layer_norm_forward_backward": '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    """
    Inputs:
    - x: data of shape (N, D), or (..., D)
    - weight, bias: scale and shift of shape (D,)
    Returns a tuple of:
    - out: of shape like x
    - cache: what the backward pass needs
    """
    gamma, beta = weight, bias
    sample_mean = x.mean(dim=-1, keepdim=True)
    sample_var = x.var(dim=-1, unbiased=False, keepdim=True)
    std = torch.sqrt(sample_var + eps)
    x_norm = (x - sample_mean) / std
    out = gamma * x_norm + beta
    cache = (x_norm, std, gamma)
    return out, cache


def layer_norm_backward(dout, cache):
    """
    Inputs:
    - dout: upstream derivatives, like x
    - cache: from layer_norm_forward
    Returns a tuple of (dx, dgamma, dbeta).
    """
    x_norm, std, gamma = cache
    D = dout.shape[-1]
    leading = tuple(range(dout.dim() - 1))
    dbeta = dout.sum(dim=leading)
    dgamma = (dout * x_norm).sum(dim=leading)
    dx_norm = dout * gamma
    dx = (1.0 / D) / std * (D * dx_norm - dx_norm.sum(dim=-1, keepdim=True)
                            - x_norm * (dx_norm * x_norm).sum(dim=-1, keepdim=True))
    return dx, dgamma, dbeta
'''})

EX2_STAGED = Honest("ex2-staged-computational-graph", EX2,
    "the step-by-step computational graph of Kratzert's 'Understanding the backward pass through Batch "
    "Normalization Layer' (mu, xmu, sq, var, sqrtvar, ivar, xhat; backward steps 9 to 0, "
    "kratzert.github.io, 2016) over the feature axis; the module built like torch.nn.LayerNorm itself "
    "(empty parameters, then reset_parameters with init.ones_/init.zeros_)",
    {"layer_norm": '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = (x - mean).pow(2).mean(-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + eps) * weight + bias
''', "LayerNorm": '''
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape: int, eps: float = 1e-5):
        super().__init__()
        self.normalized_shape = (normalized_shape,)
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(self.normalized_shape))
        self.bias = nn.Parameter(torch.empty(self.normalized_shape))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)
        nn.init.zeros_(self.bias)

    def forward(self, input):
        return layer_norm(input, self.weight, self.bias, self.eps)
''', "layer_norm_forward_backward": '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    D = x.shape[-1]
    mu = x.sum(dim=-1, keepdim=True) / D           # step 1: the mean of each row
    xmu = x - mu                                    # step 2: centre
    sq = xmu ** 2                                   # step 3: square
    var = sq.sum(dim=-1, keepdim=True) / D          # step 4: biased variance
    sqrtvar = torch.sqrt(var + eps)                 # step 5: eps inside the root
    ivar = 1.0 / sqrtvar                            # step 6: invert
    xhat = xmu * ivar                               # step 7: normalize
    gammax = weight * xhat                          # step 8: scale
    out = gammax + bias                             # step 9: shift
    cache = (xhat, weight, xmu, ivar, sqrtvar, var, eps)
    return out, cache


def layer_norm_backward(dout, cache):
    xhat, gamma, xmu, ivar, sqrtvar, var, eps = cache
    D = dout.shape[-1]
    # step 9
    dbeta = dout.reshape(-1, D).sum(dim=0)
    dgammax = dout
    # step 8
    dgamma = (dgammax * xhat).reshape(-1, D).sum(dim=0)
    dxhat = dgammax * gamma
    # step 7
    divar = (dxhat * xmu).sum(dim=-1, keepdim=True)
    dxmu1 = dxhat * ivar
    # step 6: ivar = 1 / sqrtvar
    dsqrtvar = -divar / sqrtvar.square()
    # step 5: sqrtvar = sqrt(var + eps)
    dvar = dsqrtvar / (2 * torch.sqrt(var + eps))
    # step 4: var is the mean of sq over the row
    dsq = dvar.expand_as(dout) / D
    # step 3: sq = xmu ** 2
    dxmu2 = 2 * xmu * dsq
    # step 2: xmu = x - mu, and mu depends on every x of the row
    dx1 = dxmu1 + dxmu2
    dmu = -dx1.sum(dim=-1, keepdim=True)
    # step 1: mu is the mean of x over the row
    dx2 = dmu.expand_as(dout) / D
    # step 0: both paths reach x
    dx = dx1 + dx2
    return dx, dgamma, dbeta
'''})

EX2_LLMC = Honest("ex2-llmc-reference", EX2,
    "llm.c's PyTorch reference LayerNorm (doc/layernorm/layernorm.md, github.com/karpathy/llm.c): mean by sum / C, "
    "rstd = (var + eps) ** -0.5, cache = (x, w, mean, rstd), norm recomputed in the backward, dx *= rstd; "
    "the module shaped like nanoGPT's LayerNorm (model.py) but calling our own layer_norm",
    {"layer_norm": '''
def layer_norm(x, weight, bias, eps=1e-5):
    C = x.size(-1)
    mean = x.sum(-1, keepdim=True) / C  # (..., 1)
    xshift = x - mean  # (..., C)
    var = (xshift ** 2).sum(-1, keepdim=True) / C  # (..., 1)
    rstd = (var + eps) ** -0.5  # (..., 1)
    return xshift * rstd * weight + bias
''', "LayerNorm": '''
class LayerNorm(nn.Module):
    """LayerNorm with the parameters of nn.LayerNorm, computed by our layer_norm."""

    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
        self.eps = eps

    def forward(self, input):
        return layer_norm(input, self.weight, self.bias, self.eps)
''', "layer_norm_forward_backward": '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    C = x.size(-1)
    mean = x.sum(-1, keepdim=True) / C
    xshift = x - mean
    var = (xshift ** 2).sum(-1, keepdim=True) / C
    rstd = (var + eps) ** -0.5
    norm = xshift * rstd
    out = norm * weight + bias
    cache = (x, weight, mean, rstd)
    return out, cache


def layer_norm_backward(dout, cache):
    x, w, mean, rstd = cache
    C = x.size(-1)
    norm = (x - mean) * rstd  # recomputed here: the cache keeps two numbers per row, not a whole tensor
    db = dout.reshape(-1, C).sum(0)
    dw = (dout * norm).reshape(-1, C).sum(0)
    dnorm = dout * w
    dnorm_mean = dnorm.mean(-1, keepdim=True)
    dnorm_norm_mean = (dnorm * norm).mean(-1, keepdim=True)
    dx = dnorm - dnorm_mean - norm * dnorm_norm_mean
    dx *= rstd
    return dx, dw, db
'''})

EX2_TRANSPOSE = Honest("ex2-batchnorm-on-the-transpose", EX2,
    "CS231n assignment 2 layernorm_forward/backward written as many published solutions follow the "
    "assignment's hint (a small change to batchnorm): batchnorm's per-column code run on x.T; a dict cache "
    "(cs231n.github.io)",
    {"layer_norm": '''
def _normalize_columns(x, eps):
    """Batch normalization's statistics, per column of a 2-D tensor."""
    mu = x.mean(dim=0)
    var = x.var(dim=0, unbiased=False)
    return (x - mu) / torch.sqrt(var + eps)


def layer_norm(x, weight, bias, eps=1e-5):
    D = x.shape[-1]
    rows = x.reshape(-1, D)                     # (M, D)
    x_hat = _normalize_columns(rows.T, eps).T   # each row is a column of the transpose
    return (x_hat * weight + bias).reshape(x.shape)
''', "LayerNorm": EX2_MODULE, "layer_norm_forward_backward": '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    D = x.shape[-1]
    xt = x.reshape(-1, D).T                     # (D, M): a "batch" of D values for each of M rows
    mu = xt.mean(dim=0)
    var = xt.var(dim=0, unbiased=False)
    std = torch.sqrt(var + eps)
    xhat_t = (xt - mu) / std
    out = xhat_t.T * weight + bias              # (M, D)
    cache = {"xhat_t": xhat_t, "std": std, "gamma": weight, "shape": x.shape}
    return out.reshape(x.shape), cache


def layer_norm_backward(dout, cache):
    xhat_t, std, gamma = cache["xhat_t"], cache["std"], cache["gamma"]
    D = gamma.shape[0]
    dout2 = dout.reshape(-1, D)                 # (M, D)
    dbias = dout2.sum(dim=0)
    dweight = (dout2 * xhat_t.T).sum(dim=0)
    # back through the scale, then batchnorm's backward on the transpose
    dxhat_t = (dout2 * gamma).T                 # (D, M)
    n = dxhat_t.shape[0]
    dx_t = (n * dxhat_t - dxhat_t.sum(dim=0) - xhat_t * (dxhat_t * xhat_t).sum(dim=0)) / (n * std)
    return dx_t.T.reshape(cache["shape"]), dweight, dbias
'''})

EX2_PAPER = Honest("ex2-paper-chain-rule", EX2,
    "the chain-rule equations of the BatchNorm paper (Ioffe & Szegedy 2015, section 3: dl/dvar, dl/dmean, "
    "dl/dx) applied per row, with a labml-style module (normalized_shape kept as a torch.Size, the reduced "
    "dims computed from it; nn.labml.ai/normalization/layer_norm); the variance is the centred one, not "
    "labml's E[x^2] - E[x]^2",
    {"layer_norm": '''
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    dims = [-1]
    mean = x.mean(dim=dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
    x_norm = (x - mean) / torch.sqrt(var + eps)
    return weight * x_norm + bias
''', "LayerNorm": '''
from typing import List, Union


class LayerNorm(nn.Module):
    def __init__(self, normalized_shape: Union[int, List[int], torch.Size], eps: float = 1e-5):
        super().__init__()
        sizes = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
        self.normalized_shape = torch.Size(sizes)
        self.dims = [-(i + 1) for i in range(len(sizes))]  # the trailing dims that get normalized
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(self.normalized_shape))
        self.bias = nn.Parameter(torch.zeros(self.normalized_shape))

    def forward(self, x: torch.Tensor):
        assert x.shape[-len(self.dims):] == self.normalized_shape, "the trailing shape differs"
        return layer_norm(x, self.weight, self.bias, self.eps)
''', "layer_norm_forward_backward": '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    xmu = x - mean
    var = (xmu ** 2).mean(dim=-1, keepdim=True)
    x_hat = xmu / torch.sqrt(var + eps)
    return weight * x_hat + bias, (xmu, var, x_hat, weight, eps)


def layer_norm_backward(dout, cache):
    xmu, var, x_hat, weight, eps = cache
    D = dout.shape[-1]
    dbias = dout.reshape(-1, D).sum(0)
    dweight = (dout * x_hat).reshape(-1, D).sum(0)
    dx_hat = dout * weight
    dvar = (dx_hat * xmu * -0.5 * (var + eps) ** -1.5).sum(-1, keepdim=True)
    dmean = (-dx_hat / torch.sqrt(var + eps)).sum(-1, keepdim=True) + dvar * (-2.0 * xmu).mean(-1, keepdim=True)
    dx = dx_hat / torch.sqrt(var + eps) + dvar * 2.0 * xmu / D + dmean / D
    return dx, dweight, dbias
'''})

EX2_STUDENT_PRINTS = Honest("ex2-student-prints-everywhere", EX2,
    "student notebook: print(x), f-strings of tensors, str() and repr() inside all three graded functions; "
    "inspect.signature; a cell comparing with F.layer_norm; .backward() and torch.autograd.gradcheck in a "
    "cell to check the hand-written gradients; %timeit and !ls",
    {"layer_norm": '''
def layer_norm(x, weight, bias, eps=1e-5):
    print("layer_norm got", x.shape, x.dtype)
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    print(f"mean={mean}, var={var}")
    out = (x - mean) / torch.sqrt(var + eps) * weight + bias
    print(out)
    return out
''', "LayerNorm": '''
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
        print("LayerNorm weight:", self.weight)

    def forward(self, x):
        y = layer_norm(x, self.weight, self.bias, self.eps)
        print("LayerNorm output:", str(y))
        return y
''', "layer_norm_forward_backward": '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    inv_std = 1 / torch.sqrt(var + eps)
    x_hat = (x - mean) * inv_std
    print("x_hat", repr(x_hat))
    return x_hat * weight + bias, (x_hat, inv_std, weight)


def layer_norm_backward(dout, cache):
    x_hat, inv_std, weight = cache
    print(f"dout is {dout}")
    D = dout.shape[-1]
    dbias = dout.reshape(-1, D).sum(0)
    dweight = (dout * x_hat).reshape(-1, D).sum(0)
    g = dout * weight
    dx = inv_std * (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True))
    print("dx:", dx, "dweight:", dweight, "dbias:", dbias)
    return dx, dweight, dbias
'''},
    extra=(("layer_norm", '''
import inspect

from IPython.display import display

torch.set_printoptions(precision=4, sci_mode=False)
print(inspect.signature(layer_norm))
F.layer_norm?
x = torch.randn(2, 5)
w, b = torch.ones(5), torch.zeros(5)
print(x)
print("mine: ", layer_norm(x, w, b))
display(F.layer_norm(x, (5,), w, b))
print(torch.allclose(layer_norm(x, w, b), F.layer_norm(x, (5,), w, b), atol=1e-6))
'''), ("layer_norm", '''
!ls
%timeit layer_norm(torch.randn(64, 512), torch.ones(512), torch.zeros(512))
'''), ("layer_norm_forward_backward", '''
# check the hand-written backward against autograd
xg = torch.randn(3, 4, dtype=torch.double, requires_grad=True)
wg = torch.rand(4, dtype=torch.double, requires_grad=True)
bg = torch.randn(4, dtype=torch.double, requires_grad=True)
out = layer_norm(xg, wg, bg)
dout = torch.randn_like(out)
out.backward(dout)
with torch.no_grad():
    _, cache = layer_norm_forward(xg, wg, bg)
    dx, dw, db = layer_norm_backward(dout, cache)
print("dx error", (dx - xg.grad).abs().max().item())
print("dw error", (dw - wg.grad).abs().max().item())
print("gradcheck:", torch.autograd.gradcheck(layer_norm, (xg, wg, bg)))
''')), student=True)

EX2_STUDENT_NAMES = Honest("ex2-student-signal-dataclass-cache", EX2,
    "student notebook: the backward's upstream gradient called signal, a dataclass as the cache, type hints, "
    "assert statements on shapes, logging and warnings, getattr/setattr over the parameter names",
    {"layer_norm": '''
import warnings


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    assert x.shape[-1] == weight.shape[0] == bias.shape[0], "feature sizes differ"
    if eps <= 0:
        warnings.warn("eps should be positive")
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, correction=0, keepdim=True)
    return (x - mean) / (var + eps).sqrt() * weight + bias
''', "LayerNorm": '''
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        for name, fill in (("weight", 1.0), ("bias", 0.0)):
            setattr(self, name, nn.Parameter(torch.full((normalized_shape,), fill)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight, bias = (getattr(self, name) for name in ("weight", "bias"))
        return layer_norm(x, weight, bias, self.eps)
''', "layer_norm_forward_backward": '''
import logging
from dataclasses import dataclass

log = logging.getLogger("layernorm")


@dataclass
class Cache:
    x_hat: torch.Tensor
    inv_std: torch.Tensor
    weight: torch.Tensor


def layer_norm_forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    inv_std = torch.rsqrt(((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps)
    x_hat = (x - mean) * inv_std
    log.info("forward on %s", tuple(x.shape))
    return x_hat * weight + bias, Cache(x_hat, inv_std, weight)


def layer_norm_backward(dout: torch.Tensor, cache: Cache):
    assert dout.shape == cache.x_hat.shape
    D = dout.shape[-1]
    signal = dout * cache.weight  # the error signal reaching x_hat
    dx = cache.inv_std * (signal - signal.mean(-1, keepdim=True)
                          - cache.x_hat * (signal * cache.x_hat).mean(-1, keepdim=True))
    dweight = (dout * cache.x_hat).reshape(-1, D).sum(dim=0)
    dbias = dout.reshape(-1, D).sum(dim=0)
    log.debug("backward done")
    return dx, dweight, dbias
'''},
    extra=(("LayerNorm", '''
ln = LayerNorm(6)
for name, p in ln.named_parameters():
    print(name, p.shape, p)
print(ln.state_dict())
'''),), student=True)


EX2_TORCHSCRIPT = Honest("ex2-torchscript-helpers-namedtuple-cache", EX2,
    "timm's jit-scripted helpers, a @torch.jit.script function for the arithmetic and a thin Python "
    "wrapper or module around it, and a scripted forward/backward pair as its swish_jit_fwd/swish_jit_bwd "
    "(github.com/huggingface/pytorch-image-models, timm/layers/activations_jit.py and activations_me.py); "
    "the cache a typing.NamedTuple, as torch.return_types and transformers' ModelOutput name their fields",
    {"layer_norm": '''
@torch.jit.script
def layer_norm_jit(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    mean = x.mean(-1, keepdim=True)
    centred = x - mean
    var = centred.pow(2).mean(-1, keepdim=True)
    return centred * torch.rsqrt(var + eps) * weight + bias


def layer_norm(x, weight, bias, eps=1e-5):
    return layer_norm_jit(x, weight, bias, float(eps))
''', "LayerNorm": '''
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps)
''', "layer_norm_forward_backward": '''
from typing import NamedTuple


class LayerNormCache(NamedTuple):
    x_hat: torch.Tensor  # (..., D), the normalized input
    rstd: torch.Tensor  # (..., 1), 1 / sqrt(var + eps)
    weight: torch.Tensor  # (D,)


@torch.jit.script
def layer_norm_jit_fwd(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float):
    mean = x.mean(-1, keepdim=True)
    rstd = torch.rsqrt((x - mean).pow(2).mean(-1, keepdim=True) + eps)
    x_hat = (x - mean) * rstd
    return x_hat * weight + bias, x_hat, rstd


@torch.jit.script
def layer_norm_jit_bwd(dout: torch.Tensor, x_hat: torch.Tensor, rstd: torch.Tensor, weight: torch.Tensor):
    d = dout.size(-1)
    dweight = (dout * x_hat).reshape(-1, d).sum(0)
    dbias = dout.reshape(-1, d).sum(0)
    g = dout * weight
    dx = rstd * (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True))
    return dx, dweight, dbias


def layer_norm_forward(x, weight, bias, eps=1e-5):
    out, x_hat, rstd = layer_norm_jit_fwd(x, weight, bias, float(eps))
    return out, LayerNormCache(x_hat, rstd, weight)


def layer_norm_backward(dout, cache: LayerNormCache):
    return layer_norm_jit_bwd(dout, cache.x_hat, cache.rstd, cache.weight)
'''})

EX2_CONVNEXT = Honest("ex2-convnext-layernorm-singledispatch", EX2,
    "ConvNeXt's LayerNorm (github.com/facebookresearch/ConvNeXt, models/convnext.py): u = x.mean, s = (x - u)"
    ".pow(2).mean, x = (x - u) / torch.sqrt(s + eps), then weight * x + bias, its channels_first arithmetic "
    "taken over the last dimension and a data_format attribute kept; from __future__ import annotations, "
    "string annotations, and functools.singledispatch to accept an int or a sequence as normalized_shape, "
    "registered by annotation as the Python docs show (docs.python.org/3/library/functools.html)",
    {"layer_norm": '''
from __future__ import annotations


def layer_norm(x: "torch.Tensor", weight: "torch.Tensor", bias: "torch.Tensor", eps: float = 1e-5) -> "torch.Tensor":
    u = x.mean(-1, keepdim=True)
    s = (x - u).pow(2).mean(-1, keepdim=True)
    x = (x - u) / torch.sqrt(s + eps)
    return weight * x + bias
''', "LayerNorm": '''
from collections.abc import Sequence
from functools import singledispatch


@singledispatch
def as_shape(normalized_shape) -> tuple[int, ...]:
    raise TypeError(f"normalized_shape should be an int or a sequence of ints, not {normalized_shape!r}")


@as_shape.register
def _(normalized_shape: int) -> tuple[int, ...]:
    return (normalized_shape,)


@as_shape.register
def _(normalized_shape: Sequence) -> tuple[int, ...]:
    return tuple(int(n) for n in normalized_shape)


class LayerNorm(nn.Module):
    def __init__(self, normalized_shape: int, eps: float = 1e-5, data_format: str = "channels_last") -> None:
        super().__init__()
        self.normalized_shape = as_shape(normalized_shape)
        self.weight = nn.Parameter(torch.ones(self.normalized_shape))
        self.bias = nn.Parameter(torch.zeros(self.normalized_shape))
        self.eps = eps
        self.data_format = data_format

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps)
''', "layer_norm_forward_backward": '''
def layer_norm_forward(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    u = x.mean(-1, keepdim=True)
    s = (x - u).pow(2).mean(-1, keepdim=True)
    inv_std = 1.0 / torch.sqrt(s + eps)
    x_hat = (x - u) * inv_std
    return weight * x_hat + bias, {"x_hat": x_hat, "inv_std": inv_std, "weight": weight}


def layer_norm_backward(
    dout: torch.Tensor, cache: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x_hat, inv_std, weight = cache["x_hat"], cache["inv_std"], cache["weight"]
    rows = dout.reshape(-1, dout.shape[-1])
    dbias = rows.sum(0)
    dweight = (rows * x_hat.reshape(rows.shape)).sum(0)
    dx_hat = dout * weight
    dx = inv_std * (dx_hat - dx_hat.mean(-1, keepdim=True)
                    - x_hat * (dx_hat * x_hat).mean(-1, keepdim=True))
    return dx, dweight, dbias
'''})


# --- ex3_batchnorm: batch_norm, BatchNorm1d ---------------------------------------------------------------

EX3 = "ex3_batchnorm"

EX3_D2L = Honest("ex3-d2l-moving-stats", EX3,
    "d2l.ai's batch_norm(X, gamma, beta, moving_mean, moving_var, eps, momentum) from 'Batch Normalization' "
    "(shape checks by len(X.shape), keepdim statistics, Y = gamma * X_hat + beta), adapted to the contract: "
    "the training flag instead of torch.is_grad_enabled(), PyTorch's momentum, and the caller's running "
    "statistics updated in place (d2l.ai/chapter_convolutional-modern/batch-norm.html)",
    {"batch_norm": '''
def batch_norm(x, weight, bias, running_mean, running_var, training: bool, momentum=0.1, eps=1e-5):
    X, gamma, beta, moving_mean, moving_var = x, weight, bias, running_mean, running_var
    assert len(X.shape) in (2, 3)
    if len(X.shape) == 2:
        # fully connected: statistics over the batch
        shape, dims = (1, X.shape[1]), (0,)
    else:
        # (N, C, L): statistics over the batch and the length, per channel
        shape, dims = (1, X.shape[1], 1), (0, 2)
    if not training:
        X_hat = (X - moving_mean.reshape(shape)) / torch.sqrt(moving_var.reshape(shape) + eps)
    else:
        mean = X.mean(dim=dims, keepdim=True)
        var = ((X - mean) ** 2).mean(dim=dims, keepdim=True)
        X_hat = (X - mean) / torch.sqrt(var + eps)
        n = X.numel() / X.shape[1]
        with torch.no_grad():
            moving_mean.copy_((1.0 - momentum) * moving_mean + momentum * mean.reshape(-1))
            moving_var.copy_((1.0 - momentum) * moving_var + momentum * var.reshape(-1) * n / (n - 1))
    Y = gamma.reshape(shape) * X_hat + beta.reshape(shape)
    return Y
''', "BatchNorm1d": '''
class BatchNorm1d(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        shape = (num_features,)
        self.eps, self.momentum = eps, momentum
        # the scale and shift are learned
        self.weight = nn.Parameter(torch.ones(shape))
        self.bias = nn.Parameter(torch.zeros(shape))
        # the moving statistics are not
        self.register_buffer("running_mean", torch.zeros(shape))
        self.register_buffer("running_var", torch.ones(shape))

    def forward(self, X):
        return batch_norm(X, self.weight, self.bias, self.running_mean, self.running_var,
                          training=self.training, momentum=self.momentum, eps=self.eps)
'''})

EX3_MAKEMORE = Honest("ex3-makemore-batchnorm1d", EX3,
    "Karpathy's makemore BatchNorm1d (Neural Networks: Zero to Hero, part 3): xmean/xvar, xhat, then the "
    "buffers updated under torch.no_grad(); adapted to the contract: biased variance to normalize, unbiased "
    "for running_var, in-place buffer updates, (N, C, L) reduced over (0, 2) (github.com/karpathy/makemore)",
    {"batch_norm": '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    dim = 0 if x.ndim == 2 else (0, 2)
    view = (1, -1) if x.ndim == 2 else (1, -1, 1)
    if training:
        xmean = x.mean(dim, keepdim=True)
        xvar = x.var(dim, keepdim=True, unbiased=False)  # the contract normalizes with the biased variance
    else:
        xmean = running_mean.view(view)
        xvar = running_var.view(view)
    xhat = (x - xmean) / torch.sqrt(xvar + eps)
    out = weight.view(view) * xhat + bias.view(view)
    if training:
        with torch.no_grad():
            running_mean.mul_(1 - momentum).add_(momentum * xmean.flatten())
            running_var.mul_(1 - momentum).add_(momentum * x.var(dim).flatten())  # divided by n - 1
    return out
''', "BatchNorm1d": '''
class BatchNorm1d(nn.Module):

    def __init__(self, dim, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps = eps
        self.momentum = momentum
        # gamma and beta, trained by gradient descent
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))
        # running statistics: buffers, never trained
        self.register_buffer("running_mean", torch.zeros(dim))
        self.register_buffer("running_var", torch.ones(dim))

    def forward(self, x):
        self.out = batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var,
                              self.training, self.momentum, self.eps)
        return self.out
'''})

EX3_CS231N = Honest("ex3-cs231n-spatial-bn-param", EX3,
    "CS231n assignment 2 batchnorm_forward with a bn_param dict ('mode' train/test, running statistics "
    "inside) and spatial batchnorm by moving channels last and flattening to (N*L, C); PyTorch's momentum "
    "convention instead of CS231n's (cs231n.github.io)",
    {"batch_norm": '''
def _batchnorm_forward(x, gamma, beta, bn_param):
    mode = bn_param["mode"]
    eps = bn_param.get("eps", 1e-5)
    momentum = bn_param.get("momentum", 0.1)  # the weight of the new batch, as in PyTorch
    running_mean = bn_param["running_mean"]
    running_var = bn_param["running_var"]
    N = x.shape[0]
    if mode == "train":
        sample_mean = x.mean(dim=0)
        sample_var = x.var(dim=0, unbiased=False)
        x_norm = (x - sample_mean) / torch.sqrt(sample_var + eps)
        out = gamma * x_norm + beta
        with torch.no_grad():
            running_mean *= 1 - momentum
            running_mean += momentum * sample_mean
            running_var *= 1 - momentum
            running_var += momentum * sample_var * N / (N - 1)
    elif mode == "test":
        x_norm = (x - running_mean) / torch.sqrt(running_var + eps)
        out = gamma * x_norm + beta
    else:
        raise ValueError(f"bn_param['mode'] is {mode!r}: use 'train' or 'test'")
    return out


def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    bn_param = {"mode": "train" if training else "test", "eps": eps, "momentum": momentum,
                "running_mean": running_mean, "running_var": running_var}
    if x.dim() == 3:
        N, C, L = x.shape
        x_flat = x.permute(0, 2, 1).reshape(-1, C)  # (N*L, C)
        out = _batchnorm_forward(x_flat, weight, bias, bn_param)
        return out.reshape(N, L, C).permute(0, 2, 1)
    return _batchnorm_forward(x, weight, bias, bn_param)
''', "BatchNorm1d": '''
class BatchNorm1d(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
        self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))

    def forward(self, x):
        if self.training:
            self.num_batches_tracked += 1
        return batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var,
                          self.training, self.momentum, self.eps)

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"
'''})

EX3_LERP = Honest("ex3-var-mean-and-lerp", EX3,
    "torch.var_mean for the statistics and the running averages as an exponential moving average by in-place "
    "lerp, the operation timm's ModelEmaV3 averages with (github.com/huggingface/pytorch-image-models, "
    "timm/utils/model_ema.py); "
    "the affine step folded into one scale and shift, as inference-time BatchNorm folding does",
    {"batch_norm": '''
def batch_norm(x, weight, bias, running_mean, running_var, training: bool, momentum=0.1, eps=1e-5):
    reduce = [d for d in range(x.dim()) if d != 1]
    shape = [1] * x.dim()
    shape[1] = -1
    if training:
        var, mean = torch.var_mean(x, dim=reduce, correction=0)
        count = x.numel() // x.size(1)
        with torch.no_grad():
            running_mean.lerp_(mean, momentum)
            running_var.lerp_(var * count / (count - 1), momentum)
    else:
        mean, var = running_mean, running_var
    scale = weight * torch.rsqrt(var + eps)
    shift = bias - mean * scale
    return x * scale.view(shape) + shift.view(shape)
''', "BatchNorm1d": '''
class BatchNorm1d(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1) -> None:
        super().__init__()
        self.eps = eps
        self.momentum = momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var,
                          training=self.training, momentum=self.momentum, eps=self.eps)
'''})

EX3_STUDENT = Honest("ex3-student-debugs-batchnorm", EX3,
    "student notebook: prints the batch statistics inside batch_norm, setattr/getattr loops over the "
    "parameter and buffer names, a cell comparing with nn.BatchNorm1d, a numpy round trip, warnings, "
    "%time and a !pip line",
    {"batch_norm": '''
import warnings


def batch_norm(x, weight, bias, running_mean, running_var, training: bool, momentum=0.1, eps=1e-5):
    dims = [0] + list(range(2, x.dim()))
    shape = [1, -1] + [1] * (x.dim() - 2)
    if training:
        mean = x.mean(dim=dims)
        var = x.var(dim=dims, unbiased=False)
        n = x.numel() // x.shape[1]
        if n == 1:
            warnings.warn("one value per channel: the variance is zero")
        print("batch mean", mean, "batch var", var)
        with torch.no_grad():
            running_mean.mul_(1 - momentum).add_(mean, alpha=momentum)
            running_var.mul_(1 - momentum).add_(var * n / (n - 1), alpha=momentum)
    else:
        mean, var = running_mean, running_var
        print(f"eval mode, running mean {running_mean}")
    return (x - mean.view(shape)) / torch.sqrt(var.view(shape) + eps) * weight.view(shape) + bias.view(shape)
''', "BatchNorm1d": '''
class BatchNorm1d(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        for name, init in (("weight", torch.ones), ("bias", torch.zeros)):
            setattr(self, name, nn.Parameter(init(num_features)))
        for name, init in (("running_mean", torch.zeros), ("running_var", torch.ones)):
            self.register_buffer(name, init(num_features))

    def forward(self, x):
        state = [getattr(self, name) for name in ("weight", "bias", "running_mean", "running_var")]
        return batch_norm(x, *state, self.training, self.momentum, self.eps)
'''},
    extra=(("batch_norm", '''
!pip list | grep torch
import numpy as np

x_np = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)
x = torch.from_numpy(x_np)
rm, rv = torch.zeros(3), torch.ones(3)
mine = batch_norm(x, torch.ones(3), torch.zeros(3), rm, rv, True)
print(mine.numpy().mean(axis=0), mine.numpy().std(axis=0))
'''), ("BatchNorm1d", '''
torch.manual_seed(0)
mine, ref = BatchNorm1d(4), nn.BatchNorm1d(4)
for step in range(3):
    xb = torch.randn(16, 4) * 3 + 1
    print(step, torch.allclose(mine(xb), ref(xb), atol=1e-5))
print(mine.running_mean, ref.running_mean)
print(torch.allclose(mine.running_var, ref.running_var))
%time mine(torch.randn(256, 4))
''')), student=True)


# --- ex4_prepost: PostNormBlock, PreNormBlock, make_stack, ffn_grad_norms -----------------------------------

EX4 = "ex4_prepost"

EX4_TORCH_LAYER = Honest("ex4-torch-encoder-layer", EX4,
    "PyTorch's own nn.TransformerEncoderLayer: one class with a norm_first flag and _sa_block/_ff_block "
    "helpers, and nn.TransformerEncoder's stack of deep copies of one layer "
    "(torch/nn/modules/transformer.py, github.com/pytorch/pytorch)",
    {"PostNormBlock": '''
class _EncoderBlock(nn.Module):
    norm_first = False

    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x, attn_mask=None):
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), attn_mask)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, attn_mask))
            x = self.norm2(x + self._ff_block(x))
        return x

    # attention sublayer, without its residual
    def _sa_block(self, x, attn_mask):
        return self.attn(x, x, x, attn_mask=attn_mask, need_weights=False)[0]

    # feed-forward sublayer, without its residual
    def _ff_block(self, x):
        return self.ffn(x)


class PostNormBlock(_EncoderBlock):
    norm_first = False
''', "PreNormBlock": '''
class PreNormBlock(_EncoderBlock):
    norm_first = True
''', "make_stack": '''
import copy


class Encoder(nn.Module):
    def __init__(self, layer, depth, final_norm):
        super().__init__()
        self.blocks = nn.ModuleList([copy.deepcopy(layer) for _ in range(depth)])
        self.final_norm = final_norm

    def forward(self, x, attn_mask=None):
        output = x
        for mod in self.blocks:
            output = mod(output, attn_mask=attn_mask)
        return self.final_norm(output)


def make_stack(block_cls, depth, d_model, n_heads, d_ff):
    final_norm = nn.LayerNorm(d_model) if issubclass(block_cls, PreNormBlock) else nn.Identity()
    return Encoder(block_cls(d_model, n_heads, d_ff), depth, final_norm)
''', "ffn_grad_norms": '''
def ffn_grad_norms(stack, x, target):
    weights = [block.ffn[2].weight for block in stack.blocks]
    loss = F.mse_loss(stack(x), target)
    grads = torch.autograd.grad(loss, weights)
    return [torch.linalg.matrix_norm(g).item() for g in grads]
'''})

EX4_NANOGPT = Honest("ex4-nanogpt-block", EX4,
    "nanoGPT's Block and GPT (model.py, github.com/karpathy/nanoGPT): x = x + attn(ln_1(x)); "
    "x = x + mlp(ln_2(x)), a ModuleList of blocks then a final LayerNorm; gradients read from .grad after "
    "zero_grad(set_to_none=True) and loss.backward(), as its training loop does",
    {"PostNormBlock": '''
class PostNormBlock(nn.Module):

    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.norm1 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x, attn_mask=None):
        x = self.norm1(x + self.attn(x, x, x, attn_mask=attn_mask, need_weights=False)[0])
        x = self.norm2(x + self.ffn(x))
        return x
''', "PreNormBlock": '''
class PreNormBlock(nn.Module):

    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.norm2 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x, attn_mask=None):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0]
        x = x + self.ffn(self.norm2(x))
        return x
''', "make_stack": '''
class GPTStack(nn.Module):

    def __init__(self, block_cls, depth, d_model, n_heads, d_ff):
        super().__init__()
        self.blocks = nn.ModuleList([block_cls(d_model, n_heads, d_ff) for _ in range(depth)])
        self.final_norm = nn.LayerNorm(d_model) if block_cls is PreNormBlock else nn.Identity()

    def forward(self, x, attn_mask=None):
        for block in self.blocks:
            x = block(x, attn_mask=attn_mask)
        x = self.final_norm(x)
        return x


def make_stack(block_cls, depth, d_model, n_heads, d_ff):
    return GPTStack(block_cls, depth, d_model, n_heads, d_ff)
''', "ffn_grad_norms": '''
def ffn_grad_norms(stack, x, target):
    stack.zero_grad(set_to_none=True)
    loss = F.mse_loss(stack(x), target)
    loss.backward()
    return [block.ffn[2].weight.grad.norm().item() for block in stack.blocks]
'''})

EX4_ANNOTATED = Honest("ex4-annotated-transformer-sublayer", EX4,
    "the Annotated Transformer's SublayerConnection (nlp.seas.harvard.edu/annotated-transformer): a residual "
    "helper that takes the sublayer as a lambda, x + sublayer(norm(x)), and an Encoder that ends with its own "
    "norm; a clones() helper that builds the layers",
    {"PostNormBlock": '''
class PostNormBlock(nn.Module):
    "Post-norm: the residual sum is normalized, as in the original Transformer."

    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def sublayer(self, x, norm, fn):
        "Add the sublayer's output to x, then normalize the sum."
        return norm(x + fn(x))

    def forward(self, x, attn_mask=None):
        x = self.sublayer(x, self.norm1, lambda x: self.attn(x, x, x, attn_mask=attn_mask, need_weights=False)[0])
        return self.sublayer(x, self.norm2, self.ffn)
''', "PreNormBlock": '''
class PreNormBlock(nn.Module):
    "Pre-norm: each sublayer sees a normalized copy; the stream itself is never normalized."

    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def sublayer(self, x, norm, fn):
        "Normalize what the sublayer reads; add its output to the untouched x."
        return x + fn(norm(x))

    def forward(self, x, attn_mask=None):
        x = self.sublayer(x, self.norm1, lambda h: self.attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0])
        return self.sublayer(x, self.norm2, self.ffn)
''', "make_stack": '''
def clones(make, N):
    "N layers, each built by its own call of make."
    return nn.ModuleList([make() for _ in range(N)])


class Encoder(nn.Module):
    "The blocks in order, then the stack's final norm."

    def __init__(self, make_layer, N, final_norm):
        super().__init__()
        self.blocks = clones(make_layer, N)
        self.final_norm = final_norm

    def forward(self, x, attn_mask=None):
        "Each block reads the previous one's output; every block gets the same mask."
        for layer in self.blocks:
            x = layer(x, attn_mask)
        return self.final_norm(x)


def make_stack(block_cls, depth, d_model, n_heads, d_ff):
    norm = nn.LayerNorm(d_model) if block_cls is PreNormBlock else nn.Identity()
    return Encoder(lambda: block_cls(d_model, n_heads, d_ff), depth, norm)
''', "ffn_grad_norms": '''
def ffn_grad_norms(stack, x, target):
    loss = F.mse_loss(stack(x), target)
    weights = [layer.ffn[2].weight for layer in stack.blocks]
    return [float(torch.sqrt((g ** 2).sum())) for g in torch.autograd.grad(loss, weights)]
'''})

EX4_BERT = Honest("ex4-bert-self-output", EX4,
    "Hugging Face BERT's post-norm sublayers (BertSelfOutput/BertOutput: LayerNorm(hidden_states + "
    "input_tensor)) with its variable names, a pre-norm twin, and a stack that records per-block gradient "
    "norms with a list comprehension over named parameters (github.com/huggingface/transformers, "
    "models/bert/modeling_bert.py)",
    {"PostNormBlock": '''
class PostNormBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.norm1 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, hidden_states, attn_mask=None):
        input_tensor = hidden_states
        attention_output, _ = self.attn(hidden_states, hidden_states, hidden_states, attn_mask=attn_mask,
                                         need_weights=False)
        hidden_states = self.norm1(attention_output + input_tensor)
        layer_output = self.ffn(hidden_states)
        return self.norm2(layer_output + hidden_states)
''', "PreNormBlock": '''
class PreNormBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.norm1 = nn.LayerNorm(d_model)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, hidden_states, attn_mask=None):
        normed = self.norm1(hidden_states)
        attention_output, _ = self.attn(normed, normed, normed, attn_mask=attn_mask, need_weights=False)
        hidden_states = attention_output + hidden_states
        return self.ffn(self.norm2(hidden_states)) + hidden_states
''', "make_stack": '''
def make_stack(block_cls, depth, d_model, n_heads, d_ff):
    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList()
            for _ in range(depth):
                self.blocks.append(block_cls(d_model, n_heads, d_ff))
            self.final_norm = nn.LayerNorm(d_model) if block_cls == PreNormBlock else nn.Identity()

        def forward(self, hidden_states, attn_mask=None):
            for layer_module in self.blocks:
                hidden_states = layer_module(hidden_states, attn_mask=attn_mask)
            return self.final_norm(hidden_states)

    return Stack()
''', "ffn_grad_norms": '''
def ffn_grad_norms(stack, x, target):
    names = [f"blocks.{i}.ffn.2.weight" for i in range(len(stack.blocks))]
    params = dict(stack.named_parameters())
    loss = F.mse_loss(stack(x), target)
    grads = torch.autograd.grad(loss, [params[n] for n in names])
    return [g.norm(p="fro").item() for g in grads]
'''})

EX4_STUDENT = Honest("ex4-student-prints-and-timing", EX4,
    "student notebook: prints shapes and tensors inside forward, asserts on shapes, logging, warnings for "
    "deep stacks, torch.manual_seed and time.perf_counter in a timing cell, print(stack), gradients cleared "
    "by hand (p.grad = None) before loss.backward()",
    {"PostNormBlock": '''
import logging

logger = logging.getLogger(__name__)


class PostNormBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        logger.info("PostNormBlock(%d, %d, %d)", d_model, n_heads, d_ff)

    def forward(self, x: torch.Tensor, attn_mask=None) -> torch.Tensor:
        assert x.dim() == 3, f"expected (B, T, C), got {tuple(x.shape)}"
        a = self.attn(x, x, x, attn_mask=attn_mask, need_weights=False)[0]
        print("attention output", a.shape, a[0, 0])
        x = self.norm1(x + a)
        x = self.norm2(x + self.ffn(x))
        print(f"block output: {x}")
        return x
''', "PreNormBlock": '''
class PreNormBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor, attn_mask=None) -> torch.Tensor:
        h = self.norm1(x)
        print("h stats:", h.mean().item(), h.std().item())
        x = x + self.attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0]
        return x + self.ffn(self.norm2(x))
''', "make_stack": '''
import warnings


def make_stack(block_cls, depth: int, d_model: int, n_heads: int, d_ff: int) -> nn.Module:
    if depth > 64:
        warnings.warn(f"a stack of {depth} blocks will be slow on a laptop")

    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(block_cls(d_model, n_heads, d_ff) for _ in range(depth))
            self.final_norm = nn.LayerNorm(d_model) if block_cls is PreNormBlock else nn.Identity()

        def forward(self, x, attn_mask=None):
            for i, block in enumerate(self.blocks):
                x = block(x, attn_mask=attn_mask)
                print(f"after block {i}: mean {x.mean():.3f} std {x.std():.3f}")
            return self.final_norm(x)

    return Stack()
''', "ffn_grad_norms": '''
def ffn_grad_norms(stack: nn.Module, x: torch.Tensor, target: torch.Tensor) -> list[float]:
    for p in stack.parameters():
        p.grad = None  # backward() adds into .grad: start from nothing
    loss = F.mse_loss(stack(x), target)
    print("loss", loss)
    loss.backward()
    norms = [block.ffn[2].weight.grad.norm().item() for block in stack.blocks]
    print(norms)
    return norms
'''},
    extra=(("make_stack", '''
import time

torch.manual_seed(0)
stack = make_stack(PreNormBlock, 2, 16, 4, 32)
print(stack)
start = time.perf_counter()
y = stack(torch.randn(2, 5, 16))
print(y.shape, f"{time.perf_counter() - start:.4f} s")

# watch what each block puts out, then stop watching
hooks = [block.register_forward_hook(lambda module, inputs, output: print(type(module).__name__, output.std()))
         for block in stack.blocks]
stack(torch.randn(2, 5, 16))
for hook in hooks:
    hook.remove()
'''), ("ffn_grad_norms", '''
from tqdm import tqdm

torch.manual_seed(1)
for cls in tqdm((PreNormBlock, PostNormBlock)):
    s = make_stack(cls, 3, 16, 4, 32)
    xs, ts = torch.randn(2, 5, 16), torch.randn(2, 5, 16)
    print(cls.__name__, ffn_grad_norms(s, xs, ts))
''')), student=True)


EX4_CONTAINER_SUBCLASSES = Honest("ex4-openclip-layernorm-and-layerdrop-list", EX4,
    "OpenCLIP's LayerNorm, a subclass of nn.LayerNorm that casts the result back to the input's dtype "
    "(github.com/mlfoundations/open_clip, src/open_clip/transformer.py) for norm1 and norm2; fairseq's LayerDropModuleList, a "
    "subclass of nn.ModuleList whose iterator skips each layer with probability p, p = 0 here "
    "(github.com/facebookresearch/fairseq, fairseq/modules/layer_drop.py); the feed-forward a subclass of "
    "nn.Sequential as torchvision's MLP (torchvision/ops/misc.py); the sizes in a dataclass",
    {"PostNormBlock": '''
from dataclasses import dataclass


@dataclass(frozen=True)
class BlockConfig:
    d_model: int
    n_heads: int
    d_ff: int


class LayerNorm(nn.LayerNorm):
    """Subclass torch's LayerNorm to cast back to the input's dtype."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        orig_type = x.dtype
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.to(orig_type)


class FeedForward(nn.Sequential):
    """Linear(d_model, d_ff) -> GELU -> Linear(d_ff, d_model)."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))


class PostNormBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.config = BlockConfig(d_model, n_heads, d_ff)
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ffn = FeedForward(d_model, d_ff)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)

    def attention(self, x: torch.Tensor, attn_mask=None) -> torch.Tensor:
        return self.attn(x, x, x, attn_mask=attn_mask, need_weights=False)[0]

    def forward(self, x: torch.Tensor, attn_mask=None) -> torch.Tensor:
        x = self.norm1(x + self.attention(x, attn_mask))
        return self.norm2(x + self.ffn(x))
''', "PreNormBlock": '''
class PreNormBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.config = BlockConfig(d_model, n_heads, d_ff)
        self.norm1 = LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.norm2 = LayerNorm(d_model)
        self.ffn = FeedForward(d_model, d_ff)

    def attention(self, q_x: torch.Tensor, attn_mask=None) -> torch.Tensor:
        return self.attn(q_x, q_x, q_x, attn_mask=attn_mask, need_weights=False)[0]

    def forward(self, x: torch.Tensor, attn_mask=None) -> torch.Tensor:
        x = x + self.attention(self.norm1(x), attn_mask=attn_mask)
        x = x + self.ffn(self.norm2(x))
        return x
''', "make_stack": '''
class LayerDropModuleList(nn.ModuleList):
    """An nn.ModuleList whose iterator skips each layer with probability p while training (LayerDrop)."""

    def __init__(self, p: float, modules=None):
        super().__init__(modules)
        self.p = p

    def __iter__(self):
        keep = torch.rand(len(self)) >= self.p if self.training and self.p > 0 else None
        for i, module in enumerate(super().__iter__()):
            if keep is None or bool(keep[i]):
                yield module


class Encoder(nn.Module):
    def __init__(self, block_cls, depth, d_model, n_heads, d_ff, layerdrop: float = 0.0):
        super().__init__()
        self.blocks = LayerDropModuleList(layerdrop, [block_cls(d_model, n_heads, d_ff) for _ in range(depth)])
        self.final_norm = nn.LayerNorm(d_model) if block_cls is PreNormBlock else nn.Identity()

    def forward(self, x, attn_mask=None):
        for block in self.blocks:
            x = block(x, attn_mask=attn_mask)
        return self.final_norm(x)


def make_stack(block_cls, depth, d_model, n_heads, d_ff):
    return Encoder(block_cls, depth, d_model, n_heads, d_ff)
''', "ffn_grad_norms": '''
def ffn_grad_norms(stack, x, target):
    weights = [block.ffn[2].weight for block in stack.blocks]
    loss = F.mse_loss(stack(x), target)
    grads = torch.autograd.grad(loss, weights)
    return [g.norm().item() for g in grads]
'''})


# --- ex5_rmsnorm: rms_norm, RMSNorm -----------------------------------------------------------------------

EX5 = "ex5_rmsnorm"

EX5_META = Honest("ex5-meta-llama-norm", EX5,
    "Meta's LLaMA RMSNorm (llama/model.py, github.com/meta-llama/llama): a _norm method x * "
    "torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps), called on x.float(), then .type_as(x) and times "
    "the weight; adapted so float64 is not rounded to float32",
    {"rms_norm": '''
def rms_norm(x, weight, eps=1e-6):
    def _norm(x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)

    upcast = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    output = _norm(upcast).type_as(x)
    return output * weight.type_as(x)
''', "RMSNorm": '''
class RMSNorm(torch.nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float() if x.dtype in (torch.float16, torch.bfloat16) else x).type_as(x)
        return output * self.weight
'''})

EX5_HF = Honest("ex5-hf-llama-rmsnorm", EX5,
    "Hugging Face transformers' LlamaRMSNorm (models/llama/modeling_llama.py): input_dtype kept, hidden_states "
    "to float32, variance = pow(2).mean, rsqrt(variance + variance_epsilon), weight * hidden_states back in "
    "input_dtype; float64 kept by promoting to at least float32",
    {"rms_norm": '''
def rms_norm(x, weight, eps=1e-6):
    input_dtype = x.dtype
    hidden_states = x.to(torch.promote_types(input_dtype, torch.float32))  # float64 stays float64
    variance = hidden_states.square().mean(dim=-1, keepdim=True)
    normed = hidden_states * torch.rsqrt(variance + eps)
    return weight * normed.to(input_dtype)
''', "RMSNorm": '''
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps
        self.variance_epsilon = eps  # the name transformers uses

    def forward(self, hidden_states):
        return rms_norm(hidden_states, self.weight, self.variance_epsilon)

    def extra_repr(self):
        return f"{tuple(self.weight.shape)}, eps={self.variance_epsilon}"
'''})

EX5_T5 = Honest("ex5-t5-layernorm", EX5,
    "T5's LayerNorm (T5LayerNorm in transformers' models/t5/modeling_t5.py): no mean, no bias, the variance "
    "accumulated in float32, the result converted to the weight's dtype when that is half precision",
    {"rms_norm": '''
def rms_norm(x, weight, eps=1e-6):
    # the variance in (at least) float32, whatever x's dtype
    variance = x.to(torch.promote_types(x.dtype, torch.float32)).pow(2).mean(-1, keepdim=True)
    hidden_states = x * torch.rsqrt(variance + eps)
    # back to half precision when the weight is
    if weight.dtype in [torch.float16, torch.bfloat16]:
        hidden_states = hidden_states.to(weight.dtype)
    return weight * hidden_states
''', "RMSNorm": '''
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        """RMSNorm as T5 uses it: a learned scale only, and the mean is left in."""
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, hidden_states):
        return rms_norm(hidden_states, self.weight, self.eps)
'''})

EX5_LLAMA2C = Honest("ex5-llama2c-sum-of-squares", EX5,
    "llama2.c's rmsnorm (run.c, github.com/karpathy/llama2.c) step by step: ss = sum of squares, ss /= size, "
    "ss += eps, ss = 1 / sqrt(ss), o = weight * (ss * x); computed in float32 for half inputs, one cast at the end",
    {"rms_norm": '''
def rms_norm(x, weight, eps=1e-6):
    compute = torch.float32 if x.element_size() < 4 else x.dtype
    xs = x.to(compute)
    size = xs.shape[-1]
    ss = (xs * xs).sum(dim=-1, keepdim=True)  # run.c's ss, one per row
    ss = ss / size
    ss = ss + eps
    ss = 1.0 / torch.sqrt(ss)
    o = weight.to(compute) * (ss * xs)
    return o.to(x.dtype)
''', "RMSNorm": '''
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.dim = dim
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)
'''})

EX5_STUDENT_CACHE = Honest("ex5-student-lru-cache-dataclass", EX5,
    "student notebook: functools.lru_cache on a dtype helper, a dataclass for the settings, type hints, "
    "logging, prints of tensors inside rms_norm and forward, inspect.signature, a cell comparing with "
    "F.rms_norm and nn.RMSNorm",
    {"rms_norm": '''
import logging
from dataclasses import dataclass
from functools import lru_cache

logging.basicConfig(level=logging.INFO)


@dataclass(frozen=True)
class NormSettings:
    eps: float = 1e-6
    upcast: tuple = (torch.float16, torch.bfloat16)


@lru_cache(maxsize=None)
def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in NormSettings.upcast else dtype


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = NormSettings.eps) -> torch.Tensor:
    xf = x.to(compute_dtype(x.dtype))
    rms = torch.sqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    print("rms:", rms)
    logging.info("rms_norm on %s %s", tuple(x.shape), x.dtype)
    return (xf / rms).to(x.dtype) * weight.to(x.dtype)
''', "RMSNorm": '''
class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.settings = NormSettings(eps=eps)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = rms_norm(x, self.weight, self.eps)
        print(f"RMSNorm({self.weight.shape[0]}) -> {out}")
        return out
'''},
    extra=(("rms_norm", '''
%load_ext autoreload
%autoreload 2
import inspect

print(inspect.signature(rms_norm))
print(compute_dtype.cache_info())
x = torch.randn(3, 8)
w = torch.rand(8)
print(torch.allclose(rms_norm(x, w), F.rms_norm(x, (8,), w, 1e-6), atol=1e-6))
'''), ("RMSNorm", '''
mine, ref = RMSNorm(8), nn.RMSNorm(8, eps=1e-6)
ref.load_state_dict(mine.state_dict())
xb = torch.randn(4, 8)
print((mine(xb) - ref(xb)).abs().max())
''')), student=True)

EX5_STUDENT_EINSUM = Honest("ex5-student-einsum-and-checks", EX5,
    "student notebook: torch.einsum for the mean square, warnings.warn for an unexpected dtype, assert "
    "statements, a gradient check with .backward() against F.rms_norm in a cell, a bfloat16 experiment, "
    "%%time cell magic and a !ls line",
    {"rms_norm": '''
import warnings


def rms_norm(x, weight, eps=1e-6):
    if not x.is_floating_point():
        warnings.warn(f"rms_norm expects floating point input, got {x.dtype}")
    half = x.dtype in (torch.float16, torch.bfloat16)
    xc = x.float() if half else x
    d = xc.shape[-1]
    mean_square = torch.einsum("...d,...d->...", xc, xc).unsqueeze(-1) / d
    y = xc * torch.rsqrt(mean_square + eps)
    assert y.shape == x.shape
    return y.to(x.dtype) * weight.to(x.dtype)
''', "RMSNorm": '''
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return rms_norm(x, self.weight, eps=self.eps)
'''},
    extra=(("rms_norm", '''
%%time
xg = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
wg = torch.rand(6, dtype=torch.float64, requires_grad=True)
rms_norm(xg, wg).sum().backward()
mine_x, mine_w = xg.grad.clone(), wg.grad.clone()
xg.grad = None
wg.grad = None
F.rms_norm(xg, (6,), wg, 1e-6).sum().backward()
print(torch.allclose(mine_x, xg.grad), torch.allclose(mine_w, wg.grad))
'''), ("rms_norm", '''
!ls -la
big = torch.full((2, 16), 300.0, dtype=torch.float16)
print(rms_norm(big, torch.ones(16, dtype=torch.float16)))
print(rms_norm(torch.randn(2, 16).bfloat16(), torch.ones(16, dtype=torch.bfloat16)).dtype)
''')), student=True)


EX5_TORCHSCRIPT = Honest("ex5-modelcenter-torchscript-rms", EX5,
    "OpenBMB ModelCenter's rms_layernorm, a @torch.jit.script function that keeps the old dtype, takes the "
    "variance of x in float32 and multiplies by rsqrt(variance + eps) (github.com/OpenBMB/ModelCenter, "
    "model_center/layer/layernorm.py), adapted so float64 stays float64; the module laid out as torchtune's "
    "RMSNorm (normalized_shape kept, github.com/pytorch/torchtune, torchtune/modules/rms_norm.py) with the "
    "contract's weight",
    {"rms_norm": '''
@torch.jit.script
def rms_layernorm(hidden: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    old_dtype = hidden.dtype
    if old_dtype == torch.float16 or old_dtype == torch.bfloat16:
        hidden = hidden.to(torch.float32)
    variance = hidden.pow(2).mean(dim=-1, keepdim=True)
    hidden = (hidden * torch.rsqrt(variance + eps)).to(old_dtype)
    return hidden * weight.to(old_dtype)


def rms_norm(x, weight, eps=1e-6):
    return rms_layernorm(x, weight, float(eps))
''', "RMSNorm": '''
class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.normalized_shape = (dim,)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)
'''})


# --- ex6_beyond_norm: batch_norm_forward / batch_norm_backward, ReZeroBlock, DyT ---------------------------

EX6 = "ex6_beyond_norm"

EX6_CS231N = Honest("ex6-cs231n-backward-alt", EX6,
    "CS231n assignment 2 batchnorm_forward (training mode) and batchnorm_backward_alt, the simplified "
    "backward in one expression (cs231n.github.io); ReZero as in the authors' RZTXEncoderLayer, src = src + "
    "resweight * src2, with a scalar weight (github.com/majumderb/rezero); DyT as in the authors' "
    "DynamicTanh, alpha = ones * alpha_init_value, tanh first then weight and bias, extra_repr, and their "
    "swap of every LayerNorm for a DyT tried in an extra cell (github.com/jiachenzhu/DyT)",
    {"batch_norm_forward_backward": '''
def batch_norm_forward(x, gamma, beta, eps=1e-5):
    N, D = x.shape
    sample_mean = x.mean(dim=0)
    sample_var = x.var(dim=0, unbiased=False)
    std = torch.sqrt(sample_var + eps)
    x_norm = (x - sample_mean) / std
    out = gamma * x_norm + beta
    cache = (x, x_norm, sample_mean, sample_var, std, gamma, eps)
    return out, cache


def batch_norm_backward(dout, cache):
    x, x_norm, mean, var, std, gamma, eps = cache
    N = dout.shape[0]
    dbeta = dout.sum(dim=0)
    dgamma = (dout * x_norm).sum(dim=0)
    dx_norm = dout * gamma
    dx = (1.0 / N) / std * (N * dx_norm - dx_norm.sum(dim=0) - x_norm * (dx_norm * x_norm).sum(dim=0))
    return dx, dgamma, dbeta
''', "ReZeroBlock": '''
class ReZeroBlock(nn.Module):
    def __init__(self, sublayer):
        super().__init__()
        self.sublayer = sublayer
        self.alpha = nn.Parameter(torch.zeros(()))  # the residual weight, one scalar starting at 0

    def forward(self, src):
        src2 = self.sublayer(src)
        src = src + self.alpha * src2
        return src
''', "DyT": '''
class DyT(nn.Module):
    def __init__(self, dim, alpha_init=0.5):
        super().__init__()
        self.normalized_shape = dim
        self.alpha_init_value = alpha_init
        self.alpha = nn.Parameter(torch.ones(()) * alpha_init)
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        x = torch.tanh(self.alpha * x)
        return x * self.weight + self.bias

    def extra_repr(self):
        return f"dim={self.normalized_shape}, alpha_init={self.alpha_init_value}"
'''},
    extra=(("DyT", '''
def swap_layernorms(model):
    """A DyT of the same width wherever the model has an nn.LayerNorm (the DyT authors' recipe)."""
    if isinstance(model, nn.LayerNorm):
        return DyT(model.normalized_shape[-1])
    for name, child in list(model.named_children()):
        model.add_module(name, swap_layernorms(child))
    return model


model = swap_layernorms(nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 8)))
print(model)
'''),))

EX6_STAGED = Honest("ex6-staged-graph-and-gated-branch", EX6,
    "Kratzert's computational-graph BatchNorm forward and its backward steps 9 to 0 "
    "(kratzert.github.io, 2016); ReZero as x-transformers' ReZero wrapper, the branch scaled by a "
    "zero-initialised gate and the residual added outside (github.com/lucidrains/x-transformers); DyT with the "
    "authors' channels_last switch (channels first broadcasts weight and bias over H and W)",
    {"batch_norm_forward_backward": '''
def batch_norm_forward(x, gamma, beta, eps=1e-5):
    N, D = x.shape
    mu = 1.0 / N * x.sum(dim=0)          # step 1
    xmu = x - mu                          # step 2
    sq = xmu ** 2                         # step 3
    var = 1.0 / N * sq.sum(dim=0)         # step 4
    sqrtvar = torch.sqrt(var + eps)       # step 5
    ivar = 1.0 / sqrtvar                  # step 6
    xhat = xmu * ivar                     # step 7
    gammax = gamma * xhat                 # step 8
    out = gammax + beta                   # step 9
    cache = (xhat, gamma, xmu, ivar, sqrtvar, var, eps)
    return out, cache


def batch_norm_backward(dout, cache):
    xhat, gamma, xmu, ivar, sqrtvar, var, eps = cache
    N, D = dout.shape
    dbeta = dout.sum(dim=0)                    # step 9: out = gammax + beta
    dgamma = (dout * xhat).sum(dim=0)          # step 8: gammax = gamma * xhat
    dxhat = dout * gamma
    divar = (dxhat * xmu).sum(dim=0)           # step 7: xhat = xmu * ivar
    dxmu1 = dxhat * ivar
    dsqrtvar = -divar / sqrtvar.square()       # step 6: ivar = 1 / sqrtvar
    dvar = dsqrtvar / (2 * torch.sqrt(var + eps))  # step 5: sqrtvar = sqrt(var + eps)
    dsq = dvar.expand(N, D) / N                # step 4: var = mean of sq over the batch
    dxmu2 = 2 * xmu * dsq                      # step 3: sq = xmu ** 2
    dx1 = dxmu1 + dxmu2                        # step 2: xmu = x - mu
    dmu = -dx1.sum(dim=0)
    dx2 = dmu.expand(N, D) / N                 # step 1: mu = mean of x over the batch
    dx = dx1 + dx2                             # step 0: the two paths to x
    return dx, dgamma, dbeta
''', "ReZeroBlock": '''
class ReZeroBlock(nn.Module):
    def __init__(self, sublayer):
        super().__init__()
        self.sublayer = sublayer
        self.alpha = nn.Parameter(torch.tensor(0.0))

    def gated(self, x):
        return self.sublayer(x) * self.alpha

    def forward(self, x):
        return x + self.gated(x)
''', "DyT": '''
class DyT(nn.Module):
    def __init__(self, dim, alpha_init=0.5, channels_last=True):
        super().__init__()
        self.channels_last = channels_last
        self.alpha = nn.Parameter(torch.full((), float(alpha_init)))
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        shape = (-1,) if self.channels_last else (-1, 1, 1)  # (..., C) or (N, C, H, W)
        return torch.tanh(self.alpha * x) * self.weight.view(shape) + self.bias.view(shape)
'''})

EX6_MAKEMORE = Honest("ex6-makemore-backprop-ninja", EX6,
    "Karpathy's 'Becoming a Backprop Ninja' (makemore part 4): bnmeani, bndiff, bndiff2, bnvar, bnvar_inv, "
    "bnraw, and the one-line dhprebn backward, with the biased variance the contract asks for instead of "
    "makemore's n - 1 (github.com/karpathy/nn-zero-to-hero); ReZero and DyT written straight from the "
    "papers' equations x + alpha * F(x) and weight * tanh(alpha * x) + bias",
    {"batch_norm_forward_backward": '''
def batch_norm_forward(x, gamma, beta, eps=1e-5):
    n = x.shape[0]
    bnmeani = 1 / n * x.sum(0, keepdim=True)
    bndiff = x - bnmeani
    bndiff2 = bndiff ** 2
    bnvar = 1 / n * bndiff2.sum(0, keepdim=True)  # biased: divide by n
    bnvar_inv = (bnvar + eps) ** -0.5
    bnraw = bndiff * bnvar_inv
    out = gamma * bnraw + beta
    return out, (bnraw, bnvar_inv, gamma)


def batch_norm_backward(dout, cache):
    bnraw, bnvar_inv, bngain = cache
    n = dout.shape[0]
    dbnbias = dout.sum(0)
    dbngain = (bnraw * dout).sum(0)
    dx = bngain * bnvar_inv / n * (n * dout - dout.sum(0) - bnraw * (dout * bnraw).sum(0))
    return dx, dbngain, dbnbias
''', "ReZeroBlock": '''
class ReZeroBlock(nn.Module):
    def __init__(self, sublayer: nn.Module):
        super().__init__()
        self.sublayer = sublayer
        self.alpha = nn.Parameter(torch.zeros([]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x_{i+1} = x_i + alpha_i * F(x_i)
        return x + self.alpha * self.sublayer(x)
''', "DyT": '''
class DyT(nn.Module):
    def __init__(self, dim: int, alpha_init: float = 0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # DyT(x) = gamma * tanh(alpha * x) + beta
        return self.weight * torch.tanh(self.alpha * x) + self.bias
'''})

EX6_LLMC = Honest("ex6-llmc-style-recompute", EX6,
    "llm.c's LayerNorm backward pattern (doc/layernorm/layernorm.md, github.com/karpathy/llm.c) moved to the "
    "batch axis: cache = (x, w, mean, rstd), norm recomputed in the backward, dnorm = dout * w, dx *= rstd; "
    "ReZero and DyT as small nn.Modules with type hints and a repr",
    {"batch_norm_forward_backward": '''
def batch_norm_forward(x, gamma, beta, eps=1e-5):
    N = x.size(0)
    mean = x.sum(0, keepdim=True) / N  # (1, D)
    xshift = x - mean
    var = (xshift ** 2).sum(0, keepdim=True) / N
    rstd = (var + eps) ** -0.5  # (1, D)
    out = xshift * rstd * gamma + beta
    return out, (x, gamma, mean, rstd)


def batch_norm_backward(dout, cache):
    x, w, mean, rstd = cache
    norm = (x - mean) * rstd
    db = dout.sum(0)
    dw = (dout * norm).sum(0)
    dnorm = dout * w
    dx = dnorm - dnorm.mean(0, keepdim=True) - norm * (dnorm * norm).mean(0, keepdim=True)
    dx *= rstd
    return dx, dw, db
''', "ReZeroBlock": '''
class ReZeroBlock(nn.Module):
    def __init__(self, sublayer: nn.Module) -> None:
        super().__init__()
        self.sublayer = sublayer
        self.alpha = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        branch = self.sublayer(x)
        return torch.addcmul(x, self.alpha, branch)

    def extra_repr(self) -> str:
        return "alpha starts at 0"
''', "DyT": '''
class DyT(nn.Module):
    def __init__(self, dim: int, alpha_init: float = 0.5) -> None:
        super().__init__()
        self.dim = dim
        self.alpha = nn.Parameter(torch.ones(()) * alpha_init)
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addcmul(self.bias, self.weight, torch.tanh(self.alpha * x))

    def extra_repr(self) -> str:
        return f"{self.dim}, alpha={self.alpha.item():.3f}"
'''})

EX6_STUDENT = Honest("ex6-student-checks-by-hand", EX6,
    "student notebook: prints inside the forward and backward, the upstream gradient named signal, asserts, "
    "a numpy round trip at cell level, a cell comparing with F.batch_norm and its autograd gradients "
    "(.backward()), torch.autograd.gradcheck on DyT, %timeit",
    {"batch_norm_forward_backward": '''
def batch_norm_forward(x, gamma, beta, eps=1e-5):
    mean = x.mean(0)
    var = ((x - mean) ** 2).mean(0)
    x_hat = (x - mean) / torch.sqrt(var + eps)
    print("forward:", x.shape, "mean", mean, "var", var)
    return gamma * x_hat + beta, (x_hat, gamma, torch.sqrt(var + eps))


def batch_norm_backward(dout, cache):
    x_hat, gamma, std = cache
    assert dout.shape == x_hat.shape, (dout.shape, x_hat.shape)
    N = dout.shape[0]
    signal = dout * gamma  # gradient arriving at x_hat
    dx = (signal - signal.mean(0) - x_hat * (signal * x_hat).mean(0)) / std
    dgamma = (dout * x_hat).sum(0)
    dbeta = dout.sum(0)
    print(f"backward: dx={dx}\\ndgamma={dgamma}\\ndbeta={dbeta}")
    assert dgamma.shape == gamma.shape
    return dx, dgamma, dbeta
''', "ReZeroBlock": '''
class ReZeroBlock(nn.Module):
    def __init__(self, sublayer):
        super().__init__()
        self.sublayer = sublayer
        self.alpha = nn.Parameter(torch.zeros(()))
        print("alpha starts at", self.alpha)

    def forward(self, x):
        return x + self.alpha * self.sublayer(x)
''', "DyT": '''
class DyT(nn.Module):
    def __init__(self, dim, alpha_init=0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor(alpha_init, dtype=torch.float32))
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        y = self.weight * torch.tanh(self.alpha * x) + self.bias
        print(f"DyT alpha={self.alpha.item():.3f} out={y}")
        return y
'''},
    extra=(("batch_norm_forward_backward", '''
import numpy as np

rng = np.random.default_rng(0)
x = torch.from_numpy(rng.normal(size=(6, 4)))
gamma, beta = torch.ones(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
out, cache = batch_norm_forward(x, gamma, beta)
print(out.numpy().mean(axis=0).round(6), out.numpy().std(axis=0).round(3))
'''), ("batch_norm_forward_backward", '''
# compare with PyTorch and its autograd
xr = x.clone().requires_grad_()
gr, br = gamma.clone().requires_grad_(), beta.clone().requires_grad_()
ref = F.batch_norm(xr, None, None, gr, br, training=True)
dout = torch.randn_like(ref)
ref.backward(dout)
with torch.no_grad():
    dx, dgamma, dbeta = batch_norm_backward(dout, cache)
print(torch.allclose(out, ref), torch.allclose(dx, xr.grad), torch.allclose(dgamma, gr.grad))
%timeit batch_norm_backward(dout, cache)
'''), ("DyT", '''
dyt = DyT(3).double()
xd = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
print(torch.autograd.gradcheck(dyt, (xd,)))
''')), student=True)


EX6_TORCHSCRIPT = Honest("ex6-torchscript-dyt-namedtuple-cache", EX6,
    "DyT's forward as a @torch.jit.script function called by the module, the way timm wraps its scripted "
    "activations (github.com/huggingface/pytorch-image-models, timm/layers/activations_jit.py) and the DyT "
    "authors' parameters (alpha, weight, bias; github.com/jiachenzhu/DyT, dynamic_tanh.py); the batch-norm "
    "cache a typing.NamedTuple with string annotations; ReZero written with type hints",
    {"batch_norm_forward_backward": '''
from typing import NamedTuple, Tuple


class BNCache(NamedTuple):
    x_hat: "torch.Tensor"  # (N, D)
    inv_std: "torch.Tensor"  # (D,)
    gamma: "torch.Tensor"  # (D,)


def batch_norm_forward(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor,
                       eps: float = 1e-5) -> Tuple[torch.Tensor, BNCache]:
    mean = x.mean(dim=0)
    var = ((x - mean) ** 2).mean(dim=0)
    inv_std = (var + eps).rsqrt()
    x_hat = (x - mean) * inv_std
    return gamma * x_hat + beta, BNCache(x_hat, inv_std, gamma)


def batch_norm_backward(dout: torch.Tensor, cache: BNCache) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x_hat, inv_std, gamma = cache
    dbeta = dout.sum(dim=0)
    dgamma = (dout * x_hat).sum(dim=0)
    g = dout * gamma
    dx = inv_std * (g - g.mean(dim=0) - x_hat * (g * x_hat).mean(dim=0))
    return dx, dgamma, dbeta
''', "ReZeroBlock": '''
class ReZeroBlock(nn.Module):
    def __init__(self, sublayer: nn.Module) -> None:
        super().__init__()
        self.sublayer = sublayer
        self.alpha = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.alpha * self.sublayer(x)
''', "DyT": '''
@torch.jit.script
def dynamic_tanh(x: torch.Tensor, alpha: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return weight * torch.tanh(alpha * x) + bias


class DyT(nn.Module):
    def __init__(self, dim: int, alpha_init: float = 0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dynamic_tanh(x, self.alpha, self.weight, self.bias)
'''})

EX6_SCRIPTED_MODULES = Honest("ex6-torchscript-scripted-modules", EX6,
    "modules written so that torch.jit.script compiles them (typed forward, no Python-only constructs) and "
    "scripted in a cell of their own, then compared with the eager modules, as the Introduction to "
    "TorchScript tutorial does with its MyCell (pytorch.org/tutorials/beginner/Intro_to_TorchScript_tutorial"
    ".html); batch norm's backward as the one-expression batchnorm_backward_alt of CS231n (cs231n.github.io); "
    "ReZero's scalar written as the authors' resweight (github.com/majumderb/rezero)",
    {"batch_norm_forward_backward": """
def batch_norm_forward(x, gamma, beta, eps=1e-5):
    mu = x.mean(0)
    var = x.var(0, unbiased=False)
    std = torch.sqrt(var + eps)
    x_norm = (x - mu) / std
    return gamma * x_norm + beta, (x_norm, std, gamma)


def batch_norm_backward(dout, cache):
    x_norm, std, gamma = cache
    n = dout.shape[0]
    dgamma = (dout * x_norm).sum(0)
    dbeta = dout.sum(0)
    dx_norm = dout * gamma
    dx = (n * dx_norm - dx_norm.sum(0) - x_norm * (dx_norm * x_norm).sum(0)) / (n * std)
    return dx, dgamma, dbeta
""", "ReZeroBlock": """
class ReZeroBlock(nn.Module):
    def __init__(self, sublayer: nn.Module):
        super().__init__()
        self.sublayer = sublayer
        self.alpha = nn.Parameter(torch.Tensor([0]).squeeze())

    def forward(self, src: torch.Tensor) -> torch.Tensor:
        return src + self.alpha * self.sublayer(src)
""", "DyT": """
class DyT(nn.Module):
    def __init__(self, dim: int, alpha_init: float = 0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(()) * alpha_init)
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * torch.tanh(self.alpha * x) + self.bias
"""},
    extra=(("DyT", """
torch.manual_seed(0)
eager = nn.Sequential(ReZeroBlock(nn.Linear(8, 8)), DyT(8))
scripted = torch.jit.script(eager)
print(scripted.code)
x = torch.randn(3, 8)
assert torch.allclose(scripted(x), eager(x))
"""),))


CORPUS: tuple[Honest, ...] = (
    EX1_TORCHVISION, EX1_D2L, EX1_ORDEREDDICT, EX1_STUDENT_PRINTS, EX1_STUDENT_INSPECT,
    EX1_SEQUENTIAL_SUBCLASS, EX1_CASTED_LINEAR,
    EX2_CS231N, EX2_STAGED, EX2_LLMC, EX2_TRANSPOSE, EX2_PAPER, EX2_STUDENT_PRINTS, EX2_STUDENT_NAMES,
    EX2_TORCHSCRIPT, EX2_CONVNEXT,
    EX3_D2L, EX3_MAKEMORE, EX3_CS231N, EX3_LERP, EX3_STUDENT,
    EX4_TORCH_LAYER, EX4_NANOGPT, EX4_ANNOTATED, EX4_BERT, EX4_STUDENT, EX4_CONTAINER_SUBCLASSES,
    EX5_META, EX5_HF, EX5_T5, EX5_LLAMA2C, EX5_STUDENT_CACHE, EX5_STUDENT_EINSUM, EX5_TORCHSCRIPT,
    EX6_CS231N, EX6_STAGED, EX6_MAKEMORE, EX6_LLMC, EX6_STUDENT, EX6_TORCHSCRIPT, EX6_SCRIPTED_MODULES,
)
BY_NAME = {entry.name: entry for entry in CORPUS}
