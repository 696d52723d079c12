"""The wrong batch norms learners write, computed here so that a failed check can name the mistake.

``batch_norm`` below is the right computation with knobs, one per known mistake; ``MISTAKES``
lists (description, knobs). A description ends the failure message ("... is off by up to 0.3:
<description>"): what the answer did and what to do instead, never an input.
"""

from __future__ import annotations

import torch


def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5, *, over="channel",
               correction=0, eps_outside=False, swap=False, detach="", eval_batch=False, running_n="all",
               running_correction=1, reversed_momentum=False, update=True, update_in_eval=False):
    """(output, running_mean after, running_var after) in float64, with the knobs' mistakes.

    ``over``: the values each statistic is taken over: "channel" (right), "position" (dimension 0 only, one
    statistic per channel and position), "sample" (each sample's last dimension, like LayerNorm).
    ``detach``: the statistics cut from the graph: "both", "mean" or "var".
    """
    x, weight, bias, running_mean, running_var = (t.double() for t in (x, weight, bias, running_mean, running_var))
    running_mean, running_var = running_mean.clone(), running_var.clone()
    shape = [1, -1] + [1] * (x.dim() - 2)
    dims = [0] + list(range(2, x.dim()))
    stats = {"channel": (dims, shape), "position": ([0], [1, *x.shape[1:]]), "sample": ([-1], None)}[over]
    if training or eval_batch:
        if over == "sample":
            mean = x.mean(-1, keepdim=True)
            var = x.var(-1, keepdim=True, correction=correction)
        else:
            mean = x.mean(stats[0]).reshape(stats[1])
            var = x.var(stats[0], correction=correction).reshape(stats[1])
        mean = mean.detach() if detach in ("both", "mean") else mean
        var = var.detach() if detach in ("both", "var") else var
    else:
        mean, var = running_mean.reshape(shape), running_var.reshape(shape)
    if (training and update) or update_in_eval:
        batch_mean, batch_var = x.detach().mean(dims), x.detach().var(dims, correction=0)
        n = x.numel() // x.shape[1] if running_n == "all" else x.shape[0]
        unbiased = batch_var * n / (n - running_correction) if n > running_correction else batch_var * float("inf")
        keep = momentum if reversed_momentum else 1 - momentum
        running_mean.mul_(keep).add_((1 - keep) * batch_mean)
        running_var.mul_(keep).add_((1 - keep) * unbiased)
    scale = torch.sqrt(var) + eps if eps_outside else torch.sqrt(var + eps)
    w, b = (bias, weight) if swap else (weight, bias)
    return (x - mean) / scale * w.reshape(shape) + b.reshape(shape), running_mean, running_var


MISTAKES = [
    ("it normalizes with the unbiased variance (divide by n - 1): normalize with the biased one (divide by n)",
     {"correction": 1}),
    ("running_var uses the biased variance of the batch: update it with the unbiased one (divide by n - 1)",
     {"running_correction": 0}),
    ("the momentum is reversed: new = (1 - momentum) * old + momentum * batch statistic", {"reversed_momentum": True}),
    ("in eval mode it uses the batch's statistics: normalize with the running statistics (running_mean, "
     "running_var)", {"eval_batch": True}),
    ("in eval mode it still updates running_mean and running_var: leave them unchanged",
     {"update_in_eval": True}),
    ("it normalizes each sample over its last dimension, like LayerNorm: BatchNorm normalizes each channel over "
     "the batch", {"over": "sample", "update": False}),
    ("it takes the statistics over the batch only, separately for each position: for (N, C, L) inputs take them "
     "over N and L", {"over": "position"}),
    ("running_var's correction counts the batch size N only: n is the number of values per channel (N * L)",
     {"running_n": "batch"}),
    ("it adds eps outside the square root: divide by sqrt(var + eps), not by sqrt(var) + eps",
     {"eps_outside": True}),
    ("it swaps weight and bias: multiply by weight, then add bias", {"swap": True}),
]
# Mistakes whose answer depends on the eps or momentum the call is given.
EPS_LEFT_OUT = "it leaves eps out: divide by sqrt(var + eps)"
EPS_CONSTANT = "it uses eps = 1e-5 whatever eps it is given: use the eps argument"
MOMENTUM_CONSTANT = "it updates the running statistics with momentum 0.1 whatever momentum it is given: use the " \
                    "momentum argument"
