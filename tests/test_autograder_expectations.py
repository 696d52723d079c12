"""Every expected value is computed where no learner code ran: poisoning the worker earns nothing.

The learner's worker is only believed for the learner's answer. A module part (ex2 ``LayerNorm``,
ex3 ``BatchNorm1d``, ex5 ``RMSNorm``) reports its state and output as data and the reference runs
in the grading process; the trusted models given to learner code (ex1's and ex6's sublayers, ex4's
toy blocks and stacks) get parameters chosen on the grading side, and the expected value is
computed from that copy, never from what the worker says its model holds.

Each attack below is a wrong answer (a module that never normalizes, a block that skips its
branch, a stack that skips its blocks...) plus a patch, at cell time, of something the grader's
reference or fixtures would use in the worker (``torch.sqrt``, ``Tensor.mean``, ``Tensor.__sub__``,
``nn.Module.state_dict``, ``nn.Linear.reset_parameters``, ``nn.Module.load_state_dict``...), or a
state the module reports that would make the expected value NaN. Its baseline is the same wrong
answer without the trick: the attack must measure no more than that on the part it attacks, and
the reference solution keeps full marks in the same run. The source scan flags none of these
patches, so the scores measured are the defence's own.

The first tests check the same rule in the grading process alone, with a worker simulated by a
function (one that answers every call with the same wrong tensor, one that answers nothing but
the module).
"""

import pytest
import torch
import torch.nn.functional as F

from autograder.checks import Handle, Submission, assert_module_matches_function, seeded_state
from autograder.sandboxed import executor, fixtures
from tests.grading import (max_scores, measured_scores, part_scores, reference, results_of, run_grader, with_cells,
                           write_class)

# --- in the grading process -----------------------------------------------------------------------------------


@pytest.fixture
def inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(4, 6, generator=g) * 2 + 1, torch.rand(6, generator=g) + 0.5, torch.randn(6, generator=g)


MODULE = Handle(1, "__main__.LayerNorm", True)


def poisoned_worker(value) -> Submission:
    """A submission whose worker answers ``value`` to every call, the module's and any reference's."""
    return Submission(lambda request: {"value": value})


def worker_answering_only_the_module(value) -> Submission:
    """A submission whose worker answers ``value`` when the module is called, and refuses anything else."""
    def transport(request):
        if request["op"] == "call" and request["target"] == MODULE:
            return {"value": value}
        return {"error": {"type": "BadRequest", "message": "this worker computes nothing but the module"}}
    return Submission(transport)


def check_layer_norm_module(sub, x, w, b):
    expected = fixtures.layer_norm(x.double(), w.double(), b.double()).float()
    assert_module_matches_function(sub, MODULE, x, "layer_norm", (x, w, b, 1e-5), expected, "LayerNorm's output")


def test_a_module_whose_worker_agrees_with_its_wrong_output_still_fails(inputs):
    x, w, b = inputs
    never_normalizes = x * w + b
    with pytest.raises(AssertionError, match="LayerNorm's output is off"):
        check_layer_norm_module(poisoned_worker(never_normalizes), x, w, b)


@pytest.mark.parametrize("normalize", [fixtures.layer_norm, lambda x, w, b: F.layer_norm(x, (6,), w, b)],
                         ids=["as the grader's reference does", "as PyTorch does"])
def test_a_module_that_normalizes_passes_without_the_worker_computing_anything_else(inputs, normalize):
    x, w, b = inputs
    check_layer_norm_module(worker_answering_only_the_module(normalize(x, w, b)), x, w, b)


def test_the_worker_offers_no_function_to_call_only_modules_to_build():
    assert all(isinstance(value, type) for value in executor.CONSTRUCTORS.values())


def test_parameters_drawn_here_are_the_same_every_time_and_leave_the_random_state_alone():
    before = torch.random.get_rng_state()
    first, second = (seeded_state(lambda: fixtures.TanhMLP(3, 4, 2), seed=5) for _ in range(2))
    assert all(torch.equal(first[name], second[name]) for name in first)
    assert torch.equal(torch.random.get_rng_state(), before)


# --- in the sandbox, one grading run per assignment: patches applied while the cells run ------------------------

