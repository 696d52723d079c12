"""The wrong blocks, stacks and gradient norms learners write in ex4, computed here so that a failed check
can name the mistake.

Each entry is (description, function); a description ends the failure message ("... is off by up to 2:
<description>"): what the answer did and what to do instead, never an input. The block functions take
the reference block of reference.py (holding the learner's block's parameters), x and attn_mask.
"""

from copy import deepcopy

import torch
import torch.nn.functional as F


def attend(block, q, kv=None, mask=None):
    kv = q if kv is None else kv
    return block.attn(q, kv, kv, attn_mask=mask, need_weights=False)[0]


def inverted(mask):
    return ~mask if mask is not None and mask.dtype == torch.bool else mask


def as_float(mask):
    return mask.double() if mask is not None else None


POST = [
    ("it normalizes the sublayers' outputs before the add: post-norm adds first, then normalizes, "
     "x = norm1(x + attn(x))", lambda b, x, m: (lambda h: h + b.norm2(b.ffn(h)))(x + b.norm1(attend(b, x, mask=m)))),
    ("it ignores attn_mask: pass it on to self.attn", lambda b, x, m: b(x)),
    ("it leaves out norm1: normalize x + attn(x) with norm1",
     lambda b, x, m: (lambda h: b.norm2(h + b.ffn(h)))(x + attend(b, x, mask=m))),
    ("it leaves out norm2: normalize x + ffn(x) with norm2",
     lambda b, x, m: (lambda h: h + b.ffn(h))(b.norm1(x + attend(b, x, mask=m)))),
    ("norm1 and norm2 are swapped: norm1 follows the attention, norm2 the feed-forward",
     lambda b, x, m: (lambda h: b.norm1(h + b.ffn(h)))(b.norm2(x + attend(b, x, mask=m)))),
    ("the feed-forward reads the block's input x: feed it the output of the attention step",
     lambda b, x, m: b.norm2(b.norm1(x + attend(b, x, mask=m)) + b.ffn(x))),
]
PRE = [
    ("it normalizes the residual stream itself: a pre-norm block never normalizes the stream, only the "
     "sublayers' inputs", lambda b, x, m: (lambda h: h + b.ffn(h))(
        b.norm2((lambda n: n + attend(b, n, mask=m))(b.norm1(x))))),
    ("it leaves out norm2: the feed-forward's input is norm2(x)",
     lambda b, x, m: (lambda h: h + b.ffn(h))(x + attend(b, b.norm1(x), mask=m))),
    ("it normalizes the feed-forward's input with norm1: use norm2 there",
     lambda b, x, m: (lambda h: h + b.ffn(b.norm1(h)))(x + attend(b, b.norm1(x), mask=m))),
    ("it adds the attention's output to the normalized input: add it to x itself, x = x + attn(norm1(x))",
     lambda b, x, m: (lambda h: h + b.ffn(b.norm2(h)))(b.norm1(x) + attend(b, b.norm1(x), mask=m))),
    ("it normalizes only the query: the key and the value are norm1(x) too",
     lambda b, x, m: (lambda h: h + b.ffn(b.norm2(h)))(x + attend(b, b.norm1(x), x, mask=m))),
    ("it normalizes the block's output with norm2: a pre-norm block returns x + ffn(norm2(x)) as it is",
     lambda b, x, m: (lambda h: b.norm2(h + b.ffn(b.norm2(h))))(x + attend(b, b.norm1(x), mask=m))),
    ("it ignores attn_mask: pass it on to self.attn", lambda b, x, m: b(x)),
]
MASKS = [
    ("it inverts the boolean attn_mask: for nn.MultiheadAttention True marks the positions to hide; pass the "
     "mask as it is", lambda b, x, m: b(x, attn_mask=inverted(m))),
    ("it turns the boolean attn_mask into 0/1 floats, which are added to the attention scores: pass the mask as "
     "it is", lambda b, x, m: b(x, attn_mask=as_float(m) if m is not None and m.dtype == torch.bool else m)),
]
SHARED = ("norm1 and norm2 are the same module, so both norms share their weights: create two nn.LayerNorm",
          lambda b, x, m: shared(b, x, m))


