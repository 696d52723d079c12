"""Inputs shared by the ex1_residual suite: tensors from a seed, and trusted models rebuilt from a state_dict."""

import torch

from autograder.sandboxed import fixtures


def randn(shape, seed: int, dtype=torch.float32, scale: float = 1.0) -> torch.Tensor:
    """A normal tensor drawn from its own generator (never the global RNG)."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def tanh_mlp(sub, d_in: int, d_hidden: int, d_out: int, seed: int, dtype=torch.float32):
    """A fixtures.TanhMLP built in the worker, and the same model rebuilt here in float64 from its state_dict."""
    remote = sub.new("fixtures.TanhMLP", d_in, d_hidden, d_out, dtype=dtype, seed=seed)
    local = fixtures.TanhMLP(d_in, d_hidden, d_out, dtype=torch.float64)
    local.load_state_dict(sub.state_dict(remote))
    return remote, local
