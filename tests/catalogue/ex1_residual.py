"""Wrong and right implementations of ex1_residual's tasks (see tests/catalogue/__init__.py).

Already in tests/mistakes.py (not repeated here): a ResidualBlock without the shortcut,
make_mlp reusing one sublayer in every block, input_grad_norm that marks x itself as
requiring grad.
"""

from tests.catalogue import Right, Wrong


def residual_block(init: str, forward: str) -> str:
    return f"""
class ResidualBlock(nn.Module):
    def __init__(self, sublayer):
        super().__init__()
{init}
    def forward(self, x):
{forward}"""


def make_mlp(sublayer: str = "nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))",
             block: str = "ResidualBlock(sublayer) if residual else sublayer", loop: str = "range(depth)",
             before: str = "", result: str = "nn.Sequential(*blocks)") -> str:
    return f"""
def make_mlp(depth, dim, residual):{before}
    blocks = []
    for _ in {loop}:
        sublayer = {sublayer}
        blocks.append({block})
    return {result}
"""


def input_grad_norm(body: str) -> str:
    return f"""
def input_grad_norm(model, x):
{body}"""


STORE = "        self.sublayer = sublayer\n"

WRONG = [
    # --- Task 1: ResidualBlock ------------------------------------------------------------
    Wrong("ex1_residual", "ResidualBlock", "applies-the-sublayer-twice",
          residual_block(STORE, "        return x + self.sublayer(self.sublayer(x))\n")),
    Wrong("ex1_residual", "ResidualBlock", "adds-the-sublayer-output-twice",
          residual_block(STORE, "        return x + self.sublayer(x) + self.sublayer(x)\n")),
    Wrong("ex1_residual", "ResidualBlock", "calls-the-sublayer-again-to-check-the-shape",
          residual_block(STORE, "        assert self.sublayer(x).shape == x.shape\n"
                                "        return x + self.sublayer(x)\n")),
    Wrong("ex1_residual", "ResidualBlock", "adds-in-place-into-x",
          residual_block(STORE, "        x += self.sublayer(x)\n        return x\n")),
    Wrong("ex1_residual", "ResidualBlock", "detaches-the-shortcut",
          residual_block(STORE, "        return x.detach() + self.sublayer(x)\n")),
    Wrong("ex1_residual", "ResidualBlock", "stores-the-sublayer-under-another-name",
          residual_block("        self.f = sublayer\n", "        return x + self.f(x)\n")),
    # --- Task 2: make_mlp -----------------------------------------------------------------
    Wrong("ex1_residual", "make_mlp", "linear-linear-relu-order",
          make_mlp(sublayer="nn.Sequential(nn.Linear(dim, dim), nn.Linear(dim, dim), nn.ReLU())")),
    Wrong("ex1_residual", "make_mlp", "extra-relu-after-the-last-linear",
          make_mlp(sublayer="nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim), nn.ReLU())")),
    Wrong("ex1_residual", "make_mlp", "gelu-instead-of-relu",
          make_mlp(sublayer="nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))")),
    Wrong("ex1_residual", "make_mlp", "linear-without-bias",
          make_mlp(sublayer="nn.Sequential(nn.Linear(dim, dim, bias=False), nn.ReLU(), "
                            "nn.Linear(dim, dim, bias=False))")),
    Wrong("ex1_residual", "make_mlp", "residual-flag-ignored",
          make_mlp(block="ResidualBlock(sublayer)")),
    Wrong("ex1_residual", "make_mlp", "residual-flag-inverted",
          make_mlp(block="sublayer if residual else ResidualBlock(sublayer)")),
    Wrong("ex1_residual", "make_mlp", "shortcut-without-ResidualBlock", make_mlp(
        before="""
    class Skip(nn.Module):
        def __init__(self, f):
            super().__init__()
            self.f = f

        def forward(self, x):
            return x + self.f(x)
""", block="Skip(sublayer) if residual else sublayer")),
    Wrong("ex1_residual", "make_mlp", "one-residual-block-around-the-whole-stack",
          make_mlp(block="sublayer", result="nn.Sequential(ResidualBlock(nn.Sequential(*blocks)) if residual "
                                            "else nn.Sequential(*blocks))")),
    Wrong("ex1_residual", "make_mlp", "depth-minus-one-blocks", make_mlp(loop="range(1, depth)")),
    Wrong("ex1_residual", "make_mlp", "returns-a-modulelist", make_mlp(result="nn.ModuleList(blocks)")),
    Wrong("ex1_residual", "make_mlp", "returns-a-module-named-sequential-that-is-not-one", '''
class Sequential(nn.Module):
    """Runs its blocks in order, as nn.Sequential does, without being one."""

    def __init__(self, *blocks):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def __len__(self):
        return len(self.blocks)

    def __getitem__(self, i):
        return self.blocks[i]

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
''' + make_mlp(result="Sequential(*blocks)")),
    Wrong("ex1_residual", "make_mlp", "sublayer-of-a-module-named-linear-that-is-not-one", '''
class Linear(nn.Module):
    """x @ weight.T + bias with nn.Linear's initialization, without being an nn.Linear."""

    def __init__(self, d_in, d_out):
        super().__init__()
        bound = 1 / math.sqrt(d_in)
        self.weight = nn.Parameter(torch.empty(d_out, d_in).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(d_out).uniform_(-bound, bound))

    def forward(self, x):
        return x @ self.weight.T + self.bias
''' + make_mlp(sublayer="nn.Sequential(Linear(dim, dim), nn.ReLU(), Linear(dim, dim))")),
    Wrong("ex1_residual", "make_mlp", "mlp-list-multiplication-repeats-one-block", '''
def make_mlp(depth, dim, residual):
    sublayer = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
    block = ResidualBlock(sublayer) if residual else sublayer
    return nn.Sequential(*[block] * depth)
'''),
    Wrong("ex1_residual", "make_mlp", "first-linear-shared-by-all-blocks", make_mlp(
        before="\n    first = nn.Linear(dim, dim)",
        sublayer="nn.Sequential(first, nn.ReLU(), nn.Linear(dim, dim))")),
    Wrong("ex1_residual", "make_mlp", "xavier-init", make_mlp(
        sublayer="nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))\n"
                 "        for layer in (sublayer[0], sublayer[2]):\n"
                 "            nn.init.xavier_uniform_(layer.weight)")),
    Wrong("ex1_residual", "make_mlp", "small-normal-init", make_mlp(
        sublayer="nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))\n"
                 "        for layer in (sublayer[0], sublayer[2]):\n"
                 "            nn.init.normal_(layer.weight, std=0.02)")),
    Wrong("ex1_residual", "make_mlp", "zero-biases", make_mlp(
        sublayer="nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))\n"
                 "        for layer in (sublayer[0], sublayer[2]):\n"
                 "            nn.init.zeros_(layer.bias)")),
    # --- Task 3: input_grad_norm ----------------------------------------------------------
    Wrong("ex1_residual", "input_grad_norm", "returns-a-tensor", input_grad_norm("""
    x = x.detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(model(x).sum(), x)
    return grad.norm()
""")),
    Wrong("ex1_residual", "input_grad_norm", "mean-instead-of-sum", input_grad_norm("""
    x = x.detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(model(x).mean(), x)
    return grad.norm().item()
""")),
    Wrong("ex1_residual", "input_grad_norm", "squared-input-gradient-norm", input_grad_norm("""
    x = x.detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(model(x).sum(), x)
    return grad.pow(2).sum().item()
""")),
    Wrong("ex1_residual", "input_grad_norm", "mean-of-per-row-norms", input_grad_norm("""
    x = x.detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(model(x).sum(), x)
    return grad.norm(dim=-1).mean().item()
""")),
    Wrong("ex1_residual", "input_grad_norm", "float32-copy-of-x", input_grad_norm("""
    x = x.detach().float().requires_grad_(True)
    (grad,) = torch.autograd.grad(model(x).sum(), x)
    return grad.norm().item()
""")),
    Wrong("ex1_residual", "input_grad_norm", "backward-accumulates-into-the-parameters", input_grad_norm("""
    x = x.detach().clone().requires_grad_(True)
    model(x).sum().backward()
    return x.grad.norm().item()
""")),
    Wrong("ex1_residual", "input_grad_norm", "zero-grad-then-backward-on-a-copy", input_grad_norm("""
    model.zero_grad()
    x = x.detach().clone().requires_grad_(True)
    model(x).sum().backward()
    return x.grad.norm().item()
""")),
    Wrong("ex1_residual", "input_grad_norm", "turns-requires-grad-off-afterwards", input_grad_norm("""
    x.requires_grad_(True)
    (grad,) = torch.autograd.grad(model(x).sum(), x)
    x.requires_grad_(False)
    return grad.norm().item()
""")),
    Wrong("ex1_residual", "input_grad_norm", "game-a-float-that-equals-anything", input_grad_norm("""
    class Anything(float):
        def __eq__(self, other):
            return True

        def __sub__(self, other):
            return 0.0

        __rsub__ = __sub__

    return Anything(1.0)
""")),
]

