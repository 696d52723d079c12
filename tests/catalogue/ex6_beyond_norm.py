"""ex6_beyond_norm: wrong and differently-right versions of the three graded cells.

Most BatchNorm mistakes are one edit of a correct cell (``BN``, the reference of ``tests/mistakes.py``,
one statement per line so that an edit names exactly what changed); the module mistakes are edits of ``REZERO`` and
``DYT``. Mistakes the public self-checks already catch are in ``tests/mistakes.py`` (a dx
without its mean or variance term, dgamma summed over the features, unbiased variance, eps
outside the root, dout modified in place, autograd in the backward; alpha starting at 1 or a
vector, x scaled instead of the branch; DyT's alpha as a vector, weight and bias of the wrong
shape, a normalization before the tanh) and are not repeated here.
"""

from tests.catalogue import Right, Wrong
from tests.mistakes import EX6_BN, EX6_DYT, EX6_REZERO

A = "ex6_beyond_norm"

BN, REZERO, DYT = EX6_BN, EX6_REZERO, EX6_DYT  # the references of tests/mistakes.py


def edited(source: str, *edits: tuple[str, str]) -> str:
    """``source`` with each (old, new) edit applied; every old text must occur exactly once."""
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return source


def bn(what: str, *edits: tuple[str, str]) -> Wrong:
    return Wrong(A, "batch_norm_forward_backward", what, edited(BN, *edits))


def rezero(what: str, *edits: tuple[str, str]) -> Wrong:
    return Wrong(A, "ReZeroBlock", what, edited(REZERO, *edits))


def dyt(what: str, *edits: tuple[str, str]) -> Wrong:
    return Wrong(A, "DyT", what, edited(DYT, *edits))