SQRT_IS_ONE = "torch.sqrt = lambda t, *args, **kwargs: torch.ones_like(t)\n"
MEAN_IS_ZERO = "torch.Tensor.mean = lambda self, *args, **kwargs: torch.zeros_like(self)\n"
SUB_KEEPS_LEFT = "torch.Tensor.__sub__ = lambda a, b: a\n"
DIVISION_KEEPS_LEFT = "torch.Tensor.__truediv__ = lambda a, b: a\n"
# BatchNorm's statistics over every dimension but 1 come out as zeros of shape (C,).
CHANNEL_MEAN_IS_ZERO = ("torch.Tensor.mean = lambda self, *args, **kwargs: "
                        "torch.zeros(self.shape[1], dtype=self.dtype)\n")
SQUARE_IS_ZERO = "torch.Tensor.__pow__ = lambda a, b: torch.zeros_like(a)\n"
# What the worker reports of any model: all zeros.
STATE_DICT_OF_ZEROS = """
_state_dict = nn.Module.state_dict
def _zeros(self, *args, **kwargs):
    return {name: torch.zeros_like(value) for name, value in _state_dict(self, *args, **kwargs).items()}
nn.Module.state_dict = _zeros
"""
# Every nn.Linear built from now on (the grader's fixtures too) starts at zero.
LINEAR_STARTS_AT_ZERO = """
def _zero_init(self):
    nn.init.zeros_(self.weight)
    if self.bias is not None:
        nn.init.zeros_(self.bias)
nn.Linear.reset_parameters = _zero_init
"""
# ... and keeps its zeros whatever the grader loads into it.
LOADING_DOES_NOTHING = "nn.Module.load_state_dict = lambda self, *args, **kwargs: None\n"

# --- wrong answers --------------------------------------------------------------------------------------------

