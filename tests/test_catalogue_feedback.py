"""The feedback names the mistake that was made, and no other.

Every entry of the catalogue of wrong implementations (``tests/catalogue``, which includes
``tests/mistakes.py``) is graded in-process; the feedback section of the part it gets wrong
must contain the phrase that names its mistake (``NAMES`` below, or a ``Mistake``'s ``feedback``)
and none of the phrases that name the other mistakes of the same part. Where one wrong answer
really is two mistakes at once (an eps that is never stored is also never used), its entry
says so: ``(phrase, *also)``.
"""

from __future__ import annotations

import contextlib
import io
import re
from functools import cache
from pathlib import Path

import pytest
import torch

from autograder import load, report, run, scoring
from autograder.checks import Diagnosis, StudentError, Submission, assert_close, known_mistake
from autograder.kernel import local_transport, refuse_tags
from autograder.sandboxed.executor import Executor
from autograder.scoring import Outcome, PartScore
from tests.catalogue import ASSIGNMENTS, Wrong, catalogue
from tests.grading import blank, grade_in_process, with_cell
from tests.mistakes import MISTAKES

# assignment -> {catalogue entry's `what` -> the phrase of the feedback that names it, or (phrase, *also)}.
NAMES = {
    "ex1_residual": {
        # ResidualBlock
        "applies-the-sublayer-twice": ("applies the sublayer twice", "called the sublayer 2 times"),
        "adds-the-sublayer-output-twice": ("adds the sublayer's output twice", "called the sublayer 2 times"),
        "calls-the-sublayer-again-to-check-the-shape": "called the sublayer 2 times",
        "adds-in-place-into-x": "changed x in place",
        "detaches-the-shortcut": "the shortcut is detached",
        "stores-the-sublayer-under-another-name": "no submodule called sublayer",
        # make_mlp
        "linear-linear-relu-order": "Sequential(Linear, Linear, ReLU)",
        "extra-relu-after-the-last-linear": "Sequential(Linear, ReLU, Linear, ReLU)",
        "gelu-instead-of-relu": "Sequential(Linear, GELU, Linear)",
        "linear-without-bias": "have no bias",
        "residual-flag-ignored": "the residual flag makes no difference",
        "residual-flag-inverted": "the residual flag is inverted",
        "shortcut-without-ResidualBlock": "not your ResidualBlock",
        "one-residual-block-around-the-whole-stack": "a single block, whatever the depth",
        "depth-minus-one-blocks": "one block fewer than depth",
        "returns-a-modulelist": "should return an nn.Sequential",
        "returns-a-module-named-sequential-that-is-not-one": "should return an nn.Sequential",
        "sublayer-of-a-module-named-linear-that-is-not-one": "named like nn.Linear or nn.ReLU",
        "mlp-list-multiplication-repeats-one-block": "some blocks share parameters",
        "first-linear-shared-by-all-blocks": "some blocks share parameters",
        "xavier-init": "weight values lie outside nn.Linear's default range",
        "small-normal-init": "the weight values do not look like nn.Linear's default",
        "zero-biases": "the biases are all zero",
        # input_grad_norm
        "returns-a-tensor": "returned a Tensor, expected a Python float",
        "mean-instead-of-sum": "it differentiates model(x).mean()",
        "squared-input-gradient-norm": "it returns the squared norm",
        "mean-of-per-row-norms": "it averages the norms of the rows",
        "float32-copy-of-x": "it mixes float32 and float64 tensors",
        "backward-accumulates-into-the-parameters": "added its gradients into the .grad",
        "zero-grad-then-backward-on-a-copy": "replaced the .grad stored on the model's parameters",
        "turns-requires-grad-off-afterwards": "x.requires_grad was True and is False",
        "game-a-float-that-equals-anything": "returned a Handle, expected a Python float",
    },
    "ex2_layernorm": {
        # layer_norm
        "eps-ignored": "leaves eps out",
        "eps-argument-replaced-by-a-constant": "whatever eps it is given",
        "weight-and-bias-swapped": "swaps weight and bias",
        "statistics-over-dim-1-only-right-for-2-d": "avoid hard-coding 2-D shapes",
        "statistics-over-every-element": "over every element",
        "modifies-x-in-place": "changed x in place",
        "forgets-the-mean": "does not subtract the mean",
        "statistics-detached-from-the-graph": "no gradient flows through the mean and the variance",
        "returns-a-tensor-subclass-claiming-equality": "no gradient flows back to x",
        # LayerNorm
        "eps-stored-but-not-passed-on": "does not pass self.eps on",
        "eps-not-stored": "has no attribute 'eps'",
        "plain-tensors-not-parameters": "plain tensors, not parameters",
        "buffers-not-parameters": "buffers (register_buffer), not parameters",
        "frozen-parameters": "an nn.Parameter that requires grad",
        "parameters-named-gamma-and-beta": "found ['beta', 'gamma']",
        "parameters-of-shape-1-by-d": "has shape (1, 6)",
        "random-initial-weight": "weight does not start at ones",
        "module-forward-flattens-the-leading-dimensions": "flattens the leading dimensions",
        "subclasses-nn-layernorm": "uses a PyTorch layer-norm built-in",
        "wraps-an-nn-layernorm": "uses a PyTorch layer-norm built-in",
        "module-forward-reaches-f-layer-norm-through-getattr": "uses a PyTorch layer-norm built-in",
        "module-forward-calls-torch-ops-aten-native-layer-norm": "uses a PyTorch layer-norm built-in",
        # layer_norm_forward_backward
        "forward-unbiased-variance": "divide by D, not D - 1",
        "forward-eps-outside-the-root": "adds eps outside the square root",
        "unpacks-n-d-from-x-shape": "without assuming x is 2-D",
        "backward-misses-the-mean-term": "misses the term from the mean",
        "backward-misses-the-variance-term": "misses the term from the variance",
        "backward-forgets-the-weight-in-dx": "dx leaves the weight out",
        "dweight-and-dbias-summed-over-dim-0-only": "summed over dimension 0 only",
        "dweight-forgets-x-hat": "dweight sums dout * weight instead of dout * x_hat",
        "backward-recomputes-with-the-default-eps": "gradient for the default eps",
        "backward-scales-dout-in-place": "changed dout in place",
        "forward-normalizes-x-in-place": "changed x in place",
        "backward-uses-torch-autograd-grad": "uses autograd",
        "backward-calls-dot-backward": "uses autograd",
        "backward-uses-torch-func-vjp": "uses autograd",
        "forward-calls-f-layer-norm": "uses a PyTorch layer-norm built-in",
        "forward-reaches-layer-norm-through-getattr": "uses a PyTorch layer-norm built-in",
        "forward-calls-torch-ops-aten-native-layer-norm": "uses a PyTorch layer-norm built-in",
        "backward-calls-aten-native-layer-norm-backward": "uses a PyTorch layer-norm built-in",
    },
    "ex3_batchnorm": {
        # batch_norm
        "unbiased-variance-for-the-normalization": "normalizes with the unbiased variance",
        "eps-outside-the-root": "adds eps outside the square root",
        "eps-ignored": "leaves eps out",
        "eps-argument-ignored": "whatever eps it is given",
        "weight-and-bias-swapped": "swaps weight and bias",
        "statistics-computed-under-no-grad": "no gradient flows through the batch mean and variance",
        "statistics-detached": "no gradient flows through the batch variance",
        "modifies-x-in-place": "changed x in place",
        "only-2d-inputs": "over N and L for (N, C, L) inputs",
        "statistics-over-the-batch-only-per-position": "separately for each position",
        "bessel-correction-counts-only-the-batch": "counts the batch size N only",
        "running-stats-rebound-not-updated-in-place": "did not change in training mode",
        "momentum-argument-ignored": "whatever momentum it is given",
        "running-stats-updated-in-eval-mode-too": "changed running_mean in eval mode",
        "calls-F.batch_norm": "uses a PyTorch batch-norm built-in",
        "calls-F.batch_norm-through-getattr": "uses a PyTorch batch-norm built-in",
        "calls-torch.batch_norm": "uses a PyTorch batch-norm built-in",
        "calls-aten-native_batch_norm": "uses a PyTorch batch-norm built-in",
        "uses-nn.BatchNorm1d-inside": "uses a PyTorch batch-norm built-in",
        "calls-F.instance_norm-on-the-channels": "uses a PyTorch instance-norm built-in",
        # BatchNorm1d
        "parameters-are-plain-tensors": "plain tensors, not parameters",
        "parameters-named-gamma-and-beta": "has no attribute weight",
        "weight-and-bias-initialized-the-wrong-way-round": "weight does not start at ones",
        "running-stats-are-plain-attributes": "running_mean is not a buffer",
        "running-stats-are-frozen-parameters": "running_mean is a parameter",
        "running-var-starts-at-zeros": "running_var does not start at ones",
        "ignores-self.training": "after .eval() it still uses the batch's statistics",
        "mode-fixed-in-__init__": "after .eval() it still uses the batch's statistics",
        "module-ignores-its-momentum": "not the momentum it was built with",
        "module-ignores-its-eps": "not the eps it was built with",
        "passes-copies-of-the-running-stats": "pass the module's own buffers to batch_norm, not copies",
        "flattens-3d-input-without-moving-the-channels": "without moving the channels",
        "own-forward-with-unbiased-variance": "normalizes with the unbiased variance",
        "subclasses-nn.BatchNorm1d": "uses a PyTorch batch-norm built-in",
        "forward-calls-F.batch_norm": "uses a PyTorch batch-norm built-in",
        "forward-calls-F.batch_norm-through-getattr": "uses a PyTorch batch-norm built-in",
        "forward-calls-aten-native_batch_norm": "uses a PyTorch batch-norm built-in",
        "forward-uses-an-nn.BatchNorm1d-inside": "uses a PyTorch batch-norm built-in",
        "forward-calls-F.instance_norm": "uses a PyTorch instance-norm built-in",
    },
    "ex4_prepost": {
        # PostNormBlock
        "post-missing-norm1": "it leaves out norm1",
        "post-missing-norm2": "it leaves out norm2: normalize x + ffn(x)",
        "post-shared-norm": "norm1 and norm2 are the same module",
        "post-norms-swapped": "norm1 and norm2 are swapped",
        "post-ffn-reads-the-block-input": "the feed-forward reads the block's input x",
        "post-mask-as-key-padding-mask": "passes the mask as key_padding_mask",
        "post-attention-dropout": "keep nn.MultiheadAttention's default dropout=0",
        "post-not-batch-first": "should be built with batch_first=True",
        "post-relu-ffn": "ffn's activation is ReLU",
        "post-adds-in-place": "changed x in place",
        # PreNormBlock
        "pre-missing-norm2": "it leaves out norm2: the feed-forward's input is norm2(x)",
        "pre-uses-norm1-for-both-sublayers": "normalizes the feed-forward's input with norm1",
        "pre-adds-to-the-normalized-input": "adds the attention's output to the normalized input",
        "pre-normalizes-only-the-query": "normalizes only the query",
        "pre-final-norm-inside-the-block": "normalizes the block's output with norm2",
        "pre-ignores-the-mask": "it ignores attn_mask",
        "pre-inverts-a-bool-mask": "it inverts the boolean attn_mask",
        "pre-turns-a-bool-mask-into-zeros-and-ones": "into 0/1 floats",
        "pre-adds-in-place": "changed x in place",
        "pre-shared-norm": "norm1 and norm2 are the same module",
        # make_stack
        "stack-list-multiplication-repeats-one-block": "some blocks share parameters",
        "always-pre-norm-blocks": "should be instances of block_cls",
        "python-list-of-blocks": "blocks should be an nn.ModuleList",
        "final-layernorm-for-every-stack": "nn.LayerNorm for every block class",
        "final-norm-for-post-norm-instead": "chosen the wrong way round",
        "final-layernorm-unless-post-norm": "for a ToyBlock stack too",
        "mask-not-passed-to-the-blocks": "does not pass attn_mask to the blocks",
        "blocks-in-reverse-order": "runs the blocks in reverse order",
        "final-norm-after-every-block": "applies final_norm after every block",
        "skips-final-norm-in-forward": "does not apply final_norm",
        # ffn_grad_norms
        "first-ffn-linear": "gradient of ffn[0].weight",
        "bias-instead-of-weight": "gradient of ffn[2].bias",
        "sum-of-squared-errors": "sum of the squared errors",
        "ffn-squared-norm": "returns the squared norms",
        "norm-of-the-whole-ffn": "all the feed-forward's parameters",
        "last-block-first": "lists the blocks last first",
        "list-of-tensors": "should be Python floats",
        "stacked-tensor": "returned a Tensor, expected a list",
        "zeroes-the-gradients-after-reading-them": "it reads .grad after .backward()",
        "game-a-list-that-equals-anything": "returned a Handle, expected a list",
    },
    "ex5_rmsnorm": {
        # rms_norm (its catalogue's wrong answers skip the float32 upcast too, unless they say otherwise)
        "eps-outside-the-root": "adds eps outside the square root",
        "sqrt-without-eps": "leaves eps out",
        "eps-argument-replaced-by-a-constant": "whatever eps it is given",
        "mean-square-over-every-element": "over every element",
        "mean-square-over-dim-1-only-right-for-2-d": "over dimension 1",
        "root-of-the-mean-absolute-value": "the root of the mean absolute value",
        "ignores-the-weight": "leaves out the weight",
        "upcasts-float16-but-not-bfloat16": "it computes in torch.bfloat16 itself",
        "statistics-in-float32-normalization-in-half": "only the statistics are in float32",
        "always-casts-back-to-float16": "gave a torch.float16 output",
        "modifies-x-in-place": "changed x in place",
        "mean-square-detached-from-the-graph": "no gradient flows through the mean square",
        # RMSNorm
        "eps-replaced-by-the-default": "self.eps is not the eps passed to RMSNorm",
        "plain-tensor-not-a-parameter": "plain tensor, not a parameter",
        "buffer-not-a-parameter": "buffer (register_buffer), not a parameter",
        "parameter-named-scale": "found ['scale']",
        "adds-a-bias-like-layernorm": "RMSNorm has no bias",
        "weight-initialized-to-zeros": "weight does not start at ones",
        "forward-returns-float32": "has dtype torch.float32, expected torch.bfloat16",
        "forward-re-centres-before-rms-norm": "subtracts the mean before rms_norm",
        "subclasses-nn-rmsnorm": "uses a PyTorch RMSNorm built-in",
        "forward-reaches-f-rms-norm-through-getattr": "uses a PyTorch RMSNorm built-in",
        "forward-calls-torch-rms-norm": "uses a PyTorch RMSNorm built-in",
        "forward-calls-torch-ops-aten-rms-norm": "uses a PyTorch RMSNorm built-in",
        "forward-layer-norm-of-x-and-minus-x": "uses a PyTorch layer-norm built-in",
    },
    "ex6_beyond_norm": {
        # batch_norm_forward_backward
        "statistics-over-the-features": "each row's statistics, over the features",
        "eps-argument-ignored": "whatever eps it is given",
        "eps-left-out": "leaves eps out",
        "gamma-and-beta-swapped": "swaps gamma and beta",
        "forward-modifies-x-in-place": "changed x in place",
        "dx-misses-both-statistics-terms": "misses both terms that come from the statistics",
        "dx-forgets-gamma": "dx leaves gamma out",
        "dx-mean-term-divides-by-n-minus-1": "mean term divides the sum of g by N - 1",
        "dx-variance-term-without-x_hat": "variance term leaves out the factor x_hat",
        "dx-variance-term-with-a-factor-of-two": "variance term has a factor 2 too many",
        "dgamma-is-dout-times-x-hat-without-the-sum": "dgamma takes one row",
        "dgamma-uses-the-output-not-x_hat": "dgamma multiplies dout by x_hat * gamma",
        "dbeta-is-a-mean": "dbeta is the mean of dout",
        "backward-modifies-the-cache-in-place": "changed the cache in place",
        "backward-ignores-the-cached-eps": "not the eps the forward was given",
        "backward-through-a-backward-call": "uses autograd",
        "backward-by-torch.func.vjp": "uses autograd",
        "forward-calls-F.batch_norm": "uses a PyTorch batch-norm built-in",
        "forward-calls-torch.batch_norm": "uses a PyTorch batch-norm built-in",
        "backward-calls-aten-native_batch_norm_backward": "uses a PyTorch batch-norm built-in",
        # ReZeroBlock
        "rezero-alpha-is-a-plain-tensor": "plain tensor, not a parameter",
        "alpha-is-a-frozen-parameter": ("an nn.Parameter that requires grad", "no gradient reaches alpha"),
        "alpha-starts-at-a-small-value": "alpha does not start at zero",
        "alpha-read-with-item": "no gradient reaches alpha",
        "rezero-alpha-detached": "no gradient reaches alpha",
        "sublayer-stored-under-another-name": "stores the sublayer as self.branch",
        "sublayer-kept-in-a-plain-list": "not a submodule of the block",
        "sublayer-called-twice": "called the sublayer 2 times",
        "modifies-x-in-place": "changed x in place",
        "gates-the-shortcut-too": "scales the shortcut by 1 - alpha",
        "adds-a-layer-norm-after-the-sum": "uses a PyTorch layer-norm built-in",
        # DyT
        "alpha-init-ignored": "alpha does not start at alpha_init",
        "dyt-alpha-is-a-plain-tensor": "plain tensor, not a parameter",
        "weight-and-bias-initialized-the-wrong-way-round": "weight does not start at ones",
        "tanh-without-alpha": ("leaves alpha out of the tanh", "no gradient reaches alpha"),
        "alpha-outside-the-tanh": "multiplies by alpha outside the tanh",
        "bias-inside-the-tanh": "adds bias inside the tanh",
        "dyt-alpha-detached": "no gradient reaches alpha",
        "weight-read-as-data": "no gradient reaches weight",
        "subtracts-the-row-mean": "subtracts the row mean before the tanh",
        "squashes-in-place": "changed x in place",
        "calls-F.layer_norm-before-the-tanh": "uses a PyTorch layer-norm built-in",
        "calls-F.rms_norm-before-the-tanh": "uses a PyTorch RMSNorm built-in",
    },
}

