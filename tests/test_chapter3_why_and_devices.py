"""Chapter 3's later sections: why BatchNorm helps, and BatchNorm across devices.

The references here are written from the equations (per-slice statistics, all-reduced sums,
the walk along the gradient), with the chapter's seeds where a glued number is recomputed. A
chapter function is only ever the thing under test, taken from its code cell, never the
reference. The synchronized statistics are checked with two real processes that talk through
torch.distributed's gloo backend.
"""

import ast
import copy
import math
import re
import statistics

import jupytext
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import addnorm_helpers

STEM = "03_batchnorm_vs_layernorm"
EPS = 1e-5
# the chapter's toy task: 4 classes of two Gaussian blobs each in 16 dimensions
CLASSES, DIM, HIDDEN = 4, 16, 64
DATA_SEED, DDP_SEED, SLICE_NOISE_SEED = 100, 14, 15
SLICES = [1, 2, 4, 8, 16, 32]
SLICE_SIZES = [2, 4, 8, 16, 32, 64, 128, 256]
MEAN, STD, FEATURES = 2.0, 3.0, 256


def blobs(n, seed, spread=0.8):
    """The chapter's data, from its description: blob centres, blob index, unit noise."""
    g = torch.Generator().manual_seed(seed)
    centres = spread * torch.randn(2 * CLASSES, DIM, generator=g)
    blob = torch.randint(0, 2 * CLASSES, (n,), generator=g)
    return centres[blob] + torch.randn(n, DIM, generator=g), blob % CLASSES


@pytest.fixture(scope="module")
def train_set():
    x, y = blobs(512 + 4096, DATA_SEED)
    return x[:512], y[:512]


def words(glued, name):
    """A glued phrase as the prose shows it (glue stores its repr)."""
    return ast.literal_eval(glued[name])


@pytest.fixture(scope="module")
def chapter_code(repo):
    """define(marker, **names): run the chapter's code cell that contains `marker` in a
    namespace holding `names`, and return that namespace."""
    notebook = jupytext.read(repo / "chapters" / f"{STEM}.md")
    cells = [cell.source for cell in notebook.cells if cell.cell_type == "code"]

    def define(marker, **names):
        source = next(cell for cell in cells if marker in cell)
        namespace = {"torch": torch, "nn": nn, "F": F, "math": math, **names}
        exec(source, namespace)
        return namespace

    return define


# Per-slice statistics (what each device of a data-parallel job computes)


def normalize_rows(rows):
    """Training-mode BatchNorm of a list of equal-length rows, feature by feature."""
    columns = list(zip(*rows))
    out = []
    for column in columns:
        mu = statistics.fmean(column)
        sigma = math.sqrt(statistics.pvariance(column, mu) + EPS)
        out.append([(v - mu) / sigma for v in column])
    return [list(row) for row in zip(*out)]


@settings(max_examples=30, deadline=None)
@given(slices=st.sampled_from([1, 2, 3, 4]), per_slice=st.integers(2, 6),
       features=st.integers(1, 4), seed=st.integers(0, 2**16))
def test_sliced_batch_norm_normalizes_each_slice_with_its_own_statistics(
        chapter_code, slices, per_slice, features, seed):
    sliced = chapter_code("def sliced_batch_norm", EPS=EPS)["sliced_batch_norm"]
    g = torch.Generator().manual_seed(seed)
    x = 3 * torch.randn(slices * per_slice, features, generator=g, dtype=torch.float64) + 1
    expected = [v for k in range(slices)
                for row in normalize_rows(x[k * per_slice:(k + 1) * per_slice].tolist())
                for v in row]
    assert sliced(x, slices).flatten().tolist() == pytest.approx(expected, abs=1e-9)


