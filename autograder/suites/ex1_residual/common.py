"""Inputs shared by the ex1_residual suite: tensors from a seed, and trusted models whose parameters are chosen here."""

from functools import lru_cache

import torch
import torch.nn as nn

from autograder.checks import loaded, seeded_state
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
    """A fixtures.TanhMLP in the worker holding parameters drawn here, and the same model here in float64."""
    state = seeded_state(lambda: fixtures.TanhMLP(d_in, d_hidden, d_out, dtype=dtype), seed)
    remote = loaded(sub, "fixtures.TanhMLP", state, d_in, d_hidden, d_out, dtype=dtype)
    local = _local("tanh_mlp", d_in, d_hidden, d_out)
    local.load_state_dict(state)
    return remote, local


def linear(sub, d: int, seed: int, dtype=torch.float32):
    """An nn.Linear(d, d) in the worker holding parameters drawn here, and the same layer here in float64."""
    state = seeded_state(lambda: nn.Linear(d, d, dtype=dtype), seed)
    remote = loaded(sub, "nn.Linear", state, d, d, dtype=dtype)
    local = _local("linear", d, d)
    local.load_state_dict(state)
    return remote, local