def shared(block, x, mask):
    """The block's forward with norm2 in both places (one module assigned to both names holds the values loaded
    last, norm2's)."""
    copy = deepcopy(block)
    copy.norm1 = copy.norm2
    return copy(x, attn_mask=mask)


def block_mistakes(name: str, reference, x, mask):
    """The wrong outputs of block ``name`` for x (float32 or float64), computed with ``reference``."""
    found = (POST if name == "PostNormBlock" else PRE) + MASKS + [SHARED]
    x64, mask64 = x.double(), as_float(mask) if mask is not None and mask.is_floating_point() else mask

    def output(f):
        with torch.no_grad():
            return f(reference, x64, mask64).to(x.dtype)

    return [(description, lambda f=f: output(f)) for description, f in found]


def block_gradient_mistakes(name: str, reference, x, mask, dout):
    """The gradient with respect to x of each wrong block ``name``."""
    found = (POST if name == "PostNormBlock" else PRE) + MASKS + [SHARED]

    def gradient(f):
        leaf = x.clone().requires_grad_()
        return torch.autograd.grad(f(reference, leaf, mask), leaf, dout)[0]

    return [(description, lambda f=f: gradient(f)) for description, f in found]


def stack_mistakes(run_block, final_norm, blocks, x, attn_mask):
    """The wrong outputs of a stack's forward: ``run_block(block, h, mask)`` runs one of ``blocks`` and
    ``final_norm(h)`` the stack's final norm, both as the suite computes them."""

    def chain(order, mask, norm_each=False):
        h = x
        for block in order:
            h = run_block(block, h, mask)
            h = final_norm(h) if norm_each else h
        return h

    return [
        ("it does not pass attn_mask to the blocks: call block(x, attn_mask=attn_mask)",
         lambda: final_norm(chain(blocks, None)) if attn_mask is not None else None),
        ("it runs the blocks in reverse order: run self.blocks first to last",
         lambda: final_norm(chain(list(reversed(blocks)), attn_mask))),
        ("it applies final_norm after every block: apply it once, to the last block's output",
         lambda: chain(blocks, attn_mask, norm_each=True)),
        ("it does not apply final_norm: return self.final_norm(x) after the last block",
         lambda: chain(blocks, attn_mask)),
    ]


def norm_mistakes(local, x, target, stored: float = 0.0):
    """(description, values) for the wrong lists ffn_grad_norms returns, on the float64 stack ``local``.
    ``stored``: the .grad already on the parameters, which a .backward() adds to."""
    blocks = list(local.blocks)
    ffns = [p for block in blocks for p in block.ffn.parameters()]
    targets = [block.ffn[2].weight for block in blocks] + [block.ffn[0].weight for block in blocks] + \
        [block.ffn[2].bias for block in blocks]
    loss = F.mse_loss(local(x.double()), target.double())
    grads = torch.autograd.grad(loss, targets + ffns, allow_unused=True)
    n = len(blocks)
    second, first, bias = grads[:n], grads[n:2 * n], grads[2 * n:3 * n]
    per_block = len(ffns) // n
    whole = [torch.cat([g.flatten() for g in grads[3 * n + i * per_block:3 * n + (i + 1) * per_block]]).norm().item()
             for i in range(n)]
    found = [
        ("it takes the gradient of ffn[0].weight: take that of ffn[2].weight, the second Linear",
         [g.norm().item() for g in first]),
        ("it takes the gradient of ffn[2].bias: take that of ffn[2].weight", [g.norm().item() for g in bias]),
        ("it differentiates the sum of the squared errors: F.mse_loss takes their mean",
         [g.norm().item() * x.numel() for g in second]),
        ("it returns the squared norms: take the norm itself (g.norm())", [g.pow(2).sum().item() for g in second]),
        ("it takes the norm of the gradients of all the feed-forward's parameters: take ffn[2].weight's alone",
         whole),
        ("it lists the blocks last first: return the norms in block order", [g.norm().item() for g in second][::-1]),
    ]
    if stored:
        found.append(("it reads .grad after .backward(), which adds to the gradients already stored on the "
                      "parameters: use torch.autograd.grad(loss, weights), or zero the gradients first",
                      [(g + stored).norm().item() for g in second]))
    return found
