"""Wrong (and differently right) RMSNorm implementations for ex5's hidden suite.

Mistakes already in ``tests/mistakes.py`` (re-centring, sum instead of mean, no float32
upcast, float32 output for half inputs, float64 computed in float32, a module that does
not pass eps on) are not repeated here. A forbidden built-in inside ``rms_norm`` itself is
not listed: task 2's module calls ``rms_norm`` by contract, so it would (rightly) cost
task 2 as well; the same tricks are listed in the module's cell instead.
"""

import textwrap

from tests.catalogue import Right, Wrong

A = "ex5_rmsnorm"

# Task 2's reference __init__, for entries that change only forward.
MODULE_INIT = '''
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
'''


def module(forward: str) -> str:
    """The reference __init__ and a forward whose body is ``forward`` (written without indentation)."""
    body = textwrap.indent(textwrap.dedent(forward).strip() + "\n", " " * 8)
    return MODULE_INIT + "\n    def forward(self, x):\n" + body


def rms_norm_with(statistics: str) -> str:
    """An rms_norm with the float32 upcast, whose normalization line is ``statistics`` (on xc)."""
    return f'''
def rms_norm(x, weight, eps=1e-6):
    xc = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    y = {statistics} * weight.to(xc.dtype)
    return y.to(x.dtype)
'''


