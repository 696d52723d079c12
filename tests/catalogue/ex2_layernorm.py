"""Wrong (and differently right) LayerNorm implementations for ex2's hidden suite.

Mistakes already in ``tests/mistakes.py`` (unbiased variance, eps outside the root, wrong
axis, a module that ignores eps, a backward without the statistics terms) are not
repeated here. A forbidden built-in inside ``layer_norm`` itself is not listed: task 2's
module calls ``layer_norm`` by contract, so it would (rightly) cost task 2 as well; the
same tricks are listed in the module's and task 3's cells instead.
"""

import textwrap

from tests.catalogue import Right, Wrong

A = "ex2_layernorm"

# Task 3's reference, for entries that change only one of its two functions.
FORWARD = '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    inv_std = 1.0 / torch.sqrt(var + eps)
    x_hat = (x - mean) * inv_std
    return x_hat * weight + bias, (x_hat, inv_std, weight)
'''

BACKWARD = '''
def layer_norm_backward(dout, cache):
    x_hat, inv_std, weight = cache
    d = x_hat.shape[-1]
    dbias = dout.reshape(-1, d).sum(dim=0)
    dweight = (dout * x_hat).reshape(-1, d).sum(dim=0)
    g = dout * weight
    dx = inv_std * (g - g.mean(dim=-1, keepdim=True) - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))
    return dx, dweight, dbias
'''

# Task 2's reference __init__, for entries that change only forward.
MODULE_INIT = '''
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
'''


def module(forward: str) -> str:
    """The reference __init__ and a forward whose body is ``forward`` (written without indentation)."""
    body = textwrap.indent(textwrap.dedent(forward).strip() + "\n", " " * 8)
    return MODULE_INIT + "\n    def forward(self, x):\n" + body


WRONG = [
    # --- task 1: layer_norm ---------------------------------------------------------------
    Wrong(A, "layer_norm", "eps-ignored", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True)) * weight + bias
'''),
    Wrong(A, "layer_norm", "eps-argument-replaced-by-a-constant", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + 1e-5) * weight + bias
