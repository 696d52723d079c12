"""ex3_batchnorm: wrong and differently-right versions of the two graded cells.

Most ``batch_norm`` mistakes are one edit of a correct cell (``BATCH_NORM`` below, which
has one statement per line so that an edit names exactly what changed); the others, and
the ``BatchNorm1d`` ones, are written out. Mistakes the public self-checks already catch
are in ``tests/mistakes.py`` (biased running_var, reversed momentum, eval mode with batch
statistics, LayerNorm-like per-sample statistics) and are not repeated here.
"""

from tests.catalogue import Right, Wrong

A = "ex3_batchnorm"

BATCH_NORM = '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    dims = [0] + list(range(2, x.dim()))
    shape = [1, -1] + [1] * (x.dim() - 2)
    if training:
        mean = x.mean(dims)
        var = x.var(dims, unbiased=False)
        n = x.numel() // x.shape[1]
        with torch.no_grad():
            running_mean.mul_(1 - momentum).add_(momentum * mean)
            running_var.mul_(1 - momentum).add_(momentum * var * n / (n - 1))
    else:
        mean, var = running_mean, running_var
    x_hat = (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + eps)
    return x_hat * weight.reshape(shape) + bias.reshape(shape)
'''


def batch_norm_with(*edits: tuple[str, str]) -> str:
    """BATCH_NORM with each (old, new) edit applied; every old text must occur exactly once."""
    source = BATCH_NORM
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return source


def bn(what: str, *edits: tuple[str, str]) -> Wrong:
    return Wrong(A, "batch_norm", what, batch_norm_with(*edits))


# A BatchNorm1d whose __init__ and forward are the reference's unless replaced.
MODULE_INIT = '''    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
'''
MODULE_FORWARD = '''    def forward(self, x):
        return batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var,
                          self.training, self.momentum, self.eps)
