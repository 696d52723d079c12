"""Chapter 1's stochastic-depth claims: the block-deletion lesion of trained plain, residual and
stochastic-depth MLPs, and the expectation check of DropPath.

The networks are rebuilt and retrained here from the chapter's description (the teacher task with
seed 1000, students drawn with seeds 0 to 2, 200 full-batch Adam steps, survival probabilities
falling linearly to 0.5), without importing the chapter's code, and compared with what it glued.
The expectation identities are also checked on their own, on a block built here.
"""

import copy
import re
import statistics

import pytest
import torch
import torch.nn as nn

STEM = "01_residual_connections"
WIDTH, N_SAMPLES, DEPTH, STEPS, LR, P_LAST = 32, 256, 8, 200, 1e-3, 0.5
SEEDS, DRAWS = (0, 1, 2), 20_000
SHORT = {"plain": "plain", "residual": "res", "stochastic depth": "sd"}


def mlp_block():
    return nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH))


def survival(l):
    """p_l for block l = 1..DEPTH: 1 - (l / L)(1 - p_L)."""
    return 1 - l / DEPTH * (1 - P_LAST)


class Net(nn.Module):
    """x <- shortcut * x + keep_l / p_l * F_l(x); keep_l ~ Bernoulli(p_l) per sample when
    `drop` is set and the module is training, else keep_l / p_l = 1."""

    def __init__(self, blocks, shortcut, drop):
        super().__init__()
        self.blocks, self.shortcut, self.drop = nn.ModuleList(blocks), shortcut, drop

    def forward(self, x, deleted=None):
        for l, block in enumerate(self.blocks, start=1):
            if l - 1 == deleted:
                continue
            branch = block(x)
            if self.drop and self.training:
                p = survival(l)
                branch = branch * (torch.rand(x.shape[0], 1) < p) / p
            x = self.shortcut * x + branch
        return x


@pytest.fixture(scope="module")
def teacher_task(one_thread):
    torch.manual_seed(1000)
    teacher = nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh(), nn.Linear(WIDTH, WIDTH))
    x = torch.randn(N_SAMPLES, WIDTH)
    with torch.no_grad():
        y = teacher(x)
    return x, (y - y.mean(0)) / y.std(0, correction=0)