LN_PARAMETERS = """
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
"""
LN_NEVER_NORMALIZES = LN_PARAMETERS + """
    def forward(self, x):
        return x * self.weight + self.bias
"""
LN_CENTRES_ONLY = LN_PARAMETERS + """
    def forward(self, x):
        return (x - x.mean(-1, keepdim=True)) * self.weight + self.bias
"""
# Reports a NaN weight once the grader has loaded one, so that the expected output is NaN too.
LN_NAN_AFTER_LOADING = LN_PARAMETERS + """
    def load_state_dict(self, state, strict=True):
        with torch.no_grad():
            self.weight.fill_(float("nan"))
            self.bias.copy_(state["bias"])
    def forward(self, x):
        return x * self.weight + self.bias
"""
RMS_NEVER_NORMALIZES = """
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
    def forward(self, x):
        return x * self.weight
"""
BN_PARAMETERS = """
class BatchNorm1d(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
"""
# Scales and shifts, shrinks the running statistics, never normalizes.
BN_NEVER_NORMALIZES = BN_PARAMETERS + """
    def forward(self, x):
        shape = [1, -1] + [1] * (x.dim() - 2)
        w, b = self.weight.reshape(shape), self.bias.reshape(shape)
        if self.training:
            with torch.no_grad():
                self.running_mean.mul_(1 - self.momentum)
                self.running_var.mul_(1 - self.momentum)
            return x * w + b
        return (x + (-self.running_mean).reshape(shape)) * w + b
"""
# Centres with the batch mean (and tracks it), never divides by the spread.
BN_CENTRES_ONLY = BN_PARAMETERS + """
    def forward(self, x):
        dims = [0] + list(range(2, x.dim()))
        shape = [1, -1] + [1] * (x.dim() - 2)
        if self.training:
            mean = x.mean(dim=dims)
            with torch.no_grad():
                self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
                self.running_var.mul_(1 - self.momentum)
        else:
            mean = self.running_mean
        return (x - mean.reshape(shape)) * self.weight.reshape(shape) + self.bias.reshape(shape)
"""
# Right in training mode; ignores eval mode (always the batch statistics, always updating them).
BN_TRAINING_MODE = """
    def batch_statistics(self, x):
        dims = [0] + list(range(2, x.dim()))
        shape = [1, -1] + [1] * (x.dim() - 2)
        mean, var = x.mean(dim=dims), x.var(dim=dims, unbiased=False)
        n = x.numel() // x.shape[1]
        with torch.no_grad():
            self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
            self.running_var.mul_(1 - self.momentum).add_(self.momentum * var * n / max(n - 1, 1))
        x_hat = (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + self.eps)
        return x_hat * self.weight.reshape(shape) + self.bias.reshape(shape)
"""
BN_IGNORES_EVAL_MODE = BN_PARAMETERS + BN_TRAINING_MODE + """
    def forward(self, x):
        return self.batch_statistics(x)
"""
# ... and in eval mode reports a negative running_var (sqrt(running_var + eps) is NaN) and answers NaN.
BN_NAN_IN_EVAL_MODE = BN_PARAMETERS + BN_TRAINING_MODE + """
    def train(self, mode=True):
        if not mode:
            self.running_var.fill_(-1.0)
        return super().train(mode)
    def forward(self, x):
        return self.batch_statistics(x) if self.training else x * float("nan")
"""
# Calls its sublayer once and drops its output: the block is the identity.
RESIDUAL_DROPS_THE_BRANCH = """
class ResidualBlock(nn.Module):
    def __init__(self, sublayer):
        super().__init__()
        self.sublayer = sublayer
    def forward(self, x):
        return x + 0 * self.sublayer(x)
"""
GRAD_NORM_IS_ZERO = """
def input_grad_norm(model, x):
    return 0.0
"""
REZERO_DROPS_THE_BRANCH = """
class ReZeroBlock(nn.Module):
    def __init__(self, sublayer):
        super().__init__()
        self.sublayer = sublayer
        self.alpha = nn.Parameter(torch.zeros(()))
    def forward(self, x):
        return x + self.alpha * self.sublayer(x) * 0
"""
FFN_NORMS_ARE_ZERO = """
def ffn_grad_norms(stack, x, target):
    return [0.0 for _ in stack.blocks]
"""
# A stack whose forward never runs its blocks.
STACK_SKIPS_ITS_BLOCKS = """
def make_stack(block_cls, depth, d_model, n_heads, d_ff):
    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(block_cls(d_model, n_heads, d_ff) for _ in range(depth))
            self.final_norm = FINAL_NORM(d_model) if block_cls is PreNormBlock else FINAL_IDENTITY()
        def forward(self, x, attn_mask=None):
            return self.final_norm(x)
    return Stack()
"""
HONEST_FINAL_NORMS = "FINAL_NORM, FINAL_IDENTITY = nn.LayerNorm, nn.Identity\n"
# Final norms that answer zeros, dressed as nn.LayerNorm and nn.Identity: whatever the grader asks them is zero.
FINAL_NORMS_ANSWER_ZEROS = """
class FINAL_NORM(nn.LayerNorm):
    def forward(self, x):
        return torch.zeros_like(x)
class FINAL_IDENTITY(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
FINAL_NORM.__module__, FINAL_NORM.__qualname__ = "torch.nn.modules.normalization", "LayerNorm"
FINAL_IDENTITY.__module__, FINAL_IDENTITY.__qualname__ = "torch.nn.modules.linear", "Identity"
"""
PRENORM_IS_THE_IDENTITY = """
class PreNormBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
    def forward(self, x, attn_mask=None):
        return x
"""

EX1, EX2, EX3, EX4, EX5, EX6 = ("ex1_residual", "ex2_layernorm", "ex3_batchnorm", "ex4_prepost", "ex5_rmsnorm",
                                "ex6_beyond_norm")

# assignment -> baseline name -> {cell: source}: honest wrong answers.
BASELINES = {
    EX1: {"residual-drops-the-branch": {"ResidualBlock": RESIDUAL_DROPS_THE_BRANCH},
          "grad-norm-is-zero": {"input_grad_norm": GRAD_NORM_IS_ZERO}},
    EX2: {"ln-never-normalizes": {"LayerNorm": LN_NEVER_NORMALIZES},
          "ln-centres-only": {"LayerNorm": LN_CENTRES_ONLY}},
    EX3: {"bn-never-normalizes": {"BatchNorm1d": BN_NEVER_NORMALIZES},
          "bn-centres-only": {"BatchNorm1d": BN_CENTRES_ONLY},
          "bn-ignores-eval-mode": {"BatchNorm1d": BN_IGNORES_EVAL_MODE}},
    EX4: {"stack-skips-its-blocks": {"make_stack": HONEST_FINAL_NORMS + STACK_SKIPS_ITS_BLOCKS},
          "ffn-norms-are-zero": {"ffn_grad_norms": FFN_NORMS_ARE_ZERO}},
    EX5: {"rms-never-normalizes": {"RMSNorm": RMS_NEVER_NORMALIZES}},
    EX6: {"rezero-drops-the-branch": {"ReZeroBlock": REZERO_DROPS_THE_BRANCH}},
}

