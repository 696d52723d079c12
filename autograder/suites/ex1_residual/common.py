"""Inputs shared by the ex1_residual suite: tensors from a seed, and trusted models rebuilt from a state_dict."""

from functools import lru_cache

import torch
import torch.nn as nn

from autograder.sandboxed import fixtures


def randn(shape, seed: int, dtype=torch.float32, scale: float = 1.0) -> torch.Tensor:
    """A normal tensor drawn from its own generator (never the global RNG)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)


@lru_cache(maxsize=64)
def _local(kind: str, *sizes) -> nn.Module:
    """A float64 model here, built once per kind and size (every use loads all its parameters first)."""
    if kind == "linear":
        return nn.Linear(*sizes, dtype=torch.float64)
    return fixtures.TanhMLP(*sizes, dtype=torch.float64)


def tanh_mlp(sub, d_in: int, d_hidden: int, d_out: int, seed: int, dtype=torch.float32):
    """A fixtures.TanhMLP built in the worker, and the same model here in float64, from its state_dict."""
    remote = sub.new("fixtures.TanhMLP", d_in, d_hidden, d_out, dtype=dtype, seed=seed)
    local = _local("tanh_mlp", d_in, d_hidden, d_out)
    local.load_state_dict(sub.state_dict(remote))
    return remote, local


def linear(sub, d: int, seed: int, dtype=torch.float32):
    """An nn.Linear(d, d) built in the worker, and the same layer here in float64, from its state_dict."""
    remote = sub.new("nn.Linear", d, d, dtype=dtype, seed=seed)
    local = _local("linear", d, d)
    local.load_state_dict(sub.state_dict(remote))
    return remote, local
