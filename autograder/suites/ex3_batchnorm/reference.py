"""What both parts of ex3_batchnorm compare against: inputs and PyTorch's answers.

Everything here runs in the trusted process: inputs come from seeded generators, the
expected values from ``F.batch_norm`` in float64 on cloned running statistics, and the
grader's reference ``fixtures.batch_norm`` (the one a module runs with in the worker) is
evaluated here too.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from autograder.checks import assert_close, single_threaded
from autograder.sandboxed import fixtures

# Float32 answers are compared with PyTorch's float64 answer rounded to float32.
TOLERANCE = {torch.float32: {"atol": 1e-4, "rtol": 1e-4}, torch.float64: {"atol": 1e-9, "rtol": 1e-7}}


@dataclass
class Batch:
    """A batch ``x`` and the per-channel tensors that go with it, all of shape ``(C,)``."""

    x: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor
    running_mean: torch.Tensor
    running_var: torch.Tensor

    @property
    def args(self) -> tuple:
        """The positional arguments of batch_norm, the running statistics as fresh copies."""
        return self.x, self.weight, self.bias, self.running_mean.clone(), self.running_var.clone()


def make_batch(shape, seed: int, scale: float = 1.0, dtype=torch.float32) -> Batch:
    """Random data whose channels each have their own spread and offset (both proportional to ``scale``).

    The running statistics are of the same order as the data's, so that both modes matter.
    """
    g = torch.Generator().manual_seed(seed)
    f64 = torch.float64
    c = shape[1]
    view = [1, c] + [1] * (len(shape) - 2)
    spread = scale * (torch.rand(c, generator=g, dtype=f64) * 1.5 + 0.5)
    offset = scale * torch.randn(c, generator=g, dtype=f64)
    x = torch.randn(shape, generator=g, dtype=f64) * spread.reshape(view) + offset.reshape(view)
    weight = torch.rand(c, generator=g, dtype=f64) + 0.5
    bias = torch.randn(c, generator=g, dtype=f64)
    running_mean = scale * torch.randn(c, generator=g, dtype=f64)
    running_var = scale**2 * (torch.rand(c, generator=g, dtype=f64) * 1.5 + 0.5)
    return Batch(*(t.to(dtype) for t in (x, weight, bias, running_mean, running_var)))


def expected(x, weight, bias, running_mean, running_var, training: bool, momentum: float = 0.1,
             eps: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PyTorch's (output, running_mean after, running_var after), computed in float64, in x's dtype.

    The caller's running statistics are left alone (F.batch_norm updates copies).
    """
    mean, var = running_mean.double().clone(), running_var.double().clone()
    with single_threaded():
        out = F.batch_norm(x.double(), mean, var, weight.double(), bias.double(), training, momentum, eps)
    return out.to(x.dtype), mean.to(running_mean.dtype), var.to(running_var.dtype)


def grader_reference(x, weight, bias, running_mean, running_var, training: bool, momentum: float = 0.1,
                     eps: float = 1e-5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The grader's ``fixtures.batch_norm`` on these inputs, evaluated here in their own dtype: (output,
    running_mean after, running_var after). The caller's running statistics are left alone."""
    mean, var = running_mean.clone(), running_var.clone()
    with torch.no_grad(), single_threaded():
        out = fixtures.batch_norm(x, weight, bias, mean, var, training, momentum, eps)
    return out, mean, var


def mismatch(actual, wanted: torch.Tensor, what: str, dtype=torch.float32) -> str | None:
    """None if ``actual`` is close to ``wanted``, else assert_close's learner-facing message."""
    try:
        assert_close(actual, wanted, what, **TOLERANCE[dtype])
    except AssertionError as error:
        return str(error)
    return None
