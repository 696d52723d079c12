"""Small trusted models the suites build inside the worker, as inputs to student code.

They are plain torch modules whose code both sides have: the grader chooses their
parameters on its side, loads them into the worker's copy and computes the expected
answer from its own copy. Suites ask for them with ``checks.loaded(sub, "fixtures.<Name>",
state, ...)`` (or ``sub.new`` where no expected value depends on their parameters).

- ``CountingTanh``: tanh that counts its calls (is a residual block's sublayer called once?).
- ``TanhMLP``: Linear -> Tanh -> Linear, the model ``input_grad_norm`` differentiates.
- ``ToyBlock``: a block with the Transformer blocks' constructor and forward signature
  (``ToyBlock(d_model, n_heads, d_ff)``, ``forward(x, attn_mask=None)``), no norms: the
  ``block_cls`` given to a student's ``make_stack``, so the stack is checked without the
  student's own blocks.
- ``ToyStack``: ``blocks`` (a ModuleList of FfnBlocks, x + ffn(x), each with ``ffn[2].weight``)
  and a Linear head: the stack given to a student's ``ffn_grad_norms``.
"""

import torch
import torch.nn as nn


class CountingTanh(nn.Module):
    """tanh(x); ``calls`` counts the forward calls."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return torch.tanh(x)


class TanhMLP(nn.Sequential):
    """Linear(d_in, d_hidden) -> Tanh -> Linear(d_hidden, d_out)."""

    def __init__(self, d_in: int, d_hidden: int, d_out: int, dtype=torch.float32):
        super().__init__(nn.Linear(d_in, d_hidden, dtype=dtype), nn.Tanh(), nn.Linear(d_hidden, d_out, dtype=dtype))


class ToyBlock(nn.Module):
    """x = x + attn(x); x = x + ffn(x), with a Tanh FFN and no norm."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.Tanh(), nn.Linear(d_ff, d_model))

    def forward(self, x, attn_mask=None):  # (B, T, C) -> (B, T, C)
        x = x + self.attn(x, x, x, attn_mask=attn_mask, need_weights=False)[0]
        return x + self.ffn(x)


class FfnBlock(nn.Module):
    """x = x + ffn(x), with a Tanh FFN: the block of ToyStack."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.Tanh(), nn.Linear(d_ff, d_model))

    def forward(self, x):  # (..., C) -> (..., C)
        return x + self.ffn(x)


class ToyStack(nn.Module):
    """``depth`` FfnBlocks, then a Linear head (well conditioned in float32, unlike a LayerNorm of few features)."""

    def __init__(self, depth: int, d_model: int, d_ff: int):
        super().__init__()
        self.blocks = nn.ModuleList(FfnBlock(d_model, d_ff) for _ in range(depth))
        self.head = nn.Linear(d_model, d_model)

    def forward(self, x):  # (..., C) -> (..., C)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


# Reference functions, written from elementary tensor operations, that the grader puts in place of a
# learner's function while it checks a module built on it (``substitute``): a module that calls
# ``layer_norm`` is then judged on what the module itself does, and a bug in the learner's
# ``layer_norm`` costs only that function's task. They follow the exercise contract's definitions.
# The module's output is compared with the same function evaluated in the grading process, never in
# the worker, where learner code may have patched the torch functions they call.
REFERENCE_FUNCTIONS = ("layer_norm", "rms_norm", "batch_norm")
HALF = (torch.float16, torch.bfloat16)


def layer_norm(x, weight, bias, eps=1e-5):
    """(x - mean) / sqrt(biased variance + eps) * weight + bias over the last dimension."""
    centred = x - x.mean(dim=-1, keepdim=True)  # (..., D)
    return centred / torch.sqrt((centred * centred).mean(dim=-1, keepdim=True) + eps) * weight + bias


def rms_norm(x, weight, eps=1e-6):
    """x / sqrt(mean(x^2) + eps) * weight over the last dimension; half precision computed in float32."""
    compute = torch.float32 if x.dtype in HALF else x.dtype
    xc = x.to(compute)  # (..., D)
    out = xc / torch.sqrt((xc * xc).mean(dim=-1, keepdim=True) + eps) * weight.to(x.dtype).to(compute)
    return out.to(x.dtype)


def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    """BatchNorm over every dimension but 1 of (N, C) or (N, C, L); running statistics updated in place."""
    dims = [0] + list(range(2, x.dim()))
    shape = [1, -1] + [1] * (x.dim() - 2)  # broadcasts (C,) against x
    if training:
        mean = x.mean(dim=dims)
        var = ((x - mean.reshape(shape)) ** 2).mean(dim=dims)  # biased: normalizes
        count = x.numel() // x.shape[1]
        if running_mean is not None and running_var is not None:
            with torch.no_grad():
                running_mean.mul_(1 - momentum).add_(momentum * mean)
                running_var.mul_(1 - momentum).add_(momentum * var * count / max(count - 1, 1))  # unbiased
    else:
        mean, var = running_mean, running_var
    out = (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + eps)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out