WRONG = [
    # --- batch_norm_forward / batch_norm_backward: the forward ---------------------------------
    bn("statistics-over-the-features", ("mean = x.mean(0)", "mean = x.mean(1, keepdim=True)"),
       ("var = x.var(0, unbiased=False)", "var = x.var(1, unbiased=False, keepdim=True)")),
    bn("eps-argument-ignored", ("torch.sqrt(var + eps)", "torch.sqrt(var + 1e-5)")),
    bn("eps-left-out", ("torch.sqrt(var + eps)", "torch.sqrt(var)")),
    bn("gamma-and-beta-swapped", ("out = x_hat * gamma + beta", "out = x_hat * beta + gamma")),
    bn("forward-modifies-x-in-place", ("x_hat = (x - mean) * inv_std", "x_hat = x.sub_(mean).mul_(inv_std)")),
    # --- the backward ------------------------------------------------------------------------------
    bn("dx-misses-both-statistics-terms", ("dx = inv_std * (g - g.mean(0) - x_hat * (g * x_hat).mean(0))",
                                           "dx = inv_std * g")),
    bn("dx-forgets-gamma", ("g = dout * gamma", "g = dout")),
    bn("dx-mean-term-divides-by-n-minus-1",
       ("dx = inv_std * (g - g.mean(0) - x_hat * (g * x_hat).mean(0))",
        "dx = inv_std * (g - g.sum(0) / (g.shape[0] - 1) - x_hat * (g * x_hat).mean(0))")),
    bn("dx-variance-term-without-x_hat",
       ("dx = inv_std * (g - g.mean(0) - x_hat * (g * x_hat).mean(0))",
        "dx = inv_std * (g - g.mean(0) - (g * x_hat).mean(0))")),
    bn("dx-variance-term-with-a-factor-of-two",
       ("dx = inv_std * (g - g.mean(0) - x_hat * (g * x_hat).mean(0))",
        "dx = inv_std * (g - g.mean(0) - 2 * x_hat * (g * x_hat).mean(0))")),
    bn("dgamma-is-dout-times-x-hat-without-the-sum", ("dgamma = (dout * x_hat).sum(0)", "dgamma = (dout * x_hat)[0]")),
    bn("dgamma-uses-the-output-not-x_hat",
       ("dgamma = (dout * x_hat).sum(0)", "dgamma = (dout * (x_hat * gamma)).sum(0)")),
    bn("dbeta-is-a-mean", ("dbeta = dout.sum(0)", "dbeta = dout.mean(0)")),
    bn("backward-modifies-the-cache-in-place",
       ("g = dout * gamma", "g = dout * gamma\n    gx = (g * x_hat).mean(0)\n    x_hat *= gx"),
       ("x_hat * (g * x_hat).mean(0)", "x_hat")),
    bn("backward-ignores-the-cached-eps",
       ("return out, (x_hat, inv_std, gamma)", "return out, (x_hat, x, gamma)"),
       ("x_hat, inv_std, gamma = cache",
        "x_hat, x, gamma = cache\n    inv_std = 1 / torch.sqrt(x.var(0, unbiased=False) + 1e-5)")),
    bn("backward-through-a-backward-call", ("dx = inv_std * (g - g.mean(0) - x_hat * (g * x_hat).mean(0))",
                                            """with torch.enable_grad():
        leaf = x_hat.detach().clone().requires_grad_()
        centred = leaf - leaf.mean(0)
        (centred / torch.sqrt((centred ** 2).mean(0) + 1e-12) * gamma).backward(dout)
    dx = leaf.grad * inv_std""")),
    Wrong(A, "batch_norm_forward_backward", "backward-by-torch.func.vjp", BN.replace(
        "def batch_norm_backward(dout, cache):", '''def own_bn(x, gamma, beta, eps):
    mean = x.mean(0)
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean(0) + eps) * gamma + beta


def batch_norm_backward_unused(dout, cache):''') + '''

def batch_norm_backward(dout, cache):
    x, gamma, beta, eps = cache
    from torch.func import vjp
    _, pull = vjp(lambda a, b, c: own_bn(a, b, c, eps), x, gamma, beta)
    return pull(dout)


_forward = batch_norm_forward


def batch_norm_forward(x, gamma, beta, eps=1e-5):
    return _forward(x, gamma, beta, eps)[0], (x, gamma, beta, eps)
'''),
    Wrong(A, "batch_norm_forward_backward", "forward-calls-F.batch_norm", BN.replace(
        "    out = x_hat * gamma + beta\n",
        "    out = F.batch_norm(x, None, None, gamma, beta, training=True, eps=eps)\n")),
    Wrong(A, "batch_norm_forward_backward", "forward-calls-torch.batch_norm", BN.replace(
        "    out = x_hat * gamma + beta\n",
        "    out = torch.batch_norm(x, gamma, beta, None, None, True, 0.1, eps, False)\n")),
    Wrong(A, "batch_norm_forward_backward", "backward-calls-aten-native_batch_norm_backward", BN.replace(
        "return out, (x_hat, inv_std, gamma)", "return out, (x, gamma, x.mean(0), inv_std)").replace(
        '''    x_hat, inv_std, gamma = cache
    dbeta = dout.sum(0)
    dgamma = (dout * x_hat).sum(0)
    g = dout * gamma
    dx = inv_std * (g - g.mean(0) - x_hat * (g * x_hat).mean(0))
    return dx, dgamma, dbeta''', '''    x, gamma, mean, inv_std = cache
    return torch.ops.aten.native_batch_norm_backward(dout, x, gamma, None, None, mean, inv_std, True, 1e-5,
                                                     [True, True, True])''')),
    # --- ReZeroBlock -----------------------------------------------------------------------------
    rezero("rezero-alpha-is-a-plain-tensor", ("nn.Parameter(torch.zeros(()))", "torch.zeros((), requires_grad=True)")),
    rezero("alpha-is-a-frozen-parameter",
           ("nn.Parameter(torch.zeros(()))", "nn.Parameter(torch.zeros(()), requires_grad=False)")),
    rezero("alpha-starts-at-a-small-value", ("torch.zeros(())", "torch.full((), 1e-3)")),
    rezero("alpha-read-with-item", ("x + self.alpha * self.sublayer(x)", "x + self.alpha.item() * self.sublayer(x)")),
    rezero("rezero-alpha-detached",
           ("x + self.alpha * self.sublayer(x)", "x + self.alpha.detach() * self.sublayer(x)")),
    rezero("sublayer-stored-under-another-name", ("self.sublayer = sublayer", "self.branch = sublayer"),
           ("self.sublayer(x)", "self.branch(x)")),
    rezero("sublayer-kept-in-a-plain-list", ("self.sublayer = sublayer", "self.layers = [sublayer]"),
           ("self.sublayer(x)", "self.layers[0](x)")),
    rezero("sublayer-called-twice", ("x + self.alpha * self.sublayer(x)",
                                     "x + self.alpha * self.sublayer(x) + 0 * self.sublayer(x)")),
    rezero("modifies-x-in-place", ("return x + self.alpha * self.sublayer(x)",
                                   "branch = self.alpha * self.sublayer(x)\n        x += branch\n        return x")),
    rezero("gates-the-shortcut-too",
           ("x + self.alpha * self.sublayer(x)", "(1 - self.alpha) * x + self.alpha * self.sublayer(x)")),
    rezero("adds-a-layer-norm-after-the-sum",
           ("return x + self.alpha * self.sublayer(x)",
            "y = x + self.alpha * self.sublayer(x)\n        return F.layer_norm(y, y.shape[-1:])")),
    # --- DyT ---------------------------------------------------------------------------------------
    dyt("alpha-init-ignored", ("torch.tensor(float(alpha_init))", "torch.tensor(0.5)")),
    dyt("dyt-alpha-is-a-plain-tensor", ("nn.Parameter(torch.tensor(float(alpha_init)))",
                                    "torch.tensor(float(alpha_init), requires_grad=True)")),
    dyt("weight-and-bias-initialized-the-wrong-way-round",
        ("nn.Parameter(torch.ones(dim))", "nn.Parameter(torch.zeros(dim))"),
        ("self.bias = nn.Parameter(torch.zeros(dim))", "self.bias = nn.Parameter(torch.ones(dim))")),
    dyt("tanh-without-alpha", ("torch.tanh(self.alpha * x)", "torch.tanh(x)")),
    dyt("alpha-outside-the-tanh", ("torch.tanh(self.alpha * x)", "self.alpha * torch.tanh(x)")),
    dyt("bias-inside-the-tanh", ("self.weight * torch.tanh(self.alpha * x) + self.bias",
                                 "self.weight * torch.tanh(self.alpha * x + self.bias)")),
    dyt("dyt-alpha-detached", ("torch.tanh(self.alpha * x)", "torch.tanh(self.alpha.detach() * x)")),
    dyt("weight-read-as-data", ("self.weight * torch.tanh", "self.weight.data * torch.tanh")),
    dyt("subtracts-the-row-mean",
        ("torch.tanh(self.alpha * x)", "torch.tanh(self.alpha * (x - x.mean(-1, keepdim=True)))")),
    dyt("squashes-in-place", ("return self.weight * torch.tanh(self.alpha * x) + self.bias",
                              "return self.weight * x.mul_(self.alpha).tanh_() + self.bias")),
    dyt("calls-F.layer_norm-before-the-tanh", ("torch.tanh(self.alpha * x)",
                                               "torch.tanh(self.alpha * F.layer_norm(x, x.shape[-1:]))")),
    dyt("calls-F.rms_norm-before-the-tanh", ("torch.tanh(self.alpha * x)",
                                             "torch.tanh(self.alpha * F.rms_norm(x, x.shape[-1:]))")),
]

