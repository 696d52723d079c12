"""The wrong answers learners give in ex6, computed here so that a failed check can name the mistake.

Each entry is (description, function); a description ends the failure message ("... is off by up to
0.3: <description>"): what the answer did and what to do instead, never an input.
"""

import torch


# --- Task 1: BatchNorm by hand -------------------------------------------------------------------------------

def batch_norm(x, gamma, beta, eps, dim=0, correction=0, eps_outside=False):
    """Training-mode BatchNorm of x (N, D) with one thing changed: the dimension of the statistics, the variance's
    divisor (N - correction), eps added outside the root."""
    mean = x.mean(dim, keepdim=True)
    var = x.var(dim, keepdim=True, correction=correction)
    scale = torch.sqrt(var) + eps if eps_outside else torch.sqrt(var + eps)
    return (x - mean) / scale * gamma + beta


FORWARD = [
    ("it divides the variance by N - 1: divide by N, not N - 1 (BatchNorm normalizes with the biased variance)",
     lambda x, g, b, eps: batch_norm(x, g, b, eps, correction=1)),
    ("it adds eps outside the square root: divide by sqrt(var + eps), not by sqrt(var) + eps",
     lambda x, g, b, eps: batch_norm(x, g, b, eps, eps_outside=True)),
    ("it leaves eps out: divide by sqrt(var + eps)", lambda x, g, b, eps: batch_norm(x, g, b, 0.0)),
    ("it normalizes with eps = 1e-5 whatever eps it is given: use the eps argument",
     lambda x, g, b, eps: batch_norm(x, g, b, 1e-5) if eps != 1e-5 else None),
    ("it takes each row's statistics, over the features (dimension 1): BatchNorm takes each column's, over the "
     "batch (dimension 0)", lambda x, g, b, eps: batch_norm(x, g, b, eps, dim=1)),
    ("it swaps gamma and beta: multiply by gamma, then add beta", lambda x, g, b, eps: batch_norm(x, b, g, eps)),
]


def forward_mistakes(x, gamma, beta, eps=1e-5):
    """Each wrong batch_norm_forward output, computed in float64 and rounded to x's dtype."""
    args = [t.double() for t in (x, gamma, beta)]
    return [(description, lambda f=f: f(*args, eps).to(x.dtype)) for description, f in FORWARD]


def backward_mistakes(x, gamma, dout, eps, name):
    """The wrong hand-written gradients ``name`` (dx, dgamma or dbeta), from a right forward's cache."""
    x, gamma, dout = x.double(), gamma.double(), dout.double()
    inv_std = 1 / torch.sqrt(x.var(0, correction=0) + eps)
    x_hat = (x - x.mean(0)) * inv_std
    g = dout * gamma
    n = x.shape[0]
    found = {
        "dx": [
            ("dx has only the direct term, g * inv_std: it misses both terms that come from the statistics",
             lambda: inv_std * g),
            ("dx misses the term from the mean depending on x: subtract the column mean of g",
             lambda: inv_std * (g - x_hat * (g * x_hat).mean(0))),
            ("dx misses the term from the variance depending on x: subtract x_hat times the column mean of "
             "g * x_hat", lambda: inv_std * (g - g.mean(0))),
            ("dx misses the direct term, g * inv_std: x reaches x_hat through x - mean itself, not only through "
             "the statistics", lambda: inv_std * (-g.mean(0) - x_hat * (g * x_hat).mean(0))),
            ("dx leaves gamma out: the gradient reaching x_hat is g = dout * gamma",
             lambda: inv_std * (dout - dout.mean(0) - x_hat * (dout * x_hat).mean(0))),
            ("dx's mean term divides the sum of g by N - 1: it is the mean, g.mean(0)",
             lambda: inv_std * (g - g.sum(0) / (n - 1) - x_hat * (g * x_hat).mean(0))),
            ("dx's variance term leaves out the factor x_hat: subtract x_hat * (g * x_hat).mean(0)",
             lambda: inv_std * (g - g.mean(0) - (g * x_hat).mean(0))),
            ("dx's variance term has a factor 2 too many: subtract x_hat * (g * x_hat).mean(0) once",
             lambda: inv_std * (g - g.mean(0) - 2 * x_hat * (g * x_hat).mean(0))),
            ("dx uses eps = 1e-5, not the eps the forward was given: keep eps (or inv_std) in the cache",
             lambda: 1 / torch.sqrt(x.var(0, correction=0) + 1e-5) * (g - g.mean(0) - x_hat * (g * x_hat).mean(0))
             if eps != 1e-5 else None),
        ],
        "dgamma": [
            ("dgamma is summed over the features, dimension 1: sum over the batch, dimension 0",
             lambda: (dout * x_hat).sum(1)),
            ("dgamma takes one row of dout * x_hat: sum it over the batch", lambda: (dout * x_hat)[0]),
            ("dgamma multiplies dout by x_hat * gamma: use x_hat alone", lambda: (dout * x_hat * gamma).sum(0)),
        ],
        "dbeta": [("dbeta is the mean of dout over the batch: take the sum", lambda: dout.mean(0))],
    }
    return found[name]