'''),
    Wrong(A, "layer_norm", "weight-and-bias-swapped", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + eps) * bias + weight
'''),
    Wrong(A, "layer_norm", "statistics-over-dim-1-only-right-for-2-d", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(1, keepdim=True)
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean(1, keepdim=True) + eps) * weight + bias
'''),
    Wrong(A, "layer_norm", "statistics-over-every-element", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean()
    return (x - mean) / torch.sqrt(((x - mean) ** 2).mean() + eps) * weight + bias
'''),
    Wrong(A, "layer_norm", "modifies-x-in-place", '''
def layer_norm(x, weight, bias, eps=1e-5):
    x -= x.mean(-1, keepdim=True)
    x /= torch.sqrt((x ** 2).mean(-1, keepdim=True) + eps)
    return x * weight + bias
'''),
    Wrong(A, "layer_norm", "forgets-the-mean", '''
def layer_norm(x, weight, bias, eps=1e-5):
    var = x.var(-1, unbiased=False, keepdim=True)
    return x / torch.sqrt(var + eps) * weight + bias
'''),
    Wrong(A, "layer_norm", "statistics-detached-from-the-graph", '''
def layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True).detach()
    var = x.var(-1, unbiased=False, keepdim=True).detach()
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
'''),
    Wrong(A, "layer_norm", "returns-a-tensor-subclass-claiming-equality", '''
class _Agreeable(torch.Tensor):
    def __eq__(self, other):
        return True

    def allclose(self, *args, **kwargs):
        return True


def layer_norm(x, weight, bias, eps=1e-5):
    return torch.zeros_like(x).as_subclass(_Agreeable)
'''),
    # --- task 2: LayerNorm ----------------------------------------------------------------
    Wrong(A, "LayerNorm", "eps-stored-but-not-passed-on",
          module('return layer_norm(x, self.weight, self.bias)')),
    Wrong(A, "LayerNorm", "eps-not-stored", '''
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias)
'''),
    Wrong(A, "LayerNorm", "plain-tensors-not-parameters", '''
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = torch.ones(normalized_shape)
        self.bias = torch.zeros(normalized_shape)

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)
'''),
    Wrong(A, "LayerNorm", "buffers-not-parameters", '''
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.register_buffer("weight", torch.ones(normalized_shape))
        self.register_buffer("bias", torch.zeros(normalized_shape))

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)
'''),
    Wrong(A, "LayerNorm", "frozen-parameters", '''
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(normalized_shape), requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(normalized_shape), requires_grad=False)

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)
'''),
    Wrong(A, "LayerNorm", "parameters-named-gamma-and-beta", '''
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(normalized_shape))
        self.beta = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x):
        return layer_norm(x, self.gamma, self.beta, self.eps)
'''),
    Wrong(A, "LayerNorm", "parameters-of-shape-1-by-d", '''
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(1, normalized_shape))
        self.bias = nn.Parameter(torch.zeros(1, normalized_shape))

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)
'''),
    Wrong(A, "LayerNorm", "random-initial-weight", '''
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))

    def forward(self, x):
        return layer_norm(x, self.weight, self.bias, self.eps)
'''),
    Wrong(A, "LayerNorm", "module-forward-flattens-the-leading-dimensions",
          module('return layer_norm(x.reshape(-1, x.shape[-1]), self.weight, self.bias, self.eps)')),
    Wrong(A, "LayerNorm", "subclasses-nn-layernorm", '''
class LayerNorm(nn.LayerNorm):
    pass
'''),
    Wrong(A, "LayerNorm", "wraps-an-nn-layernorm", '''
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.norm = nn.LayerNorm(normalized_shape, eps=eps)
        self.weight, self.bias = self.norm.weight, self.norm.bias

    def forward(self, x):
        return self.norm(x)
'''),
    Wrong(A, "LayerNorm", "module-forward-reaches-f-layer-norm-through-getattr",
          module('return getattr(F, "layer_" + "norm")(x, x.shape[-1:], self.weight, self.bias, self.eps)')),
    Wrong(A, "LayerNorm", "module-forward-calls-torch-ops-aten-native-layer-norm",
          module('return torch.ops.aten.native_layer_norm(x, [x.shape[-1]], self.weight, self.bias, self.eps)[0]')),
    # --- task 3: layer_norm_forward / layer_norm_backward ---------------------------------
    Wrong(A, "layer_norm_forward_backward", "forward-unbiased-variance", '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    inv_std = 1.0 / torch.sqrt(x.var(dim=-1, keepdim=True) + eps)
    x_hat = (x - mean) * inv_std
    return x_hat * weight + bias, (x_hat, inv_std, weight)
''' + BACKWARD),
    Wrong(A, "layer_norm_forward_backward", "forward-eps-outside-the-root", '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    inv_std = 1.0 / (x.std(dim=-1, unbiased=False, keepdim=True) + eps)
    x_hat = (x - mean) * inv_std
    return x_hat * weight + bias, (x_hat, inv_std, weight)
''' + BACKWARD),
    Wrong(A, "layer_norm_forward_backward", "unpacks-n-d-from-x-shape", '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    n, d = x.shape
    mean = x.sum(dim=1, keepdim=True) / d
    inv_std = 1.0 / torch.sqrt(((x - mean) ** 2).sum(dim=1, keepdim=True) / d + eps)
    x_hat = (x - mean) * inv_std
    return x_hat * weight + bias, (x_hat, inv_std, weight)


def layer_norm_backward(dout, cache):
    x_hat, inv_std, weight = cache
    n, d = x_hat.shape
    g = dout * weight
    dx = inv_std / d * (d * g - g.sum(dim=1, keepdim=True) - x_hat * (g * x_hat).sum(dim=1, keepdim=True))
    return dx, (dout * x_hat).sum(dim=0), dout.sum(dim=0)
'''),
    Wrong(A, "layer_norm_forward_backward", "backward-misses-the-mean-term", FORWARD + '''
def layer_norm_backward(dout, cache):
    x_hat, inv_std, weight = cache
    d = x_hat.shape[-1]
    g = dout * weight
    dx = inv_std * (g - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))
    return dx, (dout * x_hat).reshape(-1, d).sum(dim=0), dout.reshape(-1, d).sum(dim=0)
'''),
    Wrong(A, "layer_norm_forward_backward", "backward-misses-the-variance-term", FORWARD + '''
def layer_norm_backward(dout, cache):
    x_hat, inv_std, weight = cache
    d = x_hat.shape[-1]
    g = dout * weight
    dx = inv_std * (g - g.mean(dim=-1, keepdim=True))
    return dx, (dout * x_hat).reshape(-1, d).sum(dim=0), dout.reshape(-1, d).sum(dim=0)
'''),
    Wrong(A, "layer_norm_forward_backward", "backward-forgets-the-weight-in-dx", FORWARD + '''
def layer_norm_backward(dout, cache):
    x_hat, inv_std, weight = cache
    d = x_hat.shape[-1]
    g = dout
    dx = inv_std * (g - g.mean(dim=-1, keepdim=True) - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))
    return dx, (dout * x_hat).reshape(-1, d).sum(dim=0), dout.reshape(-1, d).sum(dim=0)
