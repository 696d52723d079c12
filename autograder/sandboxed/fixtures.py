"""Small trusted models the suites build inside the worker, as inputs to student code.

They are plain torch modules whose code both sides have, so the grader can rebuild
one from its state_dict and compute the expected answer itself. Suites ask for them
with ``sub.new("fixtures.<Name>", ...)``.

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