def slice_effect_by_hand(x, y, slices):
    """Normalized hidden activations and hidden-weight gradient, statistics per slice.

    The network is the chapter's SlicedBatchNormNet, built from the same seed: Linear(16, 64)
    -> per-slice normalization -> ReLU -> Linear(64, 4), mean cross-entropy.
    """
    torch.manual_seed(DDP_SEED)
    hidden, out = nn.Linear(DIM, HIDDEN).double(), nn.Linear(HIDDEN, CLASSES).double()
    h = hidden(x.double())
    parts = []
    for part in h.split(len(x) // slices):                  # one device's rows
        mu = part.sum(0) / len(part)
        var = ((part - mu) ** 2).sum(0) / len(part)         # biased
        parts.append((part - mu) / torch.sqrt(var + EPS))
    normalized = torch.cat(parts)
    loss = F.cross_entropy(out(torch.relu(normalized)), y)
    (grad,) = torch.autograd.grad(loss, hidden.weight)
    return normalized.detach(), grad


@pytest.fixture(scope="module")
def slice_effects(train_set):
    x, y = train_set[0][:64], train_set[1][:64]
    return {k: slice_effect_by_hand(x, y, k) for k in SLICES}


@pytest.mark.parametrize("k", SLICES[1:])
def test_glued_slice_effects_are_the_per_slice_recomputation(glued, slice_effects, k):
    whole_out, whole_grad = slice_effects[1]
    out_k, grad_k = slice_effects[k]
    out_diff = (out_k - whole_out).abs().max().item()
    grad_diff = ((grad_k - whole_grad).norm() / whole_grad.norm()).item()
    assert float(glued[f"slices{k}_out_diff"]) == pytest.approx(out_diff, rel=1e-3)
    assert float(glued[f"slices{k}_grad_diff"]) == pytest.approx(grad_diff, rel=1e-3)


def test_one_slice_is_the_whole_batch(glued):
    assert float(glued["slices1_out_diff"]) == 0.0
    assert float(glued["slices1_grad_diff"]) == 0.0


def test_averaged_per_device_gradients_equal_the_sliced_gradient(glued):
    assert 0.0 <= float(glued["ddp_vs_sliced_grad"]) < 1e-6


def test_the_trend_the_prose_states_matches_the_glued_gradients(glued):
    diffs = [float(glued[f"slices{k}_grad_diff"]) for k in SLICES[1:]]
    grows = all(a < b for a, b in zip(diffs, diffs[1:]))
    assert words(glued, "slices_trend") == (
        "grows at every halving of the slice" if grows
        else "does not grow at every halving of the slice")


# SyncBatchNorm: all-reduced counts, sums and sums of squares


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.integers(1, 9), min_size=1, max_size=4), seed=st.integers(0, 2**16))
def test_synced_statistics_are_the_whole_batch_statistics(chapter_code, sizes, seed):
    synced = chapter_code("def synced_statistics")["synced_statistics"]
    g = torch.Generator().manual_seed(seed)
    x = 3 * torch.randn(sum(sizes), 3, generator=g, dtype=torch.float64) + 2
    mean, var = synced(list(x.split(sizes)))
    columns = list(zip(*x.tolist()))
    assert mean.tolist() == pytest.approx([statistics.fmean(c) for c in columns], abs=1e-9)
    assert var.tolist() == pytest.approx([statistics.pvariance(c) for c in columns], abs=1e-9)


def test_glued_synchronized_statistics_match_the_whole_batch(glued):
    assert 0.0 <= float(glued["sync_stats_diff"]) < 1e-5


def all_reduce_worker(rank, world_size, folder):
    """One device: all-reduce its count, sum and sum of squares; try nn.SyncBatchNorm."""
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous",
                            rank=rank, world_size=world_size)
    torch.set_num_threads(1)
    rows = torch.load(folder / "slices.pt")[rank]            # (n_d, C)
    sums = torch.stack([torch.full_like(rows[0], len(rows)),
                        rows.sum(dim=0), rows.pow(2).sum(dim=0)])   # (3, C)
    dist.all_reduce(sums, op=dist.ReduceOp.SUM)
    count, total, total_sq = sums
    mean = total / count
    try:
        nn.SyncBatchNorm(rows.shape[1]).double().train()(rows)
        refusal = None
    except ValueError as error:
        refusal = str(error)
    torch.save({"mean": mean, "var": total_sq / count - mean**2, "refusal": refusal},
               folder / f"rank{rank}.pt")
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def two_devices(tmp_path_factory):
    """Two gloo processes, one slice each (40 and 24 rows): what each of them computed."""
    folder = tmp_path_factory.mktemp("gloo")
    g = torch.Generator().manual_seed(0)
    batch = 3 * torch.randn(64, 5, generator=g, dtype=torch.float64) + 2   # (N, C)
    torch.save(list(batch.split([40, 24])), folder / "slices.pt")
    # fork: the children reuse this process's torch instead of importing it (0.3 s, not 5)
    mp.start_processes(all_reduce_worker, args=(2, folder), nprocs=2, start_method="fork")
    return batch, [torch.load(folder / f"rank{r}.pt") for r in range(2)]


