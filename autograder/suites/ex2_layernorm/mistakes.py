"""The wrong LayerNorms learners write, computed here so that a failed check can name the mistake.

Each entry is (description, function); a description ends the failure message ("... is off by up
to 0.4: <description>"): what the answer did and what to do instead, never an input. The
functions take float64 tensors; ``*_mistakes`` turn them into the (description, compute) pairs
that ``checks.assert_close`` tries when a check fails.
"""

import torch

from autograder.suites.ex2_layernorm.common import expected_grads


def normalized(x, w, b, eps, dims=-1, correction=0, eps_outside=False, centre=True, detach=False):
    """LayerNorm with one thing changed: the dimensions of the statistics, the variance's divisor (n - correction),
    eps added outside the root, the mean not subtracted, or the statistics detached from the graph."""
    source = x.detach() if detach else x
    mean = source.mean(dim=dims, keepdim=True)
    var = source.var(dim=dims, keepdim=True, correction=correction)
    scale = torch.sqrt(var) + eps if eps_outside else torch.sqrt(var + eps)
    return ((x - mean) if centre else x) / scale * w + b


def every_dim(x):
    return tuple(range(x.dim()))


FORWARD = [
    ("it divides the variance by D - 1: divide by D, not D - 1 (LayerNorm uses the biased variance)",
     lambda x, w, b, eps: normalized(x, w, b, eps, correction=1)),
    ("it adds eps outside the square root: divide by sqrt(var + eps), not by sqrt(var) + eps",
     lambda x, w, b, eps: normalized(x, w, b, eps, eps_outside=True)),
    ("it leaves eps out: divide by sqrt(var + eps)", lambda x, w, b, eps: normalized(x, w, b, 0.0)),
    ("it normalizes with eps = 1e-5 whatever eps it is given: use the eps argument",
     lambda x, w, b, eps: normalized(x, w, b, 1e-5)),
    ("it takes the mean and the variance over dimension 0: take them over the last dimension, within each row",
     lambda x, w, b, eps: normalized(x, w, b, eps, dims=0)),
    ("it takes the mean and the variance over every element of x: take them over the last dimension, within "
     "each row", lambda x, w, b, eps: normalized(x, w, b, eps, dims=every_dim(x))),
    ("it does not subtract the mean: normalize x - mean", lambda x, w, b, eps: normalized(x, w, b, eps, centre=False)),
    ("it swaps weight and bias: multiply by weight, then add bias", lambda x, w, b, eps: normalized(x, b, w, eps)),
    ("it returns x unchanged: normalize it", lambda x, w, b, eps: x),
]

# Mistakes only the gradient shows.
GRADIENT = [
    ("no gradient flows through the mean and the variance: compute them from x itself, without .detach(), .data "
     "or torch.no_grad()", lambda x, w, b, eps: normalized(x, w, b, eps, detach=True)),
]


def forward_mistakes(x, w, b, eps):
    """Each wrong LayerNorm of (x, w, b), in x's dtype."""
    args = [t.double() for t in (x, w, b)]
    return [(description, lambda f=f: f(*args, eps).to(x.dtype)) for description, f in FORWARD]


def gradient_mistakes(x, w, b, dout, eps, index):
    """The gradient with respect to argument ``index`` (0: x, 1: weight, 2: bias) of each wrong LayerNorm."""

    def gradient(f):
        leaves = [t.double().clone().requires_grad_() for t in (x, w, b)]
        return torch.autograd.grad(f(*leaves, eps), leaves[index], dout.double(), allow_unused=True)[0]

    return [(description, lambda f=f: gradient(f)) for description, f in GRADIENT + FORWARD]


def backward_mistakes(x, w, b, dout, eps, name):
    """The wrong hand-written gradients ``name`` (dx, dweight or dbias), from a right forward's cache."""
    x, w, dout = x.double(), w.double(), dout.double()
    mean = x.mean(dim=-1, keepdim=True)
    inv_std = 1 / torch.sqrt(((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps)
    x_hat = (x - mean) * inv_std
    leading = tuple(range(x.dim() - 1))

    def row_mean(t):
        return t.mean(dim=-1, keepdim=True)

    g = dout * w
    found = {
        "dx": [
            ("dx has only the direct term, g * inv_std: it misses the terms from the mean and from the variance "
             "of the row", lambda: inv_std * g),
            ("dx misses the term from the mean: subtract the row mean of g", lambda: inv_std * (g - x_hat * row_mean(
                g * x_hat))),
            ("dx misses the term from the variance: subtract x_hat times the row mean of g * x_hat",
             lambda: inv_std * (g - row_mean(g))),
            ("dx leaves the weight out: the gradient reaching x_hat is g = dout * weight",
             lambda: inv_std * (dout - row_mean(dout) - x_hat * row_mean(dout * x_hat))),
            ("dx is the gradient for the default eps 1e-5, not for the eps the forward was given: keep eps (or "
             "inv_std) in the cache", lambda: expected_grads(x, w, b, dout, 1e-5)[0]),
        ],
        "dweight": [
            ("dweight sums dout * weight instead of dout * x_hat", lambda: (dout * w).sum(dim=leading)),
            ("dweight sums dout without x_hat: sum dout * x_hat", lambda: dout.sum(dim=leading)),
            ("dweight is summed over dimension 0 only: sum over every leading dimension",
             lambda: (dout * x_hat).sum(dim=0)),
        ],
        "dbias": [
            ("dbias is summed over dimension 0 only: sum over every leading dimension", lambda: dout.sum(dim=0)),
        ],
    }
    return found[name]

