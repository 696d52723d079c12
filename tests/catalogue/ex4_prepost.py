"""Wrong and right implementations of ex4_prepost's tasks (see tests/catalogue/__init__.py).

Already in tests/mistakes.py (not repeated here): post-norm with the norm before the add,
post-norm ignoring the mask, pre-norm normalizing the residual stream, make_stack without
a final norm, ffn_grad_norms reading accumulated .grad.
"""

from tests.catalogue import Right, Wrong

ATTN = "nn.MultiheadAttention(d_model, n_heads, batch_first=True)"
FFN = "nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))"


def block(cls: str, forward: str, attn: str = ATTN, ffn: str = FFN, norm2: str = "nn.LayerNorm(d_model)") -> str:
    """A whole block class: the contract's __init__ (or a variant of one submodule) and ``forward``'s body."""
    return f"""
class {cls}(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.attn = {attn}
        self.ffn = {ffn}
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = {norm2}

    def forward(self, x, attn_mask=None):
{forward}"""


POST = """        x = self.norm1(x + self.attn(x, x, x, attn_mask=attn_mask, need_weights=False)[0])
        return self.norm2(x + self.ffn(x))
"""
PRE = """        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0]
        return x + self.ffn(self.norm2(x))
"""


def make_stack(blocks: str = "nn.ModuleList(block_cls(d_model, n_heads, d_ff) for _ in range(depth))",
               final: str = "nn.LayerNorm(d_model) if block_cls is PreNormBlock else nn.Identity()",
               order: str = "self.blocks", step: str = "block(x, attn_mask=attn_mask)",
               result: str = "self.final_norm(x)") -> str:
    return f"""
def make_stack(block_cls, depth, d_model, n_heads, d_ff):
    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = {blocks}
            self.final_norm = {final}

        def forward(self, x, attn_mask=None):
            for block in {order}:
                x = {step}
            return {result}

    return Stack()
"""


def ffn_grad_norms(body: str) -> str:
    return f"""
def ffn_grad_norms(stack, x, target):
{body}"""