ENTRIES = catalogue()


def entry_id(wrong: Wrong) -> str:
    return f"{wrong.assignment}-{wrong.what}"


def expectation(wrong: Wrong) -> tuple[str, tuple[str, ...]]:
    """(the phrase that names the entry's mistake, the other mistakes' phrases it also makes)."""
    mistakes = {(m.assignment, m.what): m.feedback or m.hint for m in MISTAKES}
    found = mistakes.get((wrong.assignment, wrong.what)) or NAMES.get(wrong.assignment, {}).get(wrong.what)
    if found is None:
        return "", ()
    phrase, *also = (found,) if isinstance(found, str) else found
    return phrase, tuple(also)


def section(feedback: str, title: str) -> str:
    """The part of the feedback under the heading ``## title``."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", feedback, re.M | re.S)
    assert match, f"no section {title!r} in the feedback"
    return match.group(1)


def graded(assignment: str, notebook: dict, part: str | None = None) -> list[PartScore]:
    """``grading.grade_in_process``, for one part only when ``part`` is given (the other parts' tests would
    triple the time the catalogue takes)."""
    if part is None:
        return grade_in_process(assignment, notebook)
    entry = load.Entry("in-process", Path("in-process.ipynb"))
    load.cells(assignment, entry, notebook["cells"])
    executor = Executor()
    with contextlib.redirect_stdout(io.StringIO()):
        executor.handle(run.exec_request(entry.cells))
        return scoring.grade(assignment, Submission(local_transport(executor, refuse_tags(assignment))), [part])


def feedback_of(assignment: str, notebook: dict, part: str | None = None) -> tuple[str, list[PartScore]]:
    """The learner's Markdown feedback for ``notebook``, graded in-process, and its parts."""
    parts = graded(assignment, notebook, part)
    data = report.result(assignment, "learner", "digest", "ok", parts, [], 0.0, "in-process")
    return report.feedback(data), parts