'''


def module(what: str, init: str = MODULE_INIT, forward: str = MODULE_FORWARD) -> Wrong:
    return Wrong(A, "BatchNorm1d", what, f"\nclass BatchNorm1d(nn.Module):\n{init}\n{forward}")


WRONG = [
    # --- batch_norm: the normalization ----------------------------------------------------
    bn("unbiased-variance-for-the-normalization",
       ("var = x.var(dims, unbiased=False)", "var = x.var(dims)")),
    bn("eps-outside-the-root",
       ("torch.sqrt(var.reshape(shape) + eps)", "(torch.sqrt(var.reshape(shape)) + eps)")),
    bn("eps-ignored", ("torch.sqrt(var.reshape(shape) + eps)", "torch.sqrt(var.reshape(shape))")),
    bn("eps-argument-ignored", ("torch.sqrt(var.reshape(shape) + eps)", "torch.sqrt(var.reshape(shape) + 1e-5)")),
    bn("weight-and-bias-swapped",
       ("x_hat * weight.reshape(shape) + bias.reshape(shape)", "x_hat * bias.reshape(shape) + weight.reshape(shape)")),
    bn("statistics-computed-under-no-grad",  # right values, but no gradient through mean and var
       ("""        mean = x.mean(dims)
        var = x.var(dims, unbiased=False)
        n = x.numel() // x.shape[1]
        with torch.no_grad():
""", """        n = x.numel() // x.shape[1]
        with torch.no_grad():
            mean = x.mean(dims)
            var = x.var(dims, unbiased=False)
""")),
    bn("statistics-detached", ("var = x.var(dims, unbiased=False)", "var = x.var(dims, unbiased=False).detach()")),
    bn("modifies-x-in-place",
       ("x_hat = (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + eps)",
        "x_hat = x.sub_(mean.reshape(shape)).div_(torch.sqrt(var.reshape(shape) + eps))")),
    # --- batch_norm: the axes --------------------------------------------------------------
    Wrong(A, "batch_norm", "only-2d-inputs", '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    if training:
        mean = x.mean(0)
        var = x.var(0, unbiased=False)
        n = x.shape[0]
        with torch.no_grad():
            running_mean.mul_(1 - momentum).add_(momentum * mean)
            running_var.mul_(1 - momentum).add_(momentum * var * n / (n - 1))
    else:
        mean, var = running_mean, running_var
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
'''),
    Wrong(A, "batch_norm", "statistics-over-the-batch-only-per-position", '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    shape = [1, -1] + [1] * (x.dim() - 2)
    c = x.shape[1]
    if training:
        mean = x.mean(0)  # (C,) or (C, L): one mean per channel and position
        var = x.var(0, unbiased=False)
        n = x.shape[0]
        with torch.no_grad():
            running_mean.mul_(1 - momentum).add_(momentum * mean.reshape(c, -1).mean(1))
            running_var.mul_(1 - momentum).add_(momentum * (var * n / (n - 1)).reshape(c, -1).mean(1))
    else:
        mean, var = running_mean.reshape(shape[1:]), running_var.reshape(shape[1:])
    return (x - mean) / torch.sqrt(var + eps) * weight.reshape(shape) + bias.reshape(shape)
'''),
    bn("bessel-correction-counts-only-the-batch", ("n = x.numel() // x.shape[1]", "n = x.shape[0]")),
    # --- batch_norm: the running statistics ------------------------------------------------
    bn("running-stats-rebound-not-updated-in-place",
       ("""            running_mean.mul_(1 - momentum).add_(momentum * mean)
            running_var.mul_(1 - momentum).add_(momentum * var * n / (n - 1))""",
        """            running_mean = (1 - momentum) * running_mean + momentum * mean
            running_var = (1 - momentum) * running_var + momentum * var * n / (n - 1)""")),
    bn("momentum-argument-ignored",
       ("""            running_mean.mul_(1 - momentum).add_(momentum * mean)
            running_var.mul_(1 - momentum).add_(momentum * var * n / (n - 1))""",
        """            running_mean.mul_(0.9).add_(0.1 * mean)
            running_var.mul_(0.9).add_(0.1 * var * n / (n - 1))""")),
    Wrong(A, "batch_norm", "running-stats-updated-in-eval-mode-too", '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    dims = [0] + list(range(2, x.dim()))
    shape = [1, -1] + [1] * (x.dim() - 2)
    if training:
        mean, var = x.mean(dims), x.var(dims, unbiased=False)
    else:
        mean, var = running_mean.clone(), running_var.clone()
    with torch.no_grad():
        running_mean.mul_(1 - momentum).add_(momentum * x.mean(dims))
        running_var.mul_(1 - momentum).add_(momentum * x.var(dims))
    return (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + eps) * weight.reshape(shape) + bias.reshape(shape)
'''),
    # --- batch_norm: forbidden built-ins ---------------------------------------------------
    Wrong(A, "batch_norm", "calls-F.batch_norm", '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    return F.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)
'''),
    Wrong(A, "batch_norm", "calls-F.batch_norm-through-getattr", '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    norm = getattr(F, "batch" + "_norm")
    return norm(x, running_mean, running_var, weight, bias, training, momentum, eps)
'''),
    Wrong(A, "batch_norm", "calls-torch.batch_norm", '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    return torch.batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps, False)
'''),
    Wrong(A, "batch_norm", "calls-aten-native_batch_norm", '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    return torch.ops.aten.native_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps)[0]
'''),
    Wrong(A, "batch_norm", "uses-nn.BatchNorm1d-inside", '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    shape = [1, -1] + [1] * (x.dim() - 2)
    bn = nn.BatchNorm1d(x.shape[1], eps=eps, momentum=momentum, affine=False).to(x.dtype)
    bn.running_mean, bn.running_var = running_mean, running_var
    bn.train(training)
    return bn(x) * weight.reshape(shape) + bias.reshape(shape)
'''),
    Wrong(A, "batch_norm", "calls-F.instance_norm-on-the-channels", '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    per_channel = x.transpose(0, 1)  # (C, N, ...)
    flat = per_channel.reshape(1, x.shape[1], -1)  # one "instance" holding every value of each channel
    out = F.instance_norm(flat, running_mean, running_var, weight, bias, use_input_stats=training,
                          momentum=momentum, eps=eps)
    return out.reshape(per_channel.shape).transpose(0, 1)
'''),
    # --- BatchNorm1d: structure ------------------------------------------------------------
    module("parameters-are-plain-tensors", init=MODULE_INIT.replace(
        "nn.Parameter(torch.ones(num_features))", "torch.ones(num_features, requires_grad=True)").replace(
        "nn.Parameter(torch.zeros(num_features))", "torch.zeros(num_features, requires_grad=True)")),
    module("parameters-named-gamma-and-beta", init=MODULE_INIT.replace("self.weight", "self.gamma").replace(
        "self.bias", "self.beta"), forward=MODULE_FORWARD.replace("self.weight", "self.gamma").replace(
        "self.bias", "self.beta")),
    module("weight-and-bias-initialized-the-wrong-way-round", init=MODULE_INIT.replace(
        "nn.Parameter(torch.ones(num_features))", "nn.Parameter(torch.zeros(num_features))", 1).replace(
        "self.bias = nn.Parameter(torch.zeros(num_features))", "self.bias = nn.Parameter(torch.ones(num_features))")),
    module("running-stats-are-plain-attributes", init=MODULE_INIT.replace(
        'self.register_buffer("running_mean", torch.zeros(num_features))',
        "self.running_mean = torch.zeros(num_features)").replace(
        'self.register_buffer("running_var", torch.ones(num_features))',
        "self.running_var = torch.ones(num_features)")),
    module("running-stats-are-frozen-parameters", init=MODULE_INIT.replace(
        'self.register_buffer("running_mean", torch.zeros(num_features))',
        "self.running_mean = nn.Parameter(torch.zeros(num_features), requires_grad=False)").replace(
        'self.register_buffer("running_var", torch.ones(num_features))',
        "self.running_var = nn.Parameter(torch.ones(num_features), requires_grad=False)")),
    module("running-var-starts-at-zeros", init=MODULE_INIT.replace(
        '"running_var", torch.ones(num_features)', '"running_var", torch.zeros(num_features)')),
    # --- BatchNorm1d: behaviour ------------------------------------------------------------
    module("ignores-self.training", forward=MODULE_FORWARD.replace("self.training,", "True,")),
    module("mode-fixed-in-__init__", init=MODULE_INIT + "        self.is_training = True\n",
           forward=MODULE_FORWARD.replace("self.training,", "self.is_training,")),
    module("module-ignores-its-momentum", forward=MODULE_FORWARD.replace(
        "self.training, self.momentum, self.eps)", "self.training, eps=self.eps)")),
    module("module-ignores-its-eps", forward=MODULE_FORWARD.replace(
        "self.training, self.momentum, self.eps)", "self.training, self.momentum)")),
    module("passes-copies-of-the-running-stats", forward=MODULE_FORWARD.replace(
        "self.running_mean, self.running_var", "self.running_mean.clone(), self.running_var.clone()")),
    module("flattens-3d-input-without-moving-the-channels", forward='''    def forward(self, x):
        flat = x.reshape(-1, x.shape[1])  # (N * L, C), but the values of a row come from several channels
        out = batch_norm(flat, self.weight, self.bias, self.running_mean, self.running_var,
                         self.training, self.momentum, self.eps)
        return out.reshape(x.shape)
'''),
    module("own-forward-with-unbiased-variance", forward='''    def forward(self, x):
        dims = [0] + list(range(2, x.dim()))
        shape = [1, -1] + [1] * (x.dim() - 2)
        if self.training:
            mean, var = x.mean(dims), x.var(dims)
            with torch.no_grad():
                self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
                self.running_var.mul_(1 - self.momentum).add_(self.momentum * var)
        else:
            mean, var = self.running_mean, self.running_var
        x_hat = (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + self.eps)
        return x_hat * self.weight.reshape(shape) + self.bias.reshape(shape)
'''),
    # --- BatchNorm1d: forbidden built-ins --------------------------------------------------
    Wrong(A, "BatchNorm1d", "subclasses-nn.BatchNorm1d", '''
class BatchNorm1d(nn.BatchNorm1d):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__(num_features, eps=eps, momentum=momentum)
'''),
    module("forward-calls-F.batch_norm", forward='''    def forward(self, x):
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training, self.momentum, self.eps)
'''),
    module("forward-calls-F.batch_norm-through-getattr", forward='''    def forward(self, x):
        norm = getattr(torch.nn.functional, "batch" + "_norm")
        return norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                    self.training, self.momentum, self.eps)
'''),
    module("forward-calls-aten-native_batch_norm", forward='''    def forward(self, x):
        return torch.ops.aten.native_batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var,
                                                self.training, self.momentum, self.eps)[0]
'''),
    module("forward-uses-an-nn.BatchNorm1d-inside", forward='''    def forward(self, x):
        shape = [1, -1] + [1] * (x.dim() - 2)
        bn = nn.BatchNorm1d(x.shape[1], eps=self.eps, momentum=self.momentum, affine=False)
        bn.running_mean, bn.running_var = self.running_mean, self.running_var
        bn.train(self.training)
        return bn(x) * self.weight.reshape(shape) + self.bias.reshape(shape)
'''),
    module("forward-calls-F.instance_norm", forward='''    def forward(self, x):
        per_channel = x.transpose(0, 1)
        out = F.instance_norm(per_channel.reshape(1, x.shape[1], -1), self.running_mean, self.running_var,
                              self.weight, self.bias, use_input_stats=self.training, momentum=self.momentum,
                              eps=self.eps)
        return out.reshape(per_channel.shape).transpose(0, 1)
'''),
]

