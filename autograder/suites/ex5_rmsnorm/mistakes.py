"""The wrong RMSNorms learners write, computed here so that a failed check can name the mistake.

Each entry is (description, function of x, weight, eps); a description ends the failure message
("... is off by up to 0.4: <description>"): what the answer did and what to do instead, never an input.
"""

import torch


def rms_norm(x, w, eps, dims=-1, centre=False, squares=True, reduce="mean", weight=True):
    """x / sqrt(mean(x^2) + eps) * w with one thing changed: the dimensions, a re-centred x, the mean
    absolute value instead of the squares, a sum instead of a mean, no weight."""
    if centre:
        x = x - x.mean(-1, keepdim=True)
    values = x.pow(2) if squares else x.abs()
    ms = values.sum(dim=dims, keepdim=True) if reduce == "sum" else values.mean(dim=dims, keepdim=True)
    out = x / torch.sqrt(ms + eps)
    return out * w if weight else out


def every_dim(x):
    return tuple(range(x.dim()))


FORWARD = [
    ("it subtracts the mean first: RMSNorm does not re-centre, it divides x by its root mean square",
     lambda x, w, eps: rms_norm(x, w, eps, centre=True)),
    ("it divides by the root of the SUM of the squares: take the root of their MEAN",
     lambda x, w, eps: rms_norm(x, w, eps, reduce="sum")),
    ("it adds eps outside the square root: divide by sqrt(mean(x^2) + eps)",
     lambda x, w, eps: x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * w),
    ("it leaves eps out: divide by sqrt(mean(x^2) + eps)", lambda x, w, eps: rms_norm(x, w, 0.0)),
    ("it normalizes with eps = 1e-6 whatever eps it is given: use the eps argument",
     lambda x, w, eps: rms_norm(x, w, 1e-6) if eps != 1e-6 else None),
    ("it takes the mean square over every element of x: take it over the last dimension, within each row",
     lambda x, w, eps: rms_norm(x, w, eps, dims=every_dim(x))),
    ("it takes the mean square over dimension 1: take it over the last dimension, whatever the leading ones",
     lambda x, w, eps: rms_norm(x, w, eps, dims=1)),
    ("it divides by the root of the mean absolute value: use the mean of the squares",
     lambda x, w, eps: rms_norm(x, w, eps, squares=False)),
    ("it leaves out the weight: multiply the normalized x by weight", lambda x, w, eps: rms_norm(x, w, eps,
                                                                                            weight=False)),
]
# Mistakes only the gradient of a float64 input shows.
GRADIENT = [
    ("no gradient flows through the mean square: compute it from x itself, without .detach()",
     lambda x, w, eps: x / torch.sqrt(x.pow(2).mean(-1, keepdim=True).detach() + eps) * w),
    ("it computes the mean square of a float64 input in float32: keep float64 in float64",
     lambda x, w, eps: x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * w),
    ("it computes a float64 input in float32: keep float64 in float64",
     lambda x, w, eps: rms_norm(x.float(), w.float(), eps).to(x.dtype)),
]


def forward_mistakes(x, w, eps=1e-6):
    """Each wrong rms_norm of (x, w), computed in float64 and rounded to x's dtype."""
    x64, w64 = x.double(), w.double()
    return [(description, lambda f=f: f(x64, w64, eps).to(x.dtype)) for description, f in FORWARD]


def gradient_mistakes(x, w, dout, eps, index):
    """The gradient with respect to x (0) or weight (1) of each wrong rms_norm, in float64."""

    def gradient(f):
        leaves = [t.double().clone().requires_grad_() for t in (x, w)]
        return torch.autograd.grad(f(*leaves, eps), leaves[index], dout.double(), allow_unused=True)[0]

    return [(description, lambda f=f: gradient(f)) for description, f in GRADIENT + FORWARD]


def half_mistakes(x, w, eps=1e-6):
    """(description, output) of the wrong ways to treat a float16 or bfloat16 input."""
    return [
        (f"it computes in {x.dtype} itself, where the squares overflow or round away: compute the statistics "
         f"and the normalization in float32, then cast back", rms_norm(x, w, eps)),
        (f"it normalizes in {x.dtype}: only the statistics are in float32; compute x / rms in float32 too and "
         f"round once, when you cast back",
         x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * w),
    ]


def module_mistakes(sub, module, x, w, eps, expected):
    """What an RMSNorm module's forward gives when it loses its eps or re-centres x first."""
    try:
        stored = sub.getattr(module, "eps") == eps
    except Exception:  # no eps attribute: the stored-eps test names that
        stored = False
    lost_eps = ("forward does not pass self.eps on to rms_norm: it normalizes with the default eps 1e-6" if stored
                else "it normalizes with the default eps 1e-6: keep the eps RMSNorm is built with in self.eps and "
                     "pass it on")
    return [(lost_eps, lambda: expected(x, w, 1e-6) if eps != 1e-6 else None),
            ("it subtracts the mean before rms_norm: RMSNorm does not re-centre",
             lambda: expected(x - x.mean(-1, keepdim=True), w, eps))]