@cache
def part_feedback(wrong: Wrong) -> str:
    """The feedback section of the part ``wrong`` gets wrong."""
    text, (part,) = feedback_of(wrong.assignment, with_cell(wrong.assignment, wrong.cell, wrong.source), wrong.loses)
    return section(text, part.title)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Grading in-process on one thread: the suites' tensors are tiny and threads only wait on a busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# --- the catalogue (in-process, one part per entry: about 50 s of CPU for its 254 entries) ------------------------

def test_every_catalogue_entry_has_a_phrase_that_names_its_mistake():
    assert [entry_id(w) for w in ENTRIES if not expectation(w)[0]] == []


def test_a_declared_coincidence_names_a_mistake_of_the_same_part():
    phrases = {(w.assignment, w.loses): set() for w in ENTRIES}
    for wrong in ENTRIES:
        phrases[wrong.assignment, wrong.loses].add(expectation(wrong)[0])
    stray = {entry_id(w): also for w in ENTRIES
             if (also := set(expectation(w)[1]) - phrases[w.assignment, w.loses])}
    assert stray == {}


@pytest.mark.slow
@pytest.mark.parametrize("wrong", ENTRIES, ids=entry_id)
def test_feedback_names_the_mistake(wrong):
    phrase, _ = expectation(wrong)
    assert phrase in part_feedback(wrong)