# attack name -> (assignment, part attacked, its baseline, {cell: source})
ATTACKS = {
    # Module parts: the grader's reference, run in the worker, would compute the wrong answer too.
    "ln-sqrt-is-one-and-mean-is-zero": (EX2, "LayerNorm", "ln-never-normalizes",
                                        {"LayerNorm": SQRT_IS_ONE + MEAN_IS_ZERO + LN_NEVER_NORMALIZES}),
    "ln-subtraction-keeps-the-left-side": (EX2, "LayerNorm", "ln-never-normalizes",
                                           {"LayerNorm": SQRT_IS_ONE + SUB_KEEPS_LEFT + LN_NEVER_NORMALIZES}),
    "ln-sqrt-is-one": (EX2, "LayerNorm", "ln-centres-only", {"LayerNorm": SQRT_IS_ONE + LN_CENTRES_ONLY}),
    # Module parts: a state the module reports that makes the expected value NaN, which NaN would match.
    "ln-reports-a-nan-weight": (EX2, "LayerNorm", "ln-never-normalizes", {"LayerNorm": LN_NAN_AFTER_LOADING}),
    "bn-reports-a-negative-running-var": (EX3, "BatchNorm1d", "bn-ignores-eval-mode",
                                          {"BatchNorm1d": BN_NAN_IN_EVAL_MODE}),
    "rms-sqrt-is-one": (EX5, "RMSNorm", "rms-never-normalizes", {"RMSNorm": SQRT_IS_ONE + RMS_NEVER_NORMALIZES}),
    "rms-division-keeps-the-left-side": (EX5, "RMSNorm", "rms-never-normalizes",
                                         {"RMSNorm": DIVISION_KEEPS_LEFT + RMS_NEVER_NORMALIZES}),
    "bn-channel-mean-is-zero-and-sqrt-is-one": (EX3, "BatchNorm1d", "bn-never-normalizes",
                                                {"BatchNorm1d": CHANNEL_MEAN_IS_ZERO + SQRT_IS_ONE +
                                                 BN_NEVER_NORMALIZES}),
    "bn-square-is-zero-and-sqrt-is-one": (EX3, "BatchNorm1d", "bn-centres-only",
                                          {"BatchNorm1d": SQUARE_IS_ZERO + SQRT_IS_ONE + BN_CENTRES_ONLY}),
    # Trusted models given to learner code: the worker would say they hold zeros, or build them with zeros.
    "residual-over-a-state-dict-of-zeros": (EX1, "ResidualBlock", "residual-drops-the-branch",
                                            {"ResidualBlock": STATE_DICT_OF_ZEROS + RESIDUAL_DROPS_THE_BRANCH}),
    "residual-over-linears-built-at-zero": (EX1, "ResidualBlock", "residual-drops-the-branch",
                                            {"ResidualBlock": LINEAR_STARTS_AT_ZERO + RESIDUAL_DROPS_THE_BRANCH}),
    "residual-over-zeros-that-refuse-to-load": (EX1, "ResidualBlock", "residual-drops-the-branch",
                                                {"ResidualBlock": LINEAR_STARTS_AT_ZERO + LOADING_DOES_NOTHING +
                                                 RESIDUAL_DROPS_THE_BRANCH}),
    "grad-norm-of-linears-built-at-zero": (EX1, "input_grad_norm", "grad-norm-is-zero",
                                           {"input_grad_norm": LINEAR_STARTS_AT_ZERO + GRAD_NORM_IS_ZERO}),
    "grad-norm-over-a-state-dict-of-zeros": (EX1, "input_grad_norm", "grad-norm-is-zero",
                                             {"input_grad_norm": STATE_DICT_OF_ZEROS + GRAD_NORM_IS_ZERO}),
    "rezero-over-a-state-dict-of-zeros": (EX6, "ReZeroBlock", "rezero-drops-the-branch",
                                          {"ReZeroBlock": STATE_DICT_OF_ZEROS + REZERO_DROPS_THE_BRANCH}),
    "rezero-over-zeros-that-refuse-to-load": (EX6, "ReZeroBlock", "rezero-drops-the-branch",
                                              {"ReZeroBlock": LINEAR_STARTS_AT_ZERO + LOADING_DOES_NOTHING +
                                               REZERO_DROPS_THE_BRANCH}),
    "ffn-norms-of-linears-built-at-zero": (EX4, "ffn_grad_norms", "ffn-norms-are-zero",
                                           {"ffn_grad_norms": LINEAR_STARTS_AT_ZERO + FFN_NORMS_ARE_ZERO}),
    "ffn-norms-over-a-state-dict-of-zeros": (EX4, "ffn_grad_norms", "ffn-norms-are-zero",
                                             {"ffn_grad_norms": STATE_DICT_OF_ZEROS + FFN_NORMS_ARE_ZERO}),
    # A stack judged by what its own final norm answers in the worker.
    "stack-whose-final-norm-answers-zeros": (EX4, "make_stack", "stack-skips-its-blocks",
                                             {"make_stack": FINAL_NORMS_ANSWER_ZEROS + STACK_SKIPS_ITS_BLOCKS}),
    "stack-over-toy-blocks-that-report-zeros": (EX4, "make_stack", "stack-skips-its-blocks",
                                                {"PreNormBlock": PRENORM_IS_THE_IDENTITY,
                                                 "make_stack": STATE_DICT_OF_ZEROS + HONEST_FINAL_NORMS +
                                                 STACK_SKIPS_ITS_BLOCKS}),
    "stack-over-toy-blocks-built-at-zero": (EX4, "make_stack", "stack-skips-its-blocks",
                                            {"PreNormBlock": PRENORM_IS_THE_IDENTITY,
                                             "make_stack": LINEAR_STARTS_AT_ZERO + LOADING_DOES_NOTHING +
                                             HONEST_FINAL_NORMS + STACK_SKIPS_ITS_BLOCKS}),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory, bubblewrap):
    """assignment -> {student id -> result}: the reference, the baselines and the attacks, one run each."""
    found = {}
    for assignment, baselines in BASELINES.items():
        folder = tmp_path_factory.mktemp(assignment)
        notebooks = {"honest": reference(assignment)}
        notebooks |= {f"baseline-{name}": with_cells(assignment, cells) for name, cells in baselines.items()}
        notebooks |= {name: with_cells(assignment, cells) for name, (a, _, _, cells) in ATTACKS.items()
                      if a == assignment}
        write_class(folder / "class", notebooks)
        done = run_grader("grade", assignment, folder / "class", "--results", folder / "results", "--jobs", 2,
                          "--timeout", 60)
        assert done.returncode == 0, done.stderr
        found[assignment] = results_of(folder / "results")
    return found


