"""Chapter 2, "Norm layers and the optimizer" and "Normalizing the weights instead of the activations".

Each glued number is recomputed here from the equations, with the chapter's seeds but none of its code:
the scale-invariant layer and its SGD training are written out by hand (the update W <- (1 - lr wd) W - lr g
instead of torch.optim.SGD), weight normalization and the power iteration in NumPy.
"""

import ast
import math
import re

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

STEM = "02_layer_normalization"
D_IN, WIDTH, CLASSES = 16, 64, 4
LR, DECAY, STEPS, WINDOW = 0.5, 5e-3, 1500, 200


def number(glued, name):
    return float(glued[name])


def text(glued, name):
    return ast.literal_eval(glued[name])


# --- scale invariance -----------------------------------------------------------------------------


def loss_of(W, x, labels, head_w, head_b):
    """Cross-entropy of head(relu(LN(x W^T))), LN without affine parameters (they are 1 and 0)."""
    a = x @ W.T
    mu = a.mean(-1, keepdim=True)
    var = ((a - mu) ** 2).mean(-1, keepdim=True)
    h = torch.relu((a - mu) / torch.sqrt(var + 1e-5))
    return F.cross_entropy(h @ head_w.T + head_b, labels)


@pytest.fixture(scope="module")
def invariance_case():
    gen = torch.Generator().manual_seed(2018)
    W = torch.randn(WIDTH, D_IN, generator=gen, dtype=torch.float64)
    head_w = torch.randn(CLASSES, WIDTH, generator=gen, dtype=torch.float64) / 8
    head_b = torch.zeros(CLASSES, dtype=torch.float64)
    x = torch.randn(256, D_IN, generator=gen, dtype=torch.float64)
    labels = torch.randint(0, CLASSES, (256,), generator=gen)
    return W, x, labels, head_w, head_b


def grad_at(W, case):
    W = W.clone().requires_grad_()
    loss = loss_of(W, *case[1:])
    (g,) = torch.autograd.grad(loss, W)
    return loss.item(), g


def test_gradient_of_a_weight_before_layer_norm_is_orthogonal_to_it(invariance_case):
    W = invariance_case[0]
    _, g = grad_at(W, invariance_case)
    assert abs((g * W).sum() / (g.norm() * W.norm())) < 1e-5


@pytest.mark.parametrize("c", [0.5, 2.0, 10.0])
def test_gradient_shrinks_as_one_over_the_scale_of_the_weight(invariance_case, c):
    W = invariance_case[0]
    loss, g = grad_at(W, invariance_case)
    loss_c, g_c = grad_at(c * W, invariance_case)
    assert loss_c == pytest.approx(loss, abs=1e-6)
    assert (c * g_c.norm() / g.norm()).item() == pytest.approx(1.0, abs=1e-4)


def test_chapter_measured_the_gradient_orthogonal_and_scaling_as_one_over_c(glued):
    assert number(glued, "scaleinv_grad_cosine") < 1e-4
    assert number(glued, "scaleinv_loss_change") < 1e-4
    assert number(glued, "scaleinv_grad_ratio_error") < 1e-3


# --- SGD with and without weight decay --------------------------------------------------------------


def teacher_classes(n=2048, seed=10):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, D_IN, generator=gen)
    teacher = torch.randn(D_IN, CLASSES, generator=gen)
    noise = 0.5 * torch.randn(n, CLASSES, generator=gen)
    return x, (torch.tanh(x @ teacher) + noise).argmax(dim=-1)


def sgd_by_hand(weight_decay, seed=11):
    """The chapter's experiment from the equations: ||W|| and the angle W turns, per step."""
    torch.manual_seed(seed)
    W = nn.Linear(D_IN, WIDTH, bias=False).weight.detach().clone()  # same draws as the chapter's layer
    ln_w, ln_b = torch.ones(WIDTH), torch.zeros(WIDTH)
    head = nn.Linear(WIDTH, CLASSES)
    head_w, head_b = head.weight.detach().clone(), head.bias.detach().clone()
    x, labels = teacher_classes()
    params = [W, ln_w, ln_b, head_w, head_b]
    norms, angles = [W.norm().item()], []
    for _ in range(STEPS):
        idx = torch.randint(0, len(x), (64,))
        for p in params:
            p.requires_grad_()
        a = x[idx] @ W.T
        h = F.layer_norm(a, (WIDTH,), ln_w, ln_b)
        loss = F.cross_entropy(torch.relu(h) @ head_w.T + head_b, labels[idx])
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            before = W.clone()
            new = [p - LR * g for p, g in zip(params, grads)]
            new[0] = W - LR * (grads[0] + weight_decay * W)  # decay on W alone
        W, ln_w, ln_b, head_w, head_b = params = [p.detach() for p in new]
        cos = (before * W).sum() / (before.norm() * W.norm())
        norms.append(W.norm().item())
        angles.append(math.degrees(math.acos(min(1.0, cos.item()))))
    return norms, angles