@pytest.mark.slow
@pytest.mark.parametrize("wrong", ENTRIES, ids=entry_id)
def test_feedback_names_no_other_mistake_of_the_part(wrong):
    phrase, also = expectation(wrong)
    others = {expectation(other)[0] for other in ENTRIES
              if (other.assignment, other.loses) == (wrong.assignment, wrong.loses)} - {phrase, *also, ""}
    text = part_feedback(wrong)
    assert sorted(other for other in others if other in text) == []


@pytest.mark.slow
@pytest.mark.parametrize("wrong", ENTRIES, ids=entry_id)
def test_a_part_shows_at_most_one_hint(wrong):
    assert part_feedback(wrong).count("What to check:") <= 1


# --- how the feedback reads -------------------------------------------------------------------------------------

@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_blank_notebook_gets_one_line_per_part_and_no_checklist(assignment):
    text, parts = feedback_of(assignment, blank(assignment))
    assert "What to check:" not in text
    for part in parts:
        lines = [line for line in section(text, part.title).splitlines() if line.startswith("- ")]
        assert len(lines) == 1 and "not implemented yet" in lines[0]


def outcome(name: str, status: str = "failed", message: str = "is off by up to 1", diagnosed: bool = False) \
        -> Outcome:
    return Outcome("part", name, 0.0, 1.0, status == "passed", message, f"hint of {name}", status, diagnosed)