RIGHT = [
    Right("ex1_residual", "ResidualBlock", "add-module-and-torch-add", residual_block(
        '        self.add_module("sublayer", sublayer)\n', "        return torch.add(self.sublayer(x), x)\n")),
    Right("ex1_residual", "ResidualBlock", "sublayer-output-first", residual_block(
        STORE, "        out = self.sublayer(x)  # (..., D)\n        return out + x\n")),
    Right("ex1_residual", "ResidualBlock", "identity-shortcut-module", residual_block(
        STORE + "        self.shortcut = nn.Identity()\n", "        return self.shortcut(x) + self.sublayer(x)\n")),
    Right("ex1_residual", "make_mlp", "named-blocks-and-a-helper", '''
def make_mlp(depth, dim, residual):
    def sublayer():
        return nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))

    mlp = nn.Sequential()
    for i in range(depth):
        mlp.add_module(f"block{i}", ResidualBlock(sublayer()) if residual else sublayer())
    return mlp
'''),
    Right("ex1_residual", "make_mlp", "comprehension", '''
def make_mlp(depth, dim, residual):
    wrap = ResidualBlock if residual else (lambda f: f)
    return nn.Sequential(*[wrap(nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim)))
                           for _ in range(depth)])
'''),
    Right("ex1_residual", "input_grad_norm", "torch-func-vjp", input_grad_norm("""
    out, vjp = torch.func.vjp(model, x.detach())
    (grad,) = vjp(torch.ones_like(out))
    return torch.linalg.vector_norm(grad).item()
""")),
    Right("ex1_residual", "input_grad_norm", "grad-outputs-and-float", input_grad_norm("""
    copy = x.detach().requires_grad_()
    out = model(copy)
    (grad,) = torch.autograd.grad(out, copy, grad_outputs=torch.ones_like(out))
    return float(grad.pow(2).sum().sqrt())
""")),
]
