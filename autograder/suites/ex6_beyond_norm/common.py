"""Inputs and expected values shared by the ex6 suites, computed in the trusted process.

Expected BatchNorm values come from ``F.batch_norm`` in float64 (training mode, no running
statistics), gradients from autograd through it. The sublayers given to ``ReZeroBlock`` are
trusted modules built in the worker (``nn.Linear``, ``fixtures.TanhMLP``) holding parameters
drawn here, so every expected value is computed on this side, from this side's copy.
"""

from functools import lru_cache

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.checks import assert_close, loaded, seeded_state, single_threaded
from autograder.sandboxed import fixtures

NORM_FAMILY = {"layer_norm", "batch_norm", "instance_norm", "rms_norm", "group_norm"}
TOLERANCE = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}, torch.float64: {"atol": 1e-12, "rtol": 1e-12}}


def randn(shape, seed: int, dtype=torch.float32, scale: float = 1.0, offset: float = 0.0) -> torch.Tensor:
    """A normal tensor (scaled, shifted) drawn from its own generator, never the global one."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale + offset).to(dtype)


# --- Task 1: BatchNorm ------------------------------------------------------------------------------------------

def batch(shape, seed: int, scale: float = 1.0, dtype=torch.float32):
    """x of shape (N, D) whose columns each have their own spread and offset (proportional to ``scale``),
    gamma in [0.5, 1.5) and beta ~ N(0, 1)."""
    g = torch.Generator().manual_seed(seed)
    f64 = torch.float64
    n, d = shape
    spread = scale * (torch.rand(d, generator=g, dtype=f64) * 1.5 + 0.5)
    offset = scale * torch.randn(d, generator=g, dtype=f64)
    x = torch.randn(n, d, generator=g, dtype=f64) * spread + offset
    gamma = torch.rand(d, generator=g, dtype=f64) + 0.5
    beta = torch.randn(d, generator=g, dtype=f64)
    return x.to(dtype), gamma.to(dtype), beta.to(dtype)


def expected(x, gamma, beta, eps=1e-5):
    """Training-mode F.batch_norm of x, computed in float64 and rounded to x's dtype."""
    with single_threaded():
        out = F.batch_norm(x.double(), None, None, gamma.double(), beta.double(), training=True, eps=eps)
    return out.to(x.dtype)


def expected_grads(x, gamma, beta, dout, eps=1e-5):
    """(dx, dgamma, dbeta) by autograd through training-mode F.batch_norm, in float64."""
    leaves = [t.double().clone().requires_grad_() for t in (x, gamma, beta)]
    with single_threaded():
        out = F.batch_norm(leaves[0], None, None, leaves[1], leaves[2], training=True, eps=eps)
        return torch.autograd.grad(out, leaves, dout.double())


def assert_relative(actual, wanted: torch.Tensor, what: str, relative: float = 1e-8, mistakes=()) -> None:
    """``actual`` equals ``wanted`` to ``relative`` error, measured against the largest entry of ``wanted``."""
    scale = wanted.abs().max().item() if wanted.numel() else 0.0
    assert_close(actual, wanted, what, atol=relative * max(scale, 1e-300), rtol=relative, mistakes=mistakes)


# --- Task 2: the sublayers of a ReZeroBlock --------------------------------------------------------------------

@lru_cache(maxsize=64)
def _local(kind: str, *sizes) -> nn.Module:
    """A float64 model here, built once per kind and size (every use loads all its parameters first)."""
    if kind == "linear":
        return nn.Linear(*sizes, dtype=torch.float64)
    return fixtures.TanhMLP(*sizes, dtype=torch.float64)


def sublayer(sub, d: int, seed: int, nonlinear: bool, dtype=torch.float32):
    """A sublayer in the worker (fixtures.TanhMLP(d, 5, d) or nn.Linear(d, d)) holding parameters drawn here, and
    the same model here in float64."""
    if nonlinear:
        state = seeded_state(lambda: fixtures.TanhMLP(d, 5, d, dtype=dtype), seed)
        remote = loaded(sub, "fixtures.TanhMLP", state, d, 5, d, dtype=dtype)
        local = _local("tanh_mlp", d, 5, d)
    else:
        state = seeded_state(lambda: nn.Linear(d, d, dtype=dtype), seed)
        remote = loaded(sub, "nn.Linear", state, d, d, dtype=dtype)
        local = _local("linear", d, d)
    local.load_state_dict(state)
    return remote, local