'''),
    Wrong(A, "layer_norm_forward_backward", "dweight-and-dbias-summed-over-dim-0-only", FORWARD + '''
def layer_norm_backward(dout, cache):
    x_hat, inv_std, weight = cache
    g = dout * weight
    dx = inv_std * (g - g.mean(dim=-1, keepdim=True) - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))
    return dx, (dout * x_hat).sum(dim=0), dout.sum(dim=0)
'''),
    Wrong(A, "layer_norm_forward_backward", "dweight-forgets-x-hat", FORWARD + '''
def layer_norm_backward(dout, cache):
    x_hat, inv_std, weight = cache
    d = x_hat.shape[-1]
    g = dout * weight
    dx = inv_std * (g - g.mean(dim=-1, keepdim=True) - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))
    return dx, (dout * weight).reshape(-1, d).sum(dim=0), dout.reshape(-1, d).sum(dim=0)
'''),
    Wrong(A, "layer_norm_forward_backward", "backward-recomputes-with-the-default-eps", '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    out = (x - mean) / torch.sqrt(var + eps) * weight + bias
    return out, (x, mean, var, weight)


def layer_norm_backward(dout, cache):
    x, mean, var, weight = cache
    inv_std = 1.0 / torch.sqrt(var + 1e-5)
    x_hat = (x - mean) * inv_std
    d = x.shape[-1]
    g = dout * weight
    dx = inv_std * (g - g.mean(dim=-1, keepdim=True) - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))
    return dx, (dout * x_hat).reshape(-1, d).sum(dim=0), dout.reshape(-1, d).sum(dim=0)
'''),
    Wrong(A, "layer_norm_forward_backward", "backward-scales-dout-in-place", FORWARD + '''
def layer_norm_backward(dout, cache):
    x_hat, inv_std, weight = cache
    d = x_hat.shape[-1]
    dbias = dout.reshape(-1, d).sum(dim=0)
    dweight = (dout * x_hat).reshape(-1, d).sum(dim=0)
    dout *= weight
    dx = inv_std * (dout - dout.mean(dim=-1, keepdim=True) - x_hat * (dout * x_hat).mean(dim=-1, keepdim=True))
    return dx, dweight, dbias
'''),
    Wrong(A, "layer_norm_forward_backward", "forward-normalizes-x-in-place", '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    inv_std = 1.0 / torch.sqrt(x.var(dim=-1, unbiased=False, keepdim=True) + eps)
    x.sub_(x.mean(dim=-1, keepdim=True)).mul_(inv_std)
    return x * weight + bias, (x, inv_std, weight)
''' + BACKWARD),
    Wrong(A, "layer_norm_forward_backward", "backward-uses-torch-autograd-grad", '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    out = (x - mean) / torch.sqrt(((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps) * weight + bias
    return out, (x, weight, bias, eps)


def layer_norm_backward(dout, cache):
    x, weight, bias, eps = cache
    with torch.enable_grad():
        leaves = [t.detach().clone().requires_grad_() for t in (x, weight, bias)]
        out, _ = layer_norm_forward(*leaves, eps)
        return torch.autograd.grad(out, leaves, dout)
'''),
    Wrong(A, "layer_norm_forward_backward", "backward-calls-dot-backward", '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    out = (x - mean) / torch.sqrt(((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps) * weight + bias
    return out, (x, weight, bias, eps)


def layer_norm_backward(dout, cache):
    x, weight, bias, eps = cache
    torch.set_grad_enabled(True)
    leaves = [t.detach().clone().requires_grad_() for t in (x, weight, bias)]
    out, _ = layer_norm_forward(*leaves, eps)
    out.backward(dout)
    torch.set_grad_enabled(False)
    return tuple(leaf.grad for leaf in leaves)
'''),
    Wrong(A, "layer_norm_forward_backward", "backward-uses-torch-func-vjp", '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    out = (x - mean) / torch.sqrt(((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps) * weight + bias
    return out, (x, weight, bias, eps)


def layer_norm_backward(dout, cache):
    x, weight, bias, eps = cache
    _, vjp = torch.func.vjp(lambda *t: layer_norm_forward(*t, eps)[0], x, weight, bias)
    return vjp(dout)
'''),
    Wrong(A, "layer_norm_forward_backward", "forward-calls-f-layer-norm", '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    inv_std = 1.0 / torch.sqrt(((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps)
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps), ((x - mean) * inv_std, inv_std, weight)
''' + BACKWARD),
    Wrong(A, "layer_norm_forward_backward", "forward-reaches-layer-norm-through-getattr", '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    inv_std = 1.0 / torch.sqrt(((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps)
    out = getattr(torch, "layer_" + "norm")(x, x.shape[-1:], weight, bias, eps)
    return out, ((x - mean) * inv_std, inv_std, weight)
''' + BACKWARD),
    Wrong(A, "layer_norm_forward_backward", "forward-calls-torch-ops-aten-native-layer-norm", '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    out, mean, rstd = torch.ops.aten.native_layer_norm(x, [x.shape[-1]], weight, bias, eps)
    return out, ((x - mean) * rstd, rstd, weight)
''' + BACKWARD),
    Wrong(A, "layer_norm_forward_backward", "backward-calls-aten-native-layer-norm-backward", '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    rstd = 1.0 / torch.sqrt(((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps)
    return (x - mean) * rstd * weight + bias, (x, mean, rstd, weight, bias)


def layer_norm_backward(dout, cache):
    x, mean, rstd, weight, bias = cache
    return torch.ops.aten.native_layer_norm_backward(dout, x, [x.shape[-1]], mean, rstd, weight, bias,
                                                     [True, True, True])
'''),
]