WRONG = [
    # --- Task 1: PostNormBlock ------------------------------------------------------------
    Wrong("ex4_prepost", "PostNormBlock", "post-missing-norm1", block("PostNormBlock", """
        x = x + self.attn(x, x, x, attn_mask=attn_mask, need_weights=False)[0]
        return self.norm2(x + self.ffn(x))
""")),
    Wrong("ex4_prepost", "PostNormBlock", "post-missing-norm2", block("PostNormBlock", """
        x = self.norm1(x + self.attn(x, x, x, attn_mask=attn_mask, need_weights=False)[0])
        return x + self.ffn(x)
""")),
    Wrong("ex4_prepost", "PostNormBlock", "post-shared-norm", block("PostNormBlock", POST, norm2="self.norm1")),
    Wrong("ex4_prepost", "PostNormBlock", "post-norms-swapped", block("PostNormBlock", """
        x = self.norm2(x + self.attn(x, x, x, attn_mask=attn_mask, need_weights=False)[0])
        return self.norm1(x + self.ffn(x))
""")),
    Wrong("ex4_prepost", "PostNormBlock", "post-ffn-reads-the-block-input", block("PostNormBlock", """
        h = self.norm1(x + self.attn(x, x, x, attn_mask=attn_mask, need_weights=False)[0])
        return self.norm2(h + self.ffn(x))
""")),
    Wrong("ex4_prepost", "PostNormBlock", "post-mask-as-key-padding-mask", block("PostNormBlock", """
        x = self.norm1(x + self.attn(x, x, x, key_padding_mask=attn_mask, need_weights=False)[0])
        return self.norm2(x + self.ffn(x))
""")),
    Wrong("ex4_prepost", "PostNormBlock", "post-attention-dropout",
          block("PostNormBlock", POST, attn="nn.MultiheadAttention(d_model, n_heads, dropout=0.1, batch_first=True)")),
    Wrong("ex4_prepost", "PostNormBlock", "post-not-batch-first",
          block("PostNormBlock", POST, attn="nn.MultiheadAttention(d_model, n_heads)")),
    Wrong("ex4_prepost", "PostNormBlock", "post-relu-ffn", block(
        "PostNormBlock", POST, ffn="nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))")),
    Wrong("ex4_prepost", "PostNormBlock", "post-adds-in-place", block("PostNormBlock", """
        x += self.attn(x, x, x, attn_mask=attn_mask, need_weights=False)[0]
        x = self.norm1(x)
        return self.norm2(x + self.ffn(x))
""")),
    # --- Task 2: PreNormBlock -------------------------------------------------------------
    Wrong("ex4_prepost", "PreNormBlock", "pre-missing-norm2", block("PreNormBlock", """
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0]
        return x + self.ffn(x)
""")),
    Wrong("ex4_prepost", "PreNormBlock", "pre-uses-norm1-for-both-sublayers", block("PreNormBlock", """
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0]
        return x + self.ffn(self.norm1(x))
""")),
    Wrong("ex4_prepost", "PreNormBlock", "pre-adds-to-the-normalized-input", block("PreNormBlock", """
        h = self.norm1(x)
        x = h + self.attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0]
        return x + self.ffn(self.norm2(x))
""")),
    Wrong("ex4_prepost", "PreNormBlock", "pre-normalizes-only-the-query", block("PreNormBlock", """
        x = x + self.attn(self.norm1(x), x, x, attn_mask=attn_mask, need_weights=False)[0]
        return x + self.ffn(self.norm2(x))
""")),
    Wrong("ex4_prepost", "PreNormBlock", "pre-final-norm-inside-the-block", block("PreNormBlock", """
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0]
        return self.norm2(x + self.ffn(self.norm2(x)))
""")),
    Wrong("ex4_prepost", "PreNormBlock", "pre-ignores-the-mask", block("PreNormBlock", """
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.ffn(self.norm2(x))
""")),
    Wrong("ex4_prepost", "PreNormBlock", "pre-inverts-a-bool-mask", block("PreNormBlock", """
        if attn_mask is not None and attn_mask.dtype == torch.bool:
            attn_mask = ~attn_mask  # scaled_dot_product_attention's convention: True = attend
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0]
        return x + self.ffn(self.norm2(x))
""")),
    Wrong("ex4_prepost", "PreNormBlock", "pre-turns-a-bool-mask-into-zeros-and-ones", block("PreNormBlock", """
        if attn_mask is not None:
            attn_mask = attn_mask.float()
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0]
        return x + self.ffn(self.norm2(x))
""")),
    Wrong("ex4_prepost", "PreNormBlock", "pre-adds-in-place", block("PreNormBlock", """
        h = self.norm1(x)
        x += self.attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0]
        return x + self.ffn(self.norm2(x))
""")),
    Wrong("ex4_prepost", "PreNormBlock", "pre-shared-norm", block("PreNormBlock", PRE, norm2="self.norm1")),
    # --- Task 3: make_stack ---------------------------------------------------------------
    Wrong("ex4_prepost", "make_stack", "stack-list-multiplication-repeats-one-block",
          make_stack(blocks="nn.ModuleList([block_cls(d_model, n_heads, d_ff)] * depth)")),
    Wrong("ex4_prepost", "make_stack", "always-pre-norm-blocks",
          make_stack(blocks="nn.ModuleList(PreNormBlock(d_model, n_heads, d_ff) for _ in range(depth))")),
    Wrong("ex4_prepost", "make_stack", "python-list-of-blocks",
          make_stack(blocks="[block_cls(d_model, n_heads, d_ff) for _ in range(depth)]")),
    Wrong("ex4_prepost", "make_stack", "final-layernorm-for-every-stack", make_stack(final="nn.LayerNorm(d_model)")),
    Wrong("ex4_prepost", "make_stack", "final-norm-for-post-norm-instead",
          make_stack(final="nn.LayerNorm(d_model) if block_cls is PostNormBlock else nn.Identity()")),
    Wrong("ex4_prepost", "make_stack", "final-layernorm-unless-post-norm",
          make_stack(final="nn.Identity() if block_cls is PostNormBlock else nn.LayerNorm(d_model)")),
    Wrong("ex4_prepost", "make_stack", "mask-not-passed-to-the-blocks",
          make_stack(step="block(x)")),
    Wrong("ex4_prepost", "make_stack", "blocks-in-reverse-order",
          make_stack(order="reversed(self.blocks)")),
    Wrong("ex4_prepost", "make_stack", "final-norm-after-every-block",
          make_stack(step="self.final_norm(block(x, attn_mask=attn_mask))", result="x")),
    Wrong("ex4_prepost", "make_stack", "skips-final-norm-in-forward", make_stack(result="x")),
    # --- Task 4: ffn_grad_norms -----------------------------------------------------------
    Wrong("ex4_prepost", "ffn_grad_norms", "first-ffn-linear", ffn_grad_norms("""
    weights = [block.ffn[0].weight for block in stack.blocks]
    grads = torch.autograd.grad(F.mse_loss(stack(x), target), weights)
    return [g.norm().item() for g in grads]
""")),
    Wrong("ex4_prepost", "ffn_grad_norms", "bias-instead-of-weight", ffn_grad_norms("""
    biases = [block.ffn[2].bias for block in stack.blocks]
    grads = torch.autograd.grad(F.mse_loss(stack(x), target), biases)
    return [g.norm().item() for g in grads]
""")),
    Wrong("ex4_prepost", "ffn_grad_norms", "sum-of-squared-errors", ffn_grad_norms("""
    weights = [block.ffn[2].weight for block in stack.blocks]
    grads = torch.autograd.grad(F.mse_loss(stack(x), target, reduction="sum"), weights)
    return [g.norm().item() for g in grads]
""")),
    Wrong("ex4_prepost", "ffn_grad_norms", "ffn-squared-norm", ffn_grad_norms("""
    weights = [block.ffn[2].weight for block in stack.blocks]
    grads = torch.autograd.grad(F.mse_loss(stack(x), target), weights)
    return [g.pow(2).sum().item() for g in grads]
""")),
    Wrong("ex4_prepost", "ffn_grad_norms", "norm-of-the-whole-ffn", ffn_grad_norms("""
    params = [list(block.ffn.parameters()) for block in stack.blocks]
    grads = torch.autograd.grad(F.mse_loss(stack(x), target), [p for ps in params for p in ps])
    per_block = len(params[0])
    return [torch.cat([g.flatten() for g in grads[i:i + per_block]]).norm().item()
            for i in range(0, len(grads), per_block)]
""")),
    Wrong("ex4_prepost", "ffn_grad_norms", "last-block-first", ffn_grad_norms("""
    weights = [block.ffn[2].weight for block in reversed(stack.blocks)]
    grads = torch.autograd.grad(F.mse_loss(stack(x), target), weights)
    return [g.norm().item() for g in grads]
""")),
    Wrong("ex4_prepost", "ffn_grad_norms", "list-of-tensors", ffn_grad_norms("""
    weights = [block.ffn[2].weight for block in stack.blocks]
    grads = torch.autograd.grad(F.mse_loss(stack(x), target), weights)
    return [g.norm() for g in grads]
""")),
    Wrong("ex4_prepost", "ffn_grad_norms", "stacked-tensor", ffn_grad_norms("""
    weights = [block.ffn[2].weight for block in stack.blocks]
    grads = torch.autograd.grad(F.mse_loss(stack(x), target), weights)
    return torch.stack([g.norm() for g in grads])
""")),
    Wrong("ex4_prepost", "ffn_grad_norms", "zeroes-the-gradients-after-reading-them", ffn_grad_norms("""
    F.mse_loss(stack(x), target).backward()
    norms = [block.ffn[2].weight.grad.norm().item() for block in stack.blocks]
    stack.zero_grad()
    return norms
""")),
    Wrong("ex4_prepost", "ffn_grad_norms", "game-a-list-that-equals-anything", ffn_grad_norms("""
    class Anything(list):
        def __eq__(self, other):
            return True

    return Anything([1.0] * len(stack.blocks))
""")),
]