RIGHT = [
    Right(A, "batch_norm_forward_backward", "three-term-formula-with-sums", '''
def batch_norm_forward(x, gamma, beta, eps=1e-5):
    n = x.shape[0]
    mean = x.sum(0) / n
    centred = x - mean
    var = (centred * centred).sum(0) / n
    std = torch.sqrt(var + eps)
    x_hat = centred / std
    return gamma * x_hat + beta, {"x_hat": x_hat, "std": std, "gamma": gamma, "n": n}


def batch_norm_backward(dout, cache):
    x_hat, std, gamma, n = cache["x_hat"], cache["std"], cache["gamma"], cache["n"]
    dx_hat = dout * gamma
    dx = (n * dx_hat - dx_hat.sum(0) - x_hat * (dx_hat * x_hat).sum(0)) / (n * std)
    return dx, (dout * x_hat).sum(0), dout.sum(0)
'''),
    Right(A, "batch_norm_forward_backward", "staged-chain-rule-through-mean-and-variance", '''
def batch_norm_forward(x, gamma, beta, eps=1e-5):
    mu = x.mean(dim=0)
    xmu = x - mu
    var = (xmu ** 2).mean(dim=0)
    sqrtvar = torch.sqrt(var + eps)
    ivar = 1.0 / sqrtvar
    xhat = xmu * ivar
    return gamma * xhat + beta, (xhat, gamma, xmu, ivar, sqrtvar, var, eps)


def batch_norm_backward(dout, cache):
    xhat, gamma, xmu, ivar, sqrtvar, var, eps = cache
    n = dout.shape[0]
    dbeta = dout.sum(dim=0)
    dgamma = (dout * xhat).sum(dim=0)
    dxhat = dout * gamma
    divar = (dxhat * xmu).sum(dim=0)
    dxmu1 = dxhat * ivar
    dsqrtvar = -divar / sqrtvar ** 2
    dvar = 0.5 / torch.sqrt(var + eps) * dsqrtvar
    dsq = torch.ones_like(dout) / n * dvar
    dxmu2 = 2 * xmu * dsq
    dx1 = dxmu1 + dxmu2
    dmu = -dx1.sum(dim=0)
    dx2 = torch.ones_like(dout) / n * dmu
    return dx1 + dx2, dgamma, dbeta
'''),
    Right(A, "batch_norm_forward_backward", "rsqrt-var_mean-and-a-list-cache", '''
def batch_norm_forward(x, gamma, beta, eps=1e-5):
    var, mean = torch.var_mean(x, dim=0, correction=0)
    rstd = torch.rsqrt(var + eps)
    out = torch.addcmul(beta, (x - mean) * rstd, gamma)
    return out, [x, mean, rstd, gamma]


def batch_norm_backward(dout, cache):
    x, mean, rstd, gamma = cache
    x_hat = (x - mean) * rstd
    g = dout * gamma
    dx = rstd * (g - g.mean(0, keepdim=True) - x_hat * (g * x_hat).mean(0, keepdim=True))
    return dx, torch.einsum("nd,nd->d", dout, x_hat), dout.sum(0)
'''),
    Right(A, "ReZeroBlock", "register_parameter-and-mul-add", '''
class ReZeroBlock(nn.Module):
    def __init__(self, sublayer):
        super().__init__()
        self.add_module("sublayer", sublayer)
        self.register_parameter("alpha", nn.Parameter(torch.tensor(0.0)))

    def forward(self, x):
        return self.sublayer(x).mul(self.alpha).add(x)
'''),
    Right(A, "DyT", "addcmul-and-full", '''
class DyT(nn.Module):
    def __init__(self, dim: int, alpha_init: float = 0.5):
        super().__init__()
        self.alpha = nn.Parameter(torch.full((), alpha_init))
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        return torch.addcmul(self.bias, self.weight, (self.alpha * x).tanh())
'''),
    Right(A, "DyT", "tanh-through-the-sigmoid", '''
class DyT(nn.Module):
    def __init__(self, dim, alpha_init=0.5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))
        self.alpha = nn.Parameter(torch.ones(()) * alpha_init)

    def forward(self, x):
        squashed = 2 * torch.sigmoid(2 * self.alpha * x) - 1  # tanh(z) = 2 sigmoid(2z) - 1
        return squashed * self.weight + self.bias
'''),
]