@pytest.fixture(scope="module")
def sgd_runs():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    runs = {decay: sgd_by_hand(decay) for decay in (0.0, DECAY)}
    torch.set_num_threads(before)
    return runs


def test_sgd_norms_agree_with_a_hand_written_update(glued, sgd_runs):
    (plain_norms, _), (decay_norms, _) = sgd_runs[0.0], sgd_runs[DECAY]
    assert number(glued, "optim_norm_start") == pytest.approx(plain_norms[0], rel=1e-6)
    assert number(glued, "optim_norm_end_no_decay") == pytest.approx(plain_norms[-1], rel=1e-2)
    assert number(glued, "optim_norm_end_decay") == pytest.approx(decay_norms[-1], rel=1e-2)


def test_sgd_angles_agree_with_a_hand_written_update(glued, sgd_runs):
    mean = lambda values: sum(values) / len(values)
    assert number(glued, "optim_angle_start_no_decay") == pytest.approx(mean(sgd_runs[0.0][1][:WINDOW]), rel=1e-2)
    assert number(glued, "optim_angle_end_no_decay") == pytest.approx(mean(sgd_runs[0.0][1][-WINDOW:]), rel=2e-2)
    assert number(glued, "optim_angle_end_decay") == pytest.approx(mean(sgd_runs[DECAY][1][-WINDOW:]), rel=2e-2)


def test_without_decay_the_norm_only_grows_in_the_hand_written_run(sgd_runs):
    norms = sgd_runs[0.0][0]
    assert all(b > a for a, b in zip(norms, norms[1:]))


def test_without_decay_the_norm_grew_at_every_step(glued):
    assert number(glued, "optim_norm_grew_fraction") == 1.0
    assert number(glued, "optim_norm_end_no_decay") > 2 * number(glued, "optim_norm_start")


def test_each_step_obeys_pythagoras_and_each_gradient_is_orthogonal(glued):
    assert number(glued, "optim_pythagoras_error") < 1e-5
    assert number(glued, "optim_max_grad_cos") < 1e-4


def test_effective_learning_rate_drop_is_the_squared_norm_ratio(glued):
    ratio = number(glued, "optim_norm_end_no_decay") / number(glued, "optim_norm_start")
    assert number(glued, "optim_eff_lr_drop") == pytest.approx(ratio**2, rel=1e-9)


def test_without_decay_the_effective_step_shrinks(glued):
    assert number(glued, "optim_angle_end_no_decay") < 0.75 * number(glued, "optim_angle_start_no_decay")


def test_equilibrium_angle_is_the_square_root_of_two_lr_decay(glued):
    assert number(glued, "optim_angle_predicted") == pytest.approx(math.degrees(math.sqrt(2 * LR * DECAY)))


def test_with_decay_the_step_settles_at_the_equilibrium_angle(glued):
    measured, predicted = number(glued, "optim_angle_end_decay"), number(glued, "optim_angle_predicted")
    assert measured == pytest.approx(predicted, rel=0.1)
    assert number(glued, "optim_norm_end_decay") < number(glued, "optim_norm_end_no_decay")


def test_equilibrium_verdict_follows_the_measured_gap(glued):
    gap = abs(number(glued, "optim_angle_end_decay") / number(glued, "optim_angle_predicted") - 1)
    assert number(glued, "optim_angle_rel_gap") == pytest.approx(gap, rel=1e-9)
    assert text(glued, "optim_equilibrium_verdict") == ("agrees with" if gap < 0.1 else "differs from")


# --- weight normalization ------------------------------------------------------------------------------


def test_weight_norm_rows_have_length_g_whatever_the_scale_of_v():
    rng = np.random.default_rng(1602)
    v, g = rng.normal(size=(16, 32)), rng.uniform(0.5, 2.0, size=(16, 1))
    for scale in (1.0, 100.0):
        w = g * (scale * v) / np.linalg.norm(scale * v, axis=1, keepdims=True)
        np.testing.assert_allclose(np.linalg.norm(w, axis=1), g[:, 0], rtol=1e-12)


def test_hand_weight_norm_matches_the_parametrization(glued):
    assert number(glued, "wn_torch_max_abs_diff") < 1e-6
    assert number(glued, "wn_row_norm_error") < 1e-5