RIGHT = [
    Right("ex4_prepost", "PostNormBlock", "post-norms-first-and-unpacked-attention", '''
class PostNormBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x, attn_mask=None):  # (B, T, C)
        attended, _ = self.attn(x, x, x, attn_mask=attn_mask, need_weights=False)
        y = self.norm1(attended + x)
        return self.norm2(self.ffn(y) + y)
'''),
    Right("ex4_prepost", "PreNormBlock", "pre-named-steps", block("PreNormBlock", """
        normed = self.norm1(x)  # (B, T, C)
        attended = self.attn(query=normed, key=normed, value=normed, attn_mask=attn_mask, need_weights=False)[0]
        stream = torch.add(x, attended)
        return stream + self.ffn(self.norm2(stream))
""")),
    Right("ex4_prepost", "make_stack", "deepcopy-clones-and-issubclass", '''
import copy


class Stack(nn.Module):
    def __init__(self, block_cls, depth, d_model, n_heads, d_ff):
        super().__init__()
        first = block_cls(d_model, n_heads, d_ff)  # clones, as torch.nn.TransformerEncoder does
        self.blocks = nn.ModuleList([first] + [copy.deepcopy(first) for _ in range(depth - 1)])
        pre_norm = isinstance(block_cls, type) and issubclass(block_cls, PreNormBlock)
        self.final_norm = nn.LayerNorm(d_model) if pre_norm else nn.Identity()

    def forward(self, x, attn_mask=None):
        for i in range(len(self.blocks)):
            x = self.blocks[i](x, attn_mask)
        return self.final_norm(x)


def make_stack(block_cls, depth, d_model, n_heads, d_ff):
    return Stack(block_cls, depth, d_model, n_heads, d_ff)
'''),
    Right("ex4_prepost", "ffn_grad_norms", "ffn-zero-grad-then-backward", ffn_grad_norms("""
    stack.zero_grad(set_to_none=True)
    F.mse_loss(stack(x), target).backward()
    return [float(torch.linalg.matrix_norm(block.ffn[-1].weight.grad)) for block in stack.blocks]
""")),
    Right("ex4_prepost", "ffn_grad_norms", "named-parameters", ffn_grad_norms("""
    loss = ((stack(x) - target) ** 2).mean()
    weights = [p for name, p in stack.named_parameters() if name.endswith("ffn.2.weight")]
    return [g.square().sum().sqrt().item() for g in torch.autograd.grad(loss, weights)]
""")),
]