@pytest.mark.parametrize("rank", [0, 1])
def test_all_reduced_statistics_over_gloo_equal_the_whole_batch_ones(two_devices, rank):
    batch, results = two_devices
    assert torch.allclose(results[rank]["mean"], batch.mean(dim=0), rtol=0, atol=1e-12)
    assert torch.allclose(results[rank]["var"], batch.var(dim=0, correction=0), rtol=0,
                          atol=1e-12)


@pytest.mark.parametrize("rank", [0, 1])
def test_sync_batchnorm_refuses_cpu_tensors_in_a_process_group(two_devices, rank):
    """What the chapter says of torch 2.13: the reason the test all-reduces by hand."""
    refusal = two_devices[1][rank]["refusal"]
    assert refusal is not None and "GPU" in refusal


# How noisy a slice's statistics are


@pytest.fixture(scope="module")
def slice_noise():
    """RMS error of a slice's mean and standard deviation, / STD, with the chapter's seed."""
    torch.manual_seed(SLICE_NOISE_SEED)
    noise = {}
    for n in SLICE_SIZES:
        draws = (MEAN + STD * torch.randn(64, n, FEATURES)).double()
        mean = draws.sum(dim=1) / n
        std = (((draws - mean[:, None]) ** 2).sum(dim=1) / n).sqrt()
        noise[n] = (((mean - MEAN) ** 2).mean().sqrt().item() / STD,
                    ((std - STD) ** 2).mean().sqrt().item() / STD)
    return noise


@pytest.mark.parametrize("n", SLICE_SIZES)
def test_glued_slice_noise_is_the_recomputed_rms_error(glued, slice_noise, n):
    assert float(glued[f"slice_mean_noise_n{n}"]) == pytest.approx(slice_noise[n][0], rel=1e-4)
    assert float(glued[f"slice_std_noise_n{n}"]) == pytest.approx(slice_noise[n][1], rel=1e-4)


def test_slice_mean_noise_falls_as_one_over_root_n(glued):
    off = max(abs(float(glued[f"slice_mean_noise_n{n}"]) * math.sqrt(n) - 1)
              for n in SLICE_SIZES)
    assert off == pytest.approx(float(glued["slice_mean_noise_off"]), abs=1e-9)
    assert off < 0.1


# Noise after BatchNorm (Santurkar et al.)


def test_moving_noise_draws_one_scale_and_shift_per_channel(chapter_code):
    MovingNoise = chapter_code("class MovingNoise")["MovingNoise"]
    noise = MovingNoise()
    x = torch.randn(32, 8)
    y = noise.train()(x)
    scale = (y[1] - y[0]) / (x[1] - x[0])                    # (C,) the same for every row
    shift = y[0] - scale * x[0]
    assert torch.allclose(y, x * scale + shift, atol=1e-5)
    assert ((scale >= 0.5) & (scale <= 2.0)).all() and (shift.abs() <= 1.0).all()
    assert not torch.allclose(noise(x), y)                   # drawn again at every step
    assert torch.allclose(noise.eval()(x), 1.25 * x)