WRONG = [
    # --- task 1: rms_norm -----------------------------------------------------------------
    Wrong(A, "rms_norm", "eps-outside-the-root", rms_norm_with(
        "xc / (xc.pow(2).mean(-1, keepdim=True).sqrt() + eps)")),
    Wrong(A, "rms_norm", "sqrt-without-eps", rms_norm_with(
        "xc / xc.pow(2).mean(-1, keepdim=True).sqrt()")),
    Wrong(A, "rms_norm", "eps-argument-replaced-by-a-constant", rms_norm_with(
        "xc / torch.sqrt(xc.pow(2).mean(-1, keepdim=True) + 1e-6)")),
    Wrong(A, "rms_norm", "mean-square-over-every-element", rms_norm_with(
        "xc / torch.sqrt(xc.pow(2).mean() + eps)")),
    Wrong(A, "rms_norm", "mean-square-over-dim-1-only-right-for-2-d", rms_norm_with(
        "xc / torch.sqrt(xc.pow(2).mean(1, keepdim=True) + eps)")),
    Wrong(A, "rms_norm", "root-of-the-mean-absolute-value", rms_norm_with(
        "xc / torch.sqrt(xc.abs().mean(-1, keepdim=True) + eps)")),
    Wrong(A, "rms_norm", "ignores-the-weight", '''
def rms_norm(x, weight, eps=1e-6):
    xc = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    return (xc / torch.sqrt(xc.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
'''),
    Wrong(A, "rms_norm", "upcasts-float16-but-not-bfloat16", '''
def rms_norm(x, weight, eps=1e-6):
    xc = x.float() if x.dtype == torch.float16 else x
    y = xc / torch.sqrt(xc.pow(2).mean(-1, keepdim=True) + eps) * weight.to(xc.dtype)
    return y.to(x.dtype)
'''),
    Wrong(A, "rms_norm", "statistics-in-float32-normalization-in-half", '''
def rms_norm(x, weight, eps=1e-6):
    ms = x.float().pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(ms + eps).to(x.dtype) * weight
'''),
    Wrong(A, "rms_norm", "always-casts-back-to-float16", '''
def rms_norm(x, weight, eps=1e-6):
    if x.dtype in (torch.float16, torch.bfloat16):
        xc = x.float()
        return (xc / torch.sqrt(xc.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).half()
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
'''),
    Wrong(A, "rms_norm", "modifies-x-in-place", '''
def rms_norm(x, weight, eps=1e-6):
    if x.dtype in (torch.float16, torch.bfloat16):
        xc = x.float()
        return (xc / torch.sqrt(xc.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
    x /= torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x * weight
'''),
    Wrong(A, "rms_norm", "mean-square-detached-from-the-graph", rms_norm_with(
        "xc / torch.sqrt(xc.pow(2).mean(-1, keepdim=True).detach() + eps)")),
    # --- task 2: RMSNorm ------------------------------------------------------------------
    Wrong(A, "RMSNorm", "eps-replaced-by-the-default", '''
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = 1e-6
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)
'''),
    Wrong(A, "RMSNorm", "plain-tensor-not-a-parameter", '''
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = torch.ones(dim)

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)
'''),
    Wrong(A, "RMSNorm", "buffer-not-a-parameter", '''
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", torch.ones(dim))

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)
'''),
    Wrong(A, "RMSNorm", "parameter-named-scale", '''
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return rms_norm(x, self.scale, self.eps)
'''),
    Wrong(A, "RMSNorm", "adds-a-bias-like-layernorm", '''
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps) + self.bias
'''),
    Wrong(A, "RMSNorm", "weight-initialized-to-zeros", '''
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)
'''),
    Wrong(A, "RMSNorm", "forward-returns-float32",
          module('return rms_norm(x.float(), self.weight.float(), self.eps)')),
    Wrong(A, "RMSNorm", "forward-re-centres-before-rms-norm",
          module('return rms_norm(x - x.mean(-1, keepdim=True), self.weight, self.eps)')),
    Wrong(A, "RMSNorm", "subclasses-nn-rmsnorm", '''
class RMSNorm(nn.RMSNorm):
    def __init__(self, dim, eps=1e-6):
        super().__init__(dim, eps=eps)
'''),
    Wrong(A, "RMSNorm", "forward-reaches-f-rms-norm-through-getattr",
          module('return getattr(F, "rms_" + "norm")(x, x.shape[-1:], self.weight, self.eps)')),
    Wrong(A, "RMSNorm", "forward-calls-torch-rms-norm",
          module('return torch.rms_norm(x, [x.shape[-1]], self.weight, self.eps)')),
    Wrong(A, "RMSNorm", "forward-calls-torch-ops-aten-rms-norm",
          module('return torch.ops.aten.rms_norm(x, [x.shape[-1]], self.weight, self.eps)')),
    Wrong(A, "RMSNorm", "forward-layer-norm-of-x-and-minus-x", module('''
        both = torch.cat([x, -x], dim=-1)  # mean 0, variance mean(x**2)
        d = x.shape[-1]
        return F.layer_norm(both, (2 * d,), eps=self.eps)[..., :d] * self.weight
''')),
]

RIGHT = [
    Right(A, "rms_norm", "rsqrt-of-pow-mean", '''
def rms_norm(x, weight, eps=1e-6):
    dtype = x.dtype
    if dtype in (torch.float16, torch.bfloat16):
        x, weight = x.to(torch.float32), weight.to(torch.float32)
    return (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight).to(dtype)
'''),
    Right(A, "rms_norm", "llama-style-weight-applied-in-x-dtype", '''
def rms_norm(x, weight, eps=1e-6):
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return normed.type_as(x) * weight
'''),
    Right(A, "rms_norm", "vector-norm-over-root-d", '''
def rms_norm(x, weight, eps=1e-6):
    compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    xc = x.to(compute)
    d = xc.shape[-1]
    mean_square = torch.linalg.vector_norm(xc, dim=-1, keepdim=True) ** 2 / d
    return (xc / (mean_square + eps).sqrt() * weight.to(compute)).to(x.dtype)
'''),
    Right(A, "RMSNorm", "register-parameter-and-full", '''
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.dim = dim
        self.eps = float(eps)
        self.register_parameter("weight", nn.Parameter(torch.full((dim,), 1.0)))

    def forward(self, x):
        return rms_norm(x, weight=self.weight, eps=self.eps)
'''),
]
