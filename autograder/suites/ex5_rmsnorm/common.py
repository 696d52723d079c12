"""Inputs and expected values shared by the ex5 suites, computed in the trusted process."""

import torch
import torch.nn.functional as F

HALF = (torch.float16, torch.bfloat16)


def inputs(shape, seed, scale=1.0, offset=0.0, dtype=torch.float32):
    """x of ``shape`` (scaled, shifted off zero mean) and weight in [0.5, 1.5), from a seeded generator."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g, dtype=torch.float64) * scale + offset).to(dtype)
    w = (torch.rand(shape[-1], generator=g, dtype=torch.float64) + 0.5).to(dtype)
    return x, w


def expected(x, w, eps=1e-6):
    """F.rms_norm in float64 for float32/float64 inputs (rounded to x's dtype); for float16/bfloat16,
    F.rms_norm on the float32 upcast, cast back to x's dtype: the weight applied in float32, one rounding."""
    compute = torch.float32 if x.dtype in HALF else torch.float64
    return F.rms_norm(x.to(compute), (x.shape[-1],), w.to(compute), eps).to(x.dtype)


def expected_llama(x, w, eps=1e-6):
    """For float16/bfloat16: LLaMA's order (the exercise's and chapter 5's), normalized in float32, cast back to
    x's dtype, then multiplied by the weight in x's dtype: two roundings. The contract fixes where the statistics
    and the normalization are computed, not where the weight is applied, so both orders are right."""
    x_hat = F.rms_norm(x.float(), (x.shape[-1],), None, eps)
    return x_hat.to(x.dtype) * w.to(x.dtype)


def expected_grads(x, w, dout, eps=1e-6):
    """(dx, dweight) of F.rms_norm for the upstream gradient dout, by autograd in float64."""
    leaves = [t.double().clone().requires_grad_() for t in (x, w)]
    return torch.autograd.grad(F.rms_norm(leaves[0], (x.shape[-1],), leaves[1], eps), leaves, dout.double())