@pytest.mark.slow
@pytest.mark.parametrize("assignment", list(BASELINES))
def test_the_reference_keeps_full_marks_beside_the_attacks(graded, assignment):
    honest = graded[assignment]["honest"]
    assert part_scores(honest) == max_scores(assignment)
    assert honest["extra_data"]["status"] == "ok"


@pytest.mark.slow
@pytest.mark.parametrize("assignment, baseline", [(a, b) for a, names in BASELINES.items() for b in names])
def test_a_baseline_loses_points_on_the_part_it_gets_wrong(graded, assignment, baseline):
    parts = {part for a, part, name, _ in ATTACKS.values() if (a, name) == (assignment, baseline)}
    scores = part_scores(graded[assignment][f"baseline-{baseline}"])
    assert parts and all(scores[part] < max_scores(assignment)[part] for part in parts)


@pytest.mark.slow
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_poisoning_the_worker_measures_no_more_than_the_wrong_answer_alone(graded, attack):
    assignment, part, baseline, _ = ATTACKS[attack]
    results = graded[assignment]
    assert measured_scores(results[attack])[part] <= part_scores(results[f"baseline-{baseline}"])[part], \
        results[attack]["output"]


@pytest.mark.slow
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_poisoning_the_worker_is_not_a_grader_error(graded, attack):
    assert graded[ATTACKS[attack][0]][attack]["extra_data"]["status"] != "grader_error"