def rendered(*outcomes: Outcome) -> str:
    part = PartScore("part", "Task 1: part", sum(o.points for o in outcomes), len(outcomes), list(outcomes))
    return report.feedback(report.result("ex2_layernorm", "learner", "digest", "ok", [part], [], 0.0, "in-process"))


def test_only_the_first_failed_tests_hint_is_shown():
    text = rendered(outcome("first", "passed", ""), outcome("second"), outcome("third", "error"))
    assert "hint of second" in text and "hint of first" not in text and "hint of third" not in text


def test_the_hint_says_one_mistake_may_fail_several_checks_when_several_failed():
    text = rendered(outcome("first"), outcome("second"))
    assert "hint of first (this one mistake may fail several checks" in text


def test_the_hint_of_a_single_failed_check_does_not_speak_of_several():
    text = rendered(outcome("first", "passed", ""), outcome("second"))
    assert "hint of second" in text and "several checks" not in text


def test_no_hint_is_shown_once_a_message_names_the_mistake():
    text = rendered(outcome("first"), outcome("second", message="is off by up to 1: it swaps them", diagnosed=True))
    assert "What to check:" not in text and "it swaps them" in text


@pytest.mark.parametrize("status", ["missing", "forbidden", "timeout", "memory_limit"])
def test_no_hint_for_a_test_that_failed_for_a_reason_other_than_its_answer(status):
    assert "What to check:" not in rendered(outcome("first", status, "some reason"))