DETACHED = {
    "both": "no gradient flows through the batch mean and variance: compute the statistics you normalize with "
            "outside torch.no_grad(), without .detach()",
    "mean": "no gradient flows through the batch mean: compute it without .detach() or torch.no_grad()",
    "var": "no gradient flows through the batch variance: compute it without .detach() or torch.no_grad()",
}


def variants(args, training, momentum=0.1, eps=1e-5):
    """(description, (output, running_mean, running_var)) for each mistake, on batch_norm's arguments ``args``."""
    found = [(description, lambda knobs=knobs: batch_norm(*args, training, momentum, eps, **knobs))
             for description, knobs in MISTAKES]
    found.append((EPS_LEFT_OUT, lambda: batch_norm(*args, training, momentum, 0.0)))
    if eps != 1e-5:
        found.append((EPS_CONSTANT, lambda: batch_norm(*args, training, momentum, 1e-5)))
    if momentum != 0.1:
        found.append((MOMENTUM_CONSTANT, lambda: batch_norm(*args, training, 0.1, eps)))
    return found


def mistakes(args, training, which: int, dtype, momentum=0.1, eps=1e-5):
    """The (description, compute) pairs for ``checks.assert_close``: ``which`` picks the output (0), running_mean
    (1) or running_var (2) of each mistake, in ``dtype``."""
    return [(description, lambda compute=compute: compute()[which].to(dtype))
            for description, compute in variants(args, training, momentum, eps)]


def gradient_mistakes(args, dout, index: int):
    """The gradient with respect to x (0), weight (1) or bias (2) of each training-mode mistake."""

    def gradient(knobs, eps=1e-5):
        leaves = [t.double().clone().requires_grad_() for t in args[:3]]
        out = batch_norm(*leaves, *args[3:], True, eps=eps, **knobs)[0]
        return torch.autograd.grad(out, leaves[index], dout.double())[0]

    found = [(description, lambda which=which: gradient({"detach": which})) for which, description in DETACHED.items()]
    found += [(description, lambda knobs=knobs: gradient(knobs)) for description, knobs in MISTAKES]
    return found + [(EPS_LEFT_OUT, lambda: gradient({}, eps=0.0))]


def module_mistakes(args, training: bool, momentum: float, eps: float):
    """(description, compute) for the wrong BatchNorm1d modules: ``compute()`` is the (output, running_mean,
    running_var) the module's step gives, on batch_norm's arguments ``args`` built from the module's state."""
    x = args[0]
    found = [("it normalizes with the unbiased variance (divide by n - 1): normalize with the biased one (divide by "
              "n)", lambda: batch_norm(*args, training, momentum, eps, correction=1)),
             ("its running statistics did not change: pass the module's own buffers to batch_norm, not copies, so "
              "that they are updated in place", lambda: (batch_norm(*args, training, momentum, eps)[0], *args[3:]))]
    if not training:
        found.append(("after .eval() it still uses the batch's statistics and updates the running ones: pass "
                      "self.training on to batch_norm", lambda: batch_norm(*args, True, momentum, eps)))
    if momentum != 0.1:
        found.append(("it updates the running statistics with momentum 0.1, not the momentum it was built with: "
                      "pass self.momentum on to batch_norm", lambda: batch_norm(*args, training, 0.1, eps)))
    if eps != 1e-5:
        found.append(("it normalizes with eps 1e-5, not the eps it was built with: pass self.eps on to batch_norm",
                      lambda: batch_norm(*args, training, momentum, 1e-5)))
    if x.dim() == 3:
        def flattened():
            flat = (x.reshape(-1, x.shape[1]), *args[1:])
            out, mean, var = batch_norm(*flat, training, momentum, eps)
            return out.reshape(x.shape), mean, var

        found.append(("it reshapes an (N, C, L) batch to (N * L, C) without moving the channels: every column then "
                      "mixes channels; pass x to batch_norm as it is", flattened))
    return found


def step_mistake(got, args, training: bool, momentum: float, eps: float, tolerance: dict) -> str | None:
    """The description of the module mistake whose (output, running_mean, running_var) all equal ``got``."""
    for description, compute in module_mistakes(args, training, momentum, eps):
        try:
            wrong = compute()
        except Exception:  # the mistake cannot be made on this input
            continue
        if all(isinstance(a, torch.Tensor) and a.shape == w.shape and torch.allclose(
                a.double(), w.double(), **tolerance) for a, w in zip(got, wrong)):
            return description
    return None