# --- Task 2: ReZeroBlock, as a function of x, alpha and the sublayer f -------------------------------------------

REZERO = [
    ("it scales x instead of the branch: return x + alpha * sublayer(x)", lambda x, a, f: a * x + f(x)),
    ("it scales the shortcut by 1 - alpha: only the branch is scaled, x + alpha * sublayer(x)",
     lambda x, a, f: (1 - a) * x + a * f(x)),
    ("alpha is not in its state_dict, so the alpha given to the block had no effect: make alpha an nn.Parameter",
     lambda x, a, f: x),
]


def rezero_mistakes(x, alpha: float, local):
    """Each wrong ReZeroBlock output for x, with ``alpha`` and the sublayer ``local`` (float64), in x's dtype."""

    def output(f):
        with torch.no_grad():
            return f(x.double(), alpha, local).to(x.dtype)

    return [(description, lambda f=f: output(f)) for description, f in REZERO]


def rezero_gradient_mistakes(x, alpha: float, local, dout):
    """The gradient with respect to x of each wrong ReZeroBlock."""

    def gradient(f):
        leaf = x.double().clone().requires_grad_()
        return torch.autograd.grad(f(leaf, alpha, local), leaf, dout.double())[0]

    return [(description, lambda f=f: gradient(f)) for description, f in REZERO]


# --- Task 3: DyT, as a function of x and its parameters --------------------------------------------------------

DYT = [
    ("it leaves alpha out of the tanh: weight * tanh(alpha * x) + bias",
     lambda x, a, w, b: w * torch.tanh(x) + b),
    ("it multiplies by alpha outside the tanh: alpha goes inside, tanh(alpha * x)",
     lambda x, a, w, b: w * a * torch.tanh(x) + b),
    ("it adds bias inside the tanh: add it after, weight * tanh(alpha * x) + bias",
     lambda x, a, w, b: w * torch.tanh(a * x + b)),
    ("it subtracts the row mean before the tanh: DyT has no statistics",
     lambda x, a, w, b: w * torch.tanh(a * (x - x.mean(-1, keepdim=True))) + b),
    ("it normalizes x before the tanh: DyT replaces the norm, it has no statistics",
     lambda x, a, w, b: w * torch.tanh(a * (x - x.mean(-1, keepdim=True)) / torch.sqrt(
         x.var(-1, keepdim=True, correction=0) + 1e-5)) + b),
]


def dyt_mistakes(x, state):
    """Each wrong DyT output for x with the parameters ``state``, in x's dtype."""
    args = [state[name].double() for name in ("alpha", "weight", "bias")]

    def output(f):
        return f(x.double(), *args).to(x.dtype)

    return [(description, lambda f=f: output(f)) for description, f in DYT]


def dyt_gradient_mistakes(x, state, dout):
    """The gradient with respect to x of each wrong DyT."""
    args = [state[name].double() for name in ("alpha", "weight", "bias")]

    def gradient(f):
        leaf = x.double().clone().requires_grad_()
        return torch.autograd.grad(f(leaf, *args), leaf, dout.double())[0]

    return [(description, lambda f=f: gradient(f)) for description, f in DYT]