def test_tests_that_failed_for_one_reason_are_one_line():
    reason = "not implemented yet (it raises NotImplementedError)"
    text = rendered(*(outcome(name, "missing", reason) for name in ("a", "b", "c")))
    assert text.count(reason) == 1 and "all 3 tests (0 / 3)" in text


# --- naming a mistake -------------------------------------------------------------------------------------------

def test_a_known_mistake_is_named_when_the_answer_equals_it():
    mistakes = [("it doubles", lambda: torch.full((2,), 2.0)), ("it halves", lambda: torch.full((2,), 0.5))]
    assert known_mistake(torch.full((2,), 0.5), mistakes, atol=1e-6, rtol=0) == "it halves"


@pytest.mark.parametrize("answer", [torch.full((2,), 3.0), torch.full((3,), 2.0), 2.0])
def test_an_answer_that_equals_no_known_mistake_is_not_named(answer):
    assert known_mistake(answer, [("it doubles", lambda: torch.full((2,), 2.0))], atol=1e-6, rtol=0) is None


def test_a_mistake_whose_answer_is_right_on_the_input_is_not_named():
    mistakes = [("it forgets the mean", lambda: torch.ones(2)), ("it doubles", lambda: torch.full((2,), 2.0))]
    assert known_mistake(torch.ones(2), mistakes, atol=1e-6, rtol=0, expected=torch.ones(2)) is None