def train_three_ways(seed, x, y, depth=4, lr=0.1, epochs=10, batch_size=32):
    """An independent run of the experiment (own code, another seed): final training loss
    and mean step-to-step move of the second linear layer's input means, per variant."""
    def block(kind):
        if kind == "plain":
            return nn.Identity()
        if kind == "bn":
            return nn.BatchNorm1d(HIDDEN)
        return nn.Sequential(nn.BatchNorm1d(HIDDEN), RandomAffine())

    class RandomAffine(nn.Module):
        def forward(self, h):
            if not self.training:
                return 1.25 * h
            c = h.shape[1]
            return h * (0.5 + 1.5 * torch.rand(c)) + (2 * torch.rand(c) - 1)

    results = {}
    for kind in ("plain", "bn", "noisy"):
        torch.manual_seed(seed)
        layers, width = [], DIM
        for _ in range(depth):
            layers += [nn.Linear(width, HIDDEN), block(kind), nn.ReLU()]
            width = HIDDEN
        net = nn.Sequential(*layers, nn.Linear(width, CLASSES))
        optimizer = torch.optim.SGD(net.parameters(), lr=lr)
        means = []
        for _ in range(epochs):
            for idx in torch.randperm(len(x)).split(batch_size):
                a = net[:3](x[idx])                          # input of the second Linear
                means.append(a.mean(0).detach())
                loss = F.cross_entropy(net[3:](a), y[idx])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        net.eval()
        with torch.no_grad():
            final = F.cross_entropy(net(x), y).item()
        means = torch.stack(means)
        results[kind] = (final, (means[1:] - means[:-1]).abs().mean().item())
    return results


@pytest.fixture(scope="module")
def independent_noise_run(train_set, one_thread):
    return train_three_ways(21, *train_set)


def test_noise_after_batchnorm_moves_the_layer_inputs_more(independent_noise_run):
    moves = {kind: move for kind, (_, move) in independent_noise_run.items()}
    assert moves["noisy"] > 5 * moves["bn"]
    assert moves["noisy"] > moves["plain"]


def test_noisy_batchnorm_trains_closer_to_batchnorm_than_to_no_batchnorm(
        independent_noise_run):
    loss = {kind: final for kind, (final, _) in independent_noise_run.items()}
    assert abs(loss["noisy"] - loss["bn"]) < abs(loss["noisy"] - loss["plain"])


def noise_numbers(glued):
    return {key: {what: float(glued[f"noise_{key}_{what}"]) for what in ("loss", "move", "error")}
            for key in ("plain", "bn", "noisy")}


def test_noise_verdict_says_what_the_glued_numbers_show(glued):
    n = noise_numbers(glued)
    closer = abs(n["noisy"]["loss"] - n["bn"]["loss"]) < abs(
        n["noisy"]["loss"] - n["plain"]["loss"])
    shifts = n["noisy"]["move"] > max(n["bn"]["move"], n["plain"]["move"])
    reproduces = closer and shifts
    assert words(glued, "noise_verdict").startswith(
        "reproduces" if reproduces else "does not reproduce")


def test_noise_move_ratio_is_noisy_over_batchnorm(glued):
    n = noise_numbers(glued)
    assert float(glued["noise_move_ratio"]) == pytest.approx(n["noisy"]["move"] / n["bn"]["move"],
                                                             rel=1e-9)


@pytest.mark.parametrize("name, holds, yes, no", [
    ("noise_loss_order", lambda n: n["noisy"]["loss"] > n["bn"]["loss"], "higher",
     "not higher"),
    ("noise_error_order", lambda n: n["noisy"]["error"] < n["bn"]["error"], "lower than",
     "not lower than"),
])
def test_noise_comparisons_in_words_match_the_numbers(glued, name, holds, yes, no):
    assert words(glued, name).startswith(yes if holds(noise_numbers(glued)) else no)


def test_he_verdict_matches_the_losses(glued):
    he, bn, plain = (float(glued[k]) for k in
                     ("noise_plain_he_loss", "noise_bn_loss", "noise_plain_loss"))
    close = abs(he - bn) < abs(he - plain)
    assert words(glued, "he_verdict") == (
        "close to BatchNorm's" if close else "still far from BatchNorm's")


# The walk along the gradient (Santurkar et al.'s smoothness measures)


def walk_by_hand(net, x, y, step_sizes):
    """Loss variation, gradient change and beta proxy, from the definitions."""
    net = copy.deepcopy(net)            # its running statistics may move, not the original's

    def loss_and_grad(values):          # parameter name -> tensor
        leaves = {name: v.detach().requires_grad_() for name, v in values.items()}
        loss = F.cross_entropy(torch.func.functional_call(net, leaves, (x,)), y)
        return loss.item(), dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values()))))

    start = {name: p.detach() for name, p in net.named_parameters()}
    _, g0 = loss_and_grad(start)
    g0_norm = math.sqrt(sum((g**2).sum().item() for g in g0.values()))
    losses, changes, betas = [], [], []
    for eta in step_sizes:
        loss, g = loss_and_grad({name: start[name] - eta * g0[name] for name in start})
        change = math.sqrt(sum(((g[name] - g0[name]) ** 2).sum().item() for name in start))
        losses.append(loss)
        changes.append(change)
        betas.append(change / (eta * g0_norm))
    return max(losses) - min(losses), max(changes), max(betas)