RIGHT = [
    Right(A, "layer_norm", "var-mean-and-rsqrt", '''
def layer_norm(x, weight, bias, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, unbiased=False, keepdim=True)
    return (x - mean) * torch.rsqrt(var + eps) * weight + bias
'''),
    Right(A, "layer_norm", "sums-over-a-flattened-view", '''
def layer_norm(x, weight, bias, eps=1e-5):
    d = x.shape[-1]
    rows = x.reshape(-1, d)
    mean = rows.sum(dim=1, keepdim=True) / d
    var = (rows - mean).pow(2).sum(dim=1, keepdim=True) / d
    out = (rows - mean) / (var + eps).sqrt()
    return (out * weight + bias).reshape(x.shape)
'''),
    Right(A, "LayerNorm", "register-parameter-and-full", '''
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.normalized_shape = (normalized_shape,)
        self.eps = float(eps)
        self.register_parameter("weight", nn.Parameter(torch.full((normalized_shape,), 1.0)))
        self.register_parameter("bias", nn.Parameter(torch.full((normalized_shape,), 0.0)))

    def forward(self, x):
        return layer_norm(x, weight=self.weight, bias=self.bias, eps=self.eps)
'''),
    Right(A, "layer_norm_forward_backward", "cache-of-statistics-and-summed-formula", '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, unbiased=False, keepdim=True)
    rstd = torch.rsqrt(var + eps)
    return (x - mean) * rstd * weight + bias, {"x": x, "mean": mean, "rstd": rstd, "weight": weight}


def layer_norm_backward(dout, cache):
    x, mean, rstd, weight = cache["x"], cache["mean"], cache["rstd"], cache["weight"]
    d = x.shape[-1]
    x_hat = (x - mean) * rstd
    leading = tuple(range(x.dim() - 1))
    dbias = dout.sum(dim=leading) if leading else dout.clone()
    dweight = (dout * x_hat).sum(dim=leading) if leading else dout * x_hat
    g = dout * weight
    dx = rstd / d * (d * g - g.sum(dim=-1, keepdim=True) - x_hat * (g * x_hat).sum(dim=-1, keepdim=True))
    return dx, dweight, dbias
'''),
    Right(A, "layer_norm_forward_backward", "chain-rule-step-by-step-with-einsum", '''
def layer_norm_forward(x, weight, bias, eps=1e-5):
    d = x.shape[-1]
    mu = x.sum(-1, keepdim=True) / d
    xc = x - mu
    var = (xc * xc).sum(-1, keepdim=True) / d
    std = torch.sqrt(var + eps)
    x_hat = xc / std
    return x_hat * weight + bias, (xc, std, x_hat, weight)


def layer_norm_backward(dout, cache):
    xc, std, x_hat, weight = cache
    d = xc.shape[-1]
    dbias = torch.einsum("...d->d", dout)
    dweight = torch.einsum("...d,...d->d", dout, x_hat)
    dx_hat = dout * weight
    dvar = (dx_hat * xc).sum(-1, keepdim=True) * -0.5 / std**3
    dmu = -dx_hat.sum(-1, keepdim=True) / std - 2.0 * dvar * xc.sum(-1, keepdim=True) / d
    dx = dx_hat / std + dvar * 2.0 * xc / d + dmu / d
    return dx, dweight, dbias
'''),
]