def test_of_two_matching_mistakes_the_closer_is_named():
    mistakes = [("it doubles", lambda: torch.full((2,), 2.0)), ("it adds one", lambda: torch.full((2,), 2.005))]
    assert known_mistake(torch.full((2,), 2.005), mistakes, atol=0.01, rtol=0) == "it adds one"


def test_two_mistakes_the_input_cannot_tell_apart_are_not_named():
    mistakes = [("it doubles", lambda: torch.full((2,), 2.0)), ("it adds one", lambda: torch.full((2,), 2.0))]
    assert known_mistake(torch.full((2,), 2.0), mistakes, atol=1e-6, rtol=0) is None


def test_a_mistake_that_cannot_be_made_on_the_input_is_skipped():
    def impossible():
        raise IndexError("no such dimension")

    mistakes = [("impossible", impossible), ("it doubles", lambda: torch.full((2,), 2.0))]
    assert known_mistake(torch.full((2,), 2.0), mistakes, atol=1e-6, rtol=0) == "it doubles"


def test_assert_close_names_the_mistake_and_keeps_the_size_of_the_error():
    with pytest.raises(Diagnosis, match=r"^the output is off by up to 1: it doubles$"):
        assert_close(torch.full((2,), 2.0), torch.ones(2), "the output", mistakes=[("it doubles",
                                                                                   lambda: torch.full((2,), 2.0))])


@pytest.mark.parametrize("message, cause", [
    ("a leaf Variable that requires grad is being used in an in-place operation.", "changes in place a tensor"),
    ("mat1 and mat2 must have the same dtype, but got Float and Double", "mixes float32 and float64"),
])
def test_a_pytorch_error_with_one_known_cause_names_it(message, cause):
    def raises(sub):
        raise StudentError("RuntimeError", message)

    found = scoring.run_test(scoring.Test("part", "test", 1.0, raises, [{}], "hint"), sub=None)
    assert found.status == "error" and cause in found.message and found.diagnosed