@pytest.mark.parametrize("with_batchnorm", [False, True])
def test_walk_along_gradient_computes_the_three_measures(chapter_code, with_batchnorm):
    lr = 0.1
    names = chapter_code("def walk_along_gradient", copy=copy, DEEP_LR=lr)
    torch.manual_seed(3)
    layers = [nn.Linear(DIM, 8)] + ([nn.BatchNorm1d(8)] if with_batchnorm else []) + [
        nn.ReLU(), nn.Linear(8, CLASSES)]
    net = nn.Sequential(*layers).double()
    x, y = torch.randn(16, DIM, dtype=torch.float64), torch.randint(0, CLASSES, (16,))
    before = [t.clone() for t in net.state_dict().values()]
    measured = names["walk_along_gradient"](net, x, y)
    steps = [lr * k for k in names["STEP_MULTIPLES"]]
    assert measured == pytest.approx(walk_by_hand(net, x, y, steps), rel=1e-6)
    assert all(torch.equal(a, b) for a, b in zip(before, net.state_dict().values()))


def landscape_numbers(glued):
    keys = ("loss_variation", "gradient_change", "beta")
    return {tag: {key: float(glued[f"landscape_{tag}_{key}"]) for key in keys}
            for tag in ("plain", "plain_he", "bn")}


@pytest.mark.parametrize("reference, tag", [("plain", "plain"), ("plain_he", "he")])
@pytest.mark.parametrize("key", ["loss_variation", "gradient_change", "beta"])
def test_landscape_verdicts_match_the_medians(glued, reference, tag, key):
    n = landscape_numbers(glued)
    smaller = n["bn"][key] < n[reference][key]
    assert words(glued, f"landscape_{tag}_{key}_verdict") == ("smaller" if smaller else "larger")


def test_landscape_overall_verdict_requires_every_measure_against_both_networks(glued):
    n = landscape_numbers(glued)
    all_smaller = all(n["bn"][k] < n[ref][k] for k in n["bn"] for ref in ("plain", "plain_he"))
    assert words(glued, "landscape_overall") == (
        "reproduces" if all_smaller else "does not reproduce")


# Polish: seeds named once, comparisons glued


def test_future_leak_comparison_with_section_a_matches_the_numbers(glued):
    smaller = float(glued["batchnorm_future_leak"]) < float(
        glued["batchnorm_companion_max_abs_diff"])
    assert words(glued, "future_leak_vs_companions") == ("less than" if smaller
                                                             else "not less than")


def test_layernorm_dependence_summary_is_exactly_zero(glued):
    assert float(glued["layernorm_dependence_worst"]) == 0.0


@pytest.mark.parametrize("name", [
    "noise_verdict", "noise_conclusion", "noise_loss_order", "noise_error_order", "he_verdict",
    "he_conclusion", "noise_move_ratio", "noise_plain_he_loss", "landscape_overall",
    "landscape_plain_verdict", "landscape_he_verdict", "slices2_grad_diff", "slices32_grad_diff",
    "slices_trend", "ddp_vs_sliced_grad", "sync_stats_diff", "slice_mean_noise_off",
    "future_leak_vs_companions", "layernorm_dependence_worst",
])
def test_glued_value_is_shown_in_the_prose(prose, name):
    assert re.search(r"\{glue(:text)?\}`" + re.escape(name) + r"[`:]", prose)


@pytest.mark.parametrize("figure", ["ch3-noisy-batchnorm", "ch3-landscape", "ch3-slice-noise"])
def test_new_figures_are_glued_with_a_caption(prose, figure):
    assert f"```{{glue:figure}} {figure}\n:name: {figure}\n:alt: " in prose
