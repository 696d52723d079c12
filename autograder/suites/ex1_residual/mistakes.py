"""The wrong answers learners give in ex1, computed here so that a failed check can name the mistake.

Each list holds (description, compute) pairs (see ``checks.known_mistake``); a description ends
the failure message: what the answer did and what to do instead, never an input.
"""

import torch

# ResidualBlock: what forward returns, as a function of x and the sublayer f (float64 tensors and modules).
BLOCK = [
    ("it returns self.sublayer(x) alone: add the input x back", lambda x, f: f(x)),
    ("it applies the sublayer twice, to its own output: call it once, on x", lambda x, f: x + f(f(x))),
    ("it adds the sublayer's output twice: add it once", lambda x, f: x + 2 * f(x)),
]
DETACHED = "the shortcut is detached, so no gradient flows through it: add x itself, not x.detach() or x.data"


def block_mistakes(x, local):
    """Each wrong ResidualBlock output for x, with the sublayer ``local`` (float64), in x's dtype."""

    def output(f):
        with torch.no_grad():
            return f(x.double(), local).to(x.dtype)

    return [(description, lambda f=f: output(f)) for description, f in BLOCK]


def block_gradient_mistakes(x, local, dout, forward_right: bool):
    """The gradient with respect to x of each wrong ResidualBlock. With a right forward, only a detached
    shortcut can be at fault: its gradient is the sublayer's alone."""

    def gradient(f):
        leaf = x.double().clone().requires_grad_()
        return torch.autograd.grad(f(leaf, local), leaf, dout.double())[0]

    if forward_right:
        return [(DETACHED, lambda: gradient(lambda x, f: f(x)))]
    return [(description, lambda f=f: gradient(f)) for description, f in BLOCK]


def norm_mistakes(local, x):
    """(description, value) for the wrong numbers input_grad_norm gives: the gradient of the mean, the squared
    norm, the mean of the rows' norms."""
    leaf = x.double().requires_grad_()
    out = local(leaf)
    (grad,) = torch.autograd.grad(out.sum(), leaf)
    return [
        ("it differentiates model(x).mean(): differentiate model(x).sum()", grad.norm().item() / out.numel()),
        ("it returns the squared norm: take the square root of the sum of squares (grad.norm())",
         grad.pow(2).sum().item()),
        ("it averages the norms of the rows: take the norm of the whole gradient",
         grad.norm(dim=-1).mean().item() if grad.dim() > 1 else None),
    ]


def stored_grad_mistake(local, x, stored: float, found: dict) -> str:
    """Why the .grad stored on the model's parameters changed (``found``: name -> its .grad after the call)."""
    leaf = x.double().requires_grad_()
    params = dict(local.named_parameters())
    grads = dict(zip(params, torch.autograd.grad(local(leaf).sum(), list(params.values()))))

    def everywhere(expected) -> bool:
        return all(isinstance(found.get(name), torch.Tensor) and torch.allclose(
            found[name].double(), expected(grads[name]), atol=1e-9) for name in grads)

    advice = "use torch.autograd.grad(out, x_copy), which leaves them alone"
    if everywhere(lambda g: g + stored):
        return f"input_grad_norm added its gradients into the .grad stored on the model's parameters " \
               f"(.backward() accumulates): {advice}"
    if everywhere(lambda g: g):
        return f"input_grad_norm replaced the .grad stored on the model's parameters (zero_grad() then " \
               f".backward()): {advice}"
    return "input_grad_norm changed the .grad stored on the model's parameters"