def test_weight_norm_output_scales_with_the_input_but_layer_norm_output_does_not(glued):
    assert number(glued, "wn_output_rms_x10") == pytest.approx(10 * number(glued, "wn_output_rms_x1"), rel=1e-5)
    assert number(glued, "ln_output_rms_x1") == pytest.approx(1.0, abs=1e-4)
    assert number(glued, "ln_output_rms_x10") == pytest.approx(1.0, abs=1e-4)


# --- spectral normalization --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def power_iteration_errors():
    """The chapter's matrix (seed 13) and random start, iterated in float64 NumPy."""
    from torch.nn.utils.parametrizations import spectral_norm

    torch.manual_seed(13)
    layer = spectral_norm(nn.Linear(32, 16, bias=False))
    W = layer.parametrizations.weight.original.detach().double().numpy()
    u, v = torch.randn(16).double().numpy(), torch.randn(32).double().numpy()
    u, v = u / np.linalg.norm(u), v / np.linalg.norm(v)
    exact = np.linalg.svd(W, compute_uv=False)
    errors = []
    for _ in range(30):
        u = W @ v / np.linalg.norm(W @ v)
        v = W.T @ u / np.linalg.norm(W.T @ u)
        errors.append(abs(u @ W @ v - exact[0]) / exact[0])
    return errors, exact


@pytest.mark.parametrize("n", [1, 5])
def test_power_iteration_error_agrees_with_numpy(glued, power_iteration_errors, n):
    assert number(glued, f"sn_error_{n}") == pytest.approx(power_iteration_errors[0][n - 1], rel=1e-3)


def test_power_iteration_error_after_fifteen_iterations_agrees_with_numpy(glued, power_iteration_errors):
    assert number(glued, "sn_error_15") == pytest.approx(power_iteration_errors[0][14], abs=2e-6)


def test_singular_values_agree_with_numpy(glued, power_iteration_errors):
    exact = power_iteration_errors[1]
    assert number(glued, "sn_plain_sigma") == pytest.approx(exact[0], rel=1e-5)
    assert number(glued, "sn_gap_ratio") == pytest.approx(exact[1] / exact[0], rel=1e-5)


def test_power_iteration_error_falls_with_iterations(glued):
    assert number(glued, "sn_error_1") > number(glued, "sn_error_5") > number(glued, "sn_error_15")


def test_hand_spectral_norm_matches_the_parametrization(glued):
    assert number(glued, "sn_torch_max_abs_diff") < 1e-6


def test_spectral_norm_bounds_the_stretch_by_one_and_random_inputs_underestimate_it(glued):
    assert number(glued, "sn_matrix_norm") == pytest.approx(1.0, abs=1e-2)
    assert number(glued, "sn_top_stretch") == pytest.approx(number(glued, "sn_matrix_norm"), rel=1e-4)
    assert number(glued, "sn_random_stretch") < number(glued, "sn_top_stretch")
    assert number(glued, "sn_plain_stretch") <= number(glued, "sn_plain_sigma") * (1 + 1e-5)


# --- prose ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["scaleinv_grad_cosine", "optim_norm_start", "optim_norm_end_no_decay", "optim_norm_end_decay",
     "optim_angle_end_decay", "optim_angle_predicted", "optim_eff_lr_drop", "optim_equilibrium_verdict",
     "optim_norm_grew_fraction", "wn_output_rms_x1", "wn_output_rms_x10", "sn_error_1", "sn_error_15",
     "sn_random_stretch", "sn_top_stretch", "sn_matrix_norm"],
)
def test_glued_number_is_shown_in_the_prose(prose, name):
    assert re.search(r"\{glue(:text)?\}`" + re.escape(name) + r"[`:]", prose)


@pytest.mark.parametrize(
    "arxiv", ["1607.06450", "1706.05350", "1803.01814", "2305.17212", "1602.07868", "1802.05957"]
)
def test_references_list_every_cited_paper(prose, arxiv):
    references = prose.split("\n## References\n", 1)[1]
    assert f"arxiv.org/abs/{arxiv}" in references


@pytest.mark.parametrize("section", ["## Norm layers and the optimizer", "## Normalizing the weights instead"])
def test_each_new_section_has_a_quiz_question(prose, section):
    quizzes = prose.split("## Check your understanding", 1)[1]
    keyword = {"## Norm layers and the optimizer": "effective learning rate",
               "## Normalizing the weights instead": "spectral normalization"}[section]
    assert section in prose and keyword in quizzes


def test_angle_versus_norm_wording_follows_the_measurement(glued):
    angle_drop = number(glued, "optim_angle_start_no_decay") / number(glued, "optim_angle_end_no_decay")
    expected = "less" if angle_drop < number(glued, "optim_eff_lr_drop") else "more"
    assert text(glued, "optim_angle_vs_norm") == expected