RIGHT = [
    Right(A, "batch_norm", "var_mean-rsqrt-and-lerp_", '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    dims = tuple(d for d in range(x.dim()) if d != 1)
    shape = (1, -1) + (1,) * (x.dim() - 2)
    if training:
        var, mean = torch.var_mean(x, dim=dims, unbiased=False)
        n = x.numel() / x.shape[1]
        with torch.no_grad():
            running_mean.lerp_(mean, momentum)
            running_var.lerp_(var * (n / (n - 1)), momentum)
    else:
        mean, var = running_mean, running_var
    return (x - mean.view(shape)) * torch.rsqrt(var.view(shape) + eps) * weight.view(shape) + bias.view(shape)
'''),
    Right(A, "batch_norm", "channels-first-reshape-and-copy_", '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    c = x.shape[1]
    flat = x.transpose(0, 1).reshape(c, -1)  # (C, n): every value of a channel in one row
    if training:
        mean = flat.mean(1)
        var = flat.var(1, unbiased=False)
        with torch.no_grad():
            running_mean.copy_((1 - momentum) * running_mean + momentum * mean)
            running_var.copy_((1 - momentum) * running_var + momentum * flat.var(1, unbiased=True))
    else:
        mean, var = running_mean, running_var
    out = (flat - mean[:, None]) / (var[:, None] + eps).sqrt() * weight[:, None] + bias[:, None]
    return out.reshape(x.transpose(0, 1).shape).transpose(0, 1)
'''),
    Right(A, "batch_norm", "channels-last-with-movedim", '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    h = x.movedim(1, -1)  # (N, C) or (N, L, C): channels last, so that (C,) tensors broadcast
    rows = h.reshape(-1, h.shape[-1])  # (n, C)
    if training:
        mean = rows.mean(0)
        centered = rows - mean
        var = (centered * centered).mean(0)
        n = rows.shape[0]
        with torch.no_grad():
            running_mean.mul_(1 - momentum).add_(momentum * mean)
            running_var.mul_(1 - momentum).add_(momentum * var * (n / (n - 1)))
    else:
        mean, var = running_mean, running_var
    out = (h - mean) / torch.sqrt(var + eps) * weight + bias
    return out.movedim(-1, 1)
'''),
    Right(A, "batch_norm", "loop-over-channels", '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    outs = []
    for c in range(x.shape[1]):
        xc = x[:, c]
        if training:
            mean = xc.mean()
            var = ((xc - mean) ** 2).mean()
            n = xc.numel()
            with torch.no_grad():
                running_mean[c] = (1 - momentum) * running_mean[c] + momentum * mean
                running_var[c] = (1 - momentum) * running_var[c] + momentum * var * n / (n - 1)
        else:
            mean, var = running_mean[c], running_var[c]
        outs.append((xc - mean) / torch.sqrt(var + eps) * weight[c] + bias[c])
    return torch.stack(outs, dim=1)
'''),
    Right(A, "batch_norm", "sums-and-folded-scale-and-shift", '''
def batch_norm(x, weight, bias, running_mean, running_var, training, momentum=0.1, eps=1e-5):
    dims = [0] + list(range(2, x.dim()))
    shape = [1, -1] + [1] * (x.dim() - 2)
    if training:
        n = x.numel() // x.shape[1]
        mean = x.sum(dims) / n
        squares = (x - mean.reshape(shape)).pow(2).sum(dims)
        var = squares / n
        with torch.no_grad():
            running_mean.mul_(1 - momentum).add_(mean, alpha=momentum)
            running_var.mul_(1 - momentum).add_(squares / (n - 1), alpha=momentum)
    else:
        mean, var = running_mean, running_var
    scale = weight / torch.sqrt(var + eps)  # x_hat * weight + bias == x * scale + shift
    return x * scale.reshape(shape) + (bias - mean * scale).reshape(shape)
'''),
    Right(A, "BatchNorm1d", "no-num_batches_tracked-keyword-call-and-reset_parameters", '''
class BatchNorm1d(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.weight = nn.Parameter(torch.empty(num_features))
        self.bias = nn.Parameter(torch.empty(num_features))
        self.register_buffer("running_mean", torch.empty(num_features))
        self.register_buffer("running_var", torch.empty(num_features))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.ones_(self.weight)
        nn.init.zeros_(self.bias)
        self.running_mean.zero_()
        self.running_var.fill_(1.0)

    def forward(self, x):
        return batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var,
                          training=self.training, momentum=self.momentum, eps=self.eps)
'''),
    Right(A, "BatchNorm1d", "own-forward-without-batch_norm", '''
class BatchNorm1d(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
        self.register_buffer("num_batches_tracked", torch.tensor(0))

    def forward(self, x):
        dims = [0] + list(range(2, x.dim()))
        shape = [1, -1] + [1] * (x.dim() - 2)
        if self.training:
            var, mean = torch.var_mean(x, dims, correction=0)
            n = x.numel() // x.shape[1]
            with torch.no_grad():
                self.num_batches_tracked += 1
                self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
                self.running_var.mul_(1 - self.momentum).add_(self.momentum * var * n / (n - 1))
        else:
            mean, var = self.running_mean, self.running_var
        x_hat = (x - mean.reshape(shape)) * torch.rsqrt(var.reshape(shape) + self.eps)
        return x_hat * self.weight.reshape(shape) + self.bias.reshape(shape)
'''),
]