def train(net, x, y):
    optimizer = torch.optim.Adam(net.parameters(), lr=LR, fused=True)
    net.train()
    for _ in range(STEPS):
        loss = ((net(x) - y) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return net.eval()


@pytest.fixture(scope="module")
def trained(teacher_task):
    """name -> one trained network per seed, in the chapter's order of random draws."""
    x, y = teacher_task
    nets = {name: [] for name in SHORT}
    for seed in SEEDS:
        torch.manual_seed(seed)
        blocks = [mlp_block() for _ in range(DEPTH)]
        nets["plain"].append(train(Net(copy.deepcopy(blocks), 0.0, False), x, y))
        nets["residual"].append(train(Net(copy.deepcopy(blocks), 1.0, False), x, y))
        nets["stochastic depth"].append(train(Net(copy.deepcopy(blocks), 1.0, True), x, y))
    return nets


@pytest.fixture(scope="module")
def lesion(trained, teacher_task):
    """name -> {intact, deleted, worst}: medians over seeds (and deleted blocks), and the max."""
    x, y = teacher_task
    result = {}
    for name, nets in trained.items():
        with torch.no_grad():
            intact = [((net(x) - y) ** 2).mean().item() for net in nets]
            deleted = [((net(x, d) - y) ** 2).mean().item() for net in nets for d in range(DEPTH)]
        result[name] = {"intact": statistics.median(intact), "deleted": statistics.median(deleted),
                        "worst": max(deleted)}
    return result


@pytest.fixture(scope="module")
def expectation(trained, teacher_task):
    """The chapter's expectation check on the seed-0 stochastic-depth network, recomputed."""
    x, _ = teacher_task
    net = trained["stochastic depth"][0]
    torch.manual_seed(0)
    x_one = x[:1].expand(DRAWS, WIDTH)
    with torch.no_grad():
        h = x_one
        for block in net.blocks[:-1]:
            h = h + block(h)
        branch = net.blocks[-1](h)
        block_draws = h + branch * (torch.rand(DRAWS, 1) < P_LAST) / P_LAST
        block_test = h[0] + branch[0]
        stack_draws = net.train()(x_one)
        stack_test = net.eval()(x[:1])[0]

    def error_and_standard_error(samples, test):
        error = (samples.mean(0) - test).norm() / test.norm()
        return error.item(), (samples.std(0).norm() / DRAWS**0.5 / test.norm()).item()

    return {"block": error_and_standard_error(block_draws, block_test),
            "stack": error_and_standard_error(stack_draws, stack_test)}


# --- the expectation identities, on a block built here (fast) ------------------------------


@pytest.mark.parametrize("p", [0.5, 0.8])
def test_droppath_form_averages_to_the_unscaled_test_time_block(one_thread, p):
    torch.manual_seed(7)
    block, x = mlp_block(), torch.randn(1, WIDTH).expand(50_000, WIDTH)
    with torch.no_grad():
        branch = block(x)
        draws = x + branch * (torch.rand(x.shape[0], 1) < p) / p
        test_time = x[0] + branch[0]
        standard_error = draws.std(0).norm() / x.shape[0] ** 0.5
    assert (draws.mean(0) - test_time).norm() < 4 * standard_error


@pytest.mark.parametrize("p", [0.5, 0.8])
def test_paper_form_averages_to_the_test_time_block_scaled_by_p(one_thread, p):
    torch.manual_seed(8)
    block, x = mlp_block(), torch.randn(1, WIDTH).expand(50_000, WIDTH)
    with torch.no_grad():
        branch = block(x)
        draws = x + branch * (torch.rand(x.shape[0], 1) < p)
        standard_error = draws.std(0).norm() / x.shape[0] ** 0.5
        assert (draws.mean(0) - (x[0] + p * branch[0])).norm() < 4 * standard_error
        assert (draws.mean(0) - (x[0] + branch[0])).norm() > 10 * standard_error


def test_survival_falls_linearly_from_almost_one_to_p_last():
    probabilities = [survival(l) for l in range(1, DEPTH + 1)]
    assert probabilities[-1] == P_LAST and probabilities[0] == pytest.approx(1 - 0.5 / DEPTH)
    steps = {round(a - b, 12) for a, b in zip(probabilities, probabilities[1:])}
    assert steps == {round((1 - P_LAST) / DEPTH, 12)}


# --- the glued lesion and expectation numbers, recomputed ----------------------------------


@pytest.mark.parametrize("name", list(SHORT))
@pytest.mark.parametrize("measure", ["intact", "deleted", "worst"])
def test_glued_lesion_loss_matches_an_independent_retraining(glued, lesion, name, measure):
    glued_value = float(glued[f"lesion_{SHORT[name]}_{measure}"])
    assert glued_value == pytest.approx(lesion[name][measure], rel=1e-3)


def test_the_8_block_networks_are_those_of_the_degradation_experiment(glued):
    assert float(glued["lesion_plain_intact"]) == pytest.approx(float(glued["loss_plain_8"]), rel=1e-6)
    assert float(glued["lesion_res_intact"]) == pytest.approx(float(glued["loss_res_8"]), rel=1e-6)


@pytest.mark.parametrize("part", ["block", "stack"])
def test_glued_expectation_check_matches_an_independent_recomputation(glued, expectation, part):
    error, standard_error = expectation[part]
    assert float(glued[f"dp_{part}_mean_err"]) == pytest.approx(error, rel=1e-2)
    assert float(glued[f"dp_{part}_mean_se"]) == pytest.approx(standard_error, rel=1e-2)


# --- the words the chapter glues say what the numbers say ---------------------------------


def test_plain_verdict_follows_the_loss_with_a_block_deleted(glued):
    worse = float(glued["lesion_plain_deleted"]) > 1
    assert glued["lesion_plain_verdict"].strip("'") == (
        "worse than predicting the mean" if worse else "still better than predicting the mean")


def test_residual_verdict_follows_the_loss_with_a_block_deleted(glued):
    below = float(glued["lesion_res_deleted"]) < 1
    assert glued["lesion_res_verdict"].strip("'") == (
        "stays below the loss of predicting the mean" if below else "is no better than predicting the mean")


def test_veit_verdict_says_reproduces_only_when_the_residual_loss_less_than_doubles(glued):
    mild = float(glued["lesion_res_ratio"]) < 2
    assert glued["lesion_veit_verdict"].strip("'").startswith("reproduces:" if mild else "reproduces only in part")


def test_stochastic_depth_verdict_follows_the_two_ratios(glued):
    robust = float(glued["lesion_sd_ratio"]) < float(glued["lesion_res_ratio"])
    assert glued["lesion_sd_verdict"].strip("'").startswith("far more robust" if robust else "not more robust")


@pytest.mark.parametrize("short", SHORT.values())
def test_glued_ratio_is_deleted_over_intact(glued, short):
    ratio = float(glued[f"lesion_{short}_deleted"]) / float(glued[f"lesion_{short}_intact"])
    assert float(glued[f"lesion_{short}_ratio"]) == pytest.approx(ratio)


@pytest.mark.parametrize("part", ["block", "stack"])
def test_expectation_verdict_follows_three_standard_errors(glued, part):
    within = float(glued[f"dp_{part}_mean_err"]) < 3 * float(glued[f"dp_{part}_mean_se"])
    verdict = glued[f"dp_{part}_verdict"].strip("'")
    assert ("within" in verdict) == within


def test_the_last_block_averages_to_its_test_time_output(glued):
    # The claim the section is built on: exact for one block given its input, up to noise.
    assert float(glued["dp_block_mean_err"]) < 3 * float(glued["dp_block_mean_se"])


@pytest.mark.parametrize(
    "name",
    [
        "lesion_plain_intact", "lesion_plain_deleted", "lesion_res_intact", "lesion_res_deleted",
        "lesion_sd_intact", "lesion_sd_deleted", "lesion_res_ratio", "lesion_sd_ratio",
        "dp_block_mean_err", "dp_block_mean_se", "dp_stack_mean_err", "dp_stack_mean_se",
        "lesion_plain_verdict", "lesion_res_verdict", "lesion_veit_verdict", "lesion_sd_verdict",
        "dp_block_verdict", "dp_stack_verdict",
    ],
)
def test_glued_value_is_shown_in_the_prose(prose, name):
    assert re.search(r"\{glue(:text)?\}`" + re.escape(name) + r"[`:]", prose)


def test_the_lesion_table_is_shown(prose):
    assert "```{glue:md} lesion_table\n" in prose


def test_fit_comparison_words_follow_the_intact_losses(glued):
    higher = float(glued["lesion_sd_intact"]) > float(glued["lesion_res_intact"])
    assert glued["lesion_sd_vs_res"].strip("'") == ("higher than" if higher else "no higher than")
