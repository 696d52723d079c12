"""Inputs and expected values shared by the ex2 suites, computed in the trusted process.

Expected values come from LayerNorm's definition evaluated in float64 (it agrees with
F.layer_norm to about 1e-15), and gradients from autograd through it: F.layer_norm's
kernel goes multi-threaded even for tiny tensors and then costs 10-40 ms per call on a
busy 2-core machine, against 0.3 ms for these few element-wise operations.
"""

import torch


def inputs(shape, seed, scale=1.0, offset=0.0, dtype=torch.float32):
    """x of ``shape`` (scaled, shifted), weight in [0.5, 1.5) and bias ~ N(0, 1), from a seeded generator."""
    g = torch.Generator().manual_seed(seed)
    d = shape[-1]
    x = (torch.randn(shape, generator=g, dtype=torch.float64) * scale + offset).to(dtype)
    w = (torch.rand(d, generator=g, dtype=torch.float64) + 0.5).to(dtype)
    b = torch.randn(d, generator=g, dtype=torch.float64).to(dtype)
    return x, w, b


def upstream(shape, seed, dtype=torch.float64):
    """A gradient dout flowing back into the output."""
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


def definition(x, w, b, eps):
    """(x - mean) / sqrt(biased variance + eps) * w + b over the last dimension."""
    centred = x - x.mean(dim=-1, keepdim=True)
    return centred / torch.sqrt((centred * centred).mean(dim=-1, keepdim=True) + eps) * w + b


def expected(x, w, b, eps=1e-5):
    """LayerNorm of x, computed in float64 and rounded to x's dtype."""
    return definition(x.double(), w.double(), b.double(), eps).to(x.dtype)


def expected_grads(x, w, b, dout, eps=1e-5):
    """(dx, dweight, dbias) of LayerNorm for the upstream gradient dout, by autograd in float64."""
    leaves = [t.double().clone().requires_grad_() for t in (x, w, b)]
    return torch.autograd.grad(definition(*leaves, eps), leaves, dout.double())
