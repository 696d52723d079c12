"""Chapter 9's claims: depth transfer, hyper-connections and mHC, value residuals, gated attention.

Three kinds of checks: key glued numbers equal an independent recomputation written here (same
seeds and data, the equations written out again instead of the chapter's functions); the glued
sentences say what the glued numbers show; and the sourced table and references are complete.
"""

import itertools
import math
import re

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from tests.conftest import REPO

STEM = "09_residual_path_now"
CHAPTER = REPO / "chapters" / f"{STEM}.md"
DEPTHS, BASE_DEPTH = [2, 4, 8, 16], 2
LRS = [1e-3 * 2 ** i for i in range(7)]
N_STREAMS, HC_DEPTH, HC_SEEDS = 4, 64, range(5)
VOCAB, BOS, SEQ, TRAIN_STEPS = 16, 16, 16, 100


@pytest.fixture(scope="module")
def glued(glued_numbers):
    def parse(value):
        if re.fullmatch(r"[-+0-9.e]+|inf|nan", value):
            return float(value)
        return value.strip("'\"")

    return {name: parse(value) for name, value in glued_numbers(STEM).items()}


# --- Depth transfer -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def teacher_data():
    torch.manual_seed(0)
    x = torch.randn(2560, 16)
    a, b = torch.randn(16, 64) / 4, torch.randn(64, 4) / math.sqrt(8)
    y = torch.tanh(x @ a) @ b
    return x[:2048], y[:2048], x[2048:], y[2048:]


def uniform_linear(k, d_in, d_out):
    """nn.Linear's default init, K copies: U(-1/sqrt(d_in), 1/sqrt(d_in))."""
    bound = 1 / math.sqrt(d_in)
    w = torch.empty(k, d_in, d_out).uniform_(-bound, bound).requires_grad_()
    b = torch.empty(k, 1, d_out).uniform_(-bound, bound).requires_grad_()
    return [w, b]


def reference_sweep(data, depth, alpha, steps=100, batch=128, width=64):
    """Test MSE / Var(y) for every learning rate, Adam written from its paper's equations."""
    x_train, y_train, x_test, y_test = data
    torch.manual_seed(0)
    k, shrink = len(LRS), BASE_DEPTH / depth
    embed = uniform_linear(k, 16, width)
    blocks = [uniform_linear(k, width, width) + uniform_linear(k, width, width)
              for _ in range(depth)]
    head = uniform_linear(k, width, 4)
    lr = torch.tensor(LRS).view(k, 1, 1)
    hidden_lr = lr if alpha == 0 else lr * shrink ** (1 - alpha)
    groups = [(embed + head, lr), ([p for blk in blocks for p in blk], hidden_lr)]
    moments = {id(p): (torch.zeros_like(p), torch.zeros_like(p))
               for params, _ in groups for p in params}

    def forward(x):
        h = x @ embed[0] + embed[1]
        for w1, b1, w2, b2 in blocks:
            u = F.layer_norm(h, (width,))
            h = h + shrink ** alpha * (F.gelu(u @ w1 + b1) @ w2 + b2)
        return F.layer_norm(h, (width,)) @ head[0] + head[1]

    batches = torch.Generator().manual_seed(0)
    for t in range(1, steps + 1):
        idx = torch.randint(0, len(x_train), (batch,), generator=batches)
        loss = (forward(x_train[idx].expand(k, -1, -1)) - y_train[idx]).square()
        loss.mean((1, 2)).sum().backward()
        with torch.no_grad():
            for params, rate in groups:
                for p in params:
                    m, v = moments[id(p)]
                    m.mul_(0.9).add_(0.1 * p.grad)
                    v.mul_(0.999).add_(0.001 * p.grad ** 2)
                    step = (m / (1 - 0.9 ** t)) / ((v / (1 - 0.999 ** t)).sqrt() + 1e-8)
                    p -= rate * step
                    p.grad = None
    with torch.no_grad():
        error = (forward(x_test.expand(k, -1, -1)) - y_test).square().mean((1, 2))
    return torch.nan_to_num(error / y_test.var(), nan=float("inf"))


@pytest.mark.parametrize("name, key, alpha, depth",
                         [("CompleteP", "cp", 1.0, 16), ("SP", "sp", 0.0, 16)])
def test_best_learning_rate_and_loss_match_a_recomputed_sweep(
        glued, teacher_data, one_thread, name, key, alpha, depth):
    losses = reference_sweep(teacher_data, depth, alpha)
    assert glued[f"dt_loss_{key}_{depth}"] == pytest.approx(losses.min().item(), rel=1e-3)
    assert glued[f"dt_best_{key}_{depth}"] == pytest.approx(LRS[int(losses.argmin())])


@pytest.mark.parametrize("key", ["sp", "dmup", "cp"])
def test_largest_move_is_read_off_the_glued_best_learning_rates(glued, key):
    base = glued[f"dt_best_{key}_2"]
    moves = [abs(math.log2(glued[f"dt_best_{key}_{d}"] / base)) for d in DEPTHS]
    assert glued[f"dt_move_{key}"] == pytest.approx(max(moves))


def test_depth_verdict_follows_the_moves(glued):
    verdict = glued["dt_verdict"]
    if glued["dt_move_cp"] <= 1 and glued["dt_move_sp"] > 1:
        assert verdict.startswith("The claim reproduces")
        assert f"up to {glued['dt_move_sp']:.0f} octaves" in verdict
    elif glued["dt_move_cp"] <= 1:
        assert "hardly moved" in verdict
    else:
        assert verdict.startswith("The transfer claim does not reproduce cleanly")
        assert f"{glued['dt_move_cp']:.0f} octaves under CompleteP" in verdict
        way = "up" if glued["dt_octaves_cp"] > 0 else "down"
        assert f"moved {way} by up to" in verdict


def test_sp_depth_phrase_compares_the_best_losses_at_16_and_2_blocks(glued):
    worse = glued["dt_loss_sp_16"] >= glued["dt_loss_sp_2"]
    assert glued["dt_sp_depth_phrase"].startswith("no better") == worse


def test_sp_sentence_states_the_direction_the_best_rate_moved(glued):
    fell = glued["dt_best_sp_16"] < glued["dt_best_sp_2"]
    assert ("fell from" in glued["dt_sp_sentence"]) == fell
    assert ("降到" in glued["dt_sp_sentence_zh"]) == fell


def test_depth_sentence_says_whether_complete_p_used_the_depth(glued):
    better = glued["dt_loss_cp_16"] < glued["dt_loss_cp_2"]
    assert glued["dt_depth_sentence"].startswith("and at") == better


# --- Hyper-connections and mHC ------------------------------------------------------------


def sinkhorn_reference(logits, iters=30):
    """Sinkhorn-Knopp on exp(logits), one row and one column at a time, in float64."""
    m = np.exp(logits.double().numpy())
    for _ in range(iters):
        for i in range(m.shape[0]):
            m[i, :] /= m[i, :].sum()
        for j in range(m.shape[1]):
            m[:, j] /= m[:, j].sum()
    return m


def mixing_reference(kind, generator):
    noise = torch.randn(N_STREAMS, N_STREAMS, generator=generator)
    if kind == "HC":
        return (torch.eye(N_STREAMS) + 0.2 * noise).double().numpy()
    return sinkhorn_reference(4.0 * torch.eye(N_STREAMS) + noise)


def gain_reference(m):
    return max(np.abs(m).sum(axis=1).max(), np.abs(m).sum(axis=0).max())


def composite_gain_reference(kind, seed):
    generator, product = torch.Generator().manual_seed(seed), np.eye(N_STREAMS)
    for _ in range(HC_DEPTH):
        product = product @ mixing_reference(kind, generator)
    return gain_reference(product)


def test_one_stream_with_fixed_weights_is_exactly_the_residual_connection(glued):
    assert glued["hc_n1_diff"] == 0.0


@pytest.mark.parametrize("kind, key", [("HC", "hc"), ("mHC", "mhc")])
def test_gain_of_64_mixing_matrices_matches_recomputation(glued, kind, key):
    gains = [composite_gain_reference(kind, seed) for seed in HC_SEEDS]
    assert glued[f"hc_gain_{key}_64"] == pytest.approx(np.median(gains), rel=1e-4)


def test_free_mixing_amplifies_and_doubly_stochastic_mixing_does_not(glued):
    assert glued["hc_gain_hc_64"] > 10
    assert glued["hc_gain_mhc_max"] < 1.02                  # 1 up to Sinkhorn's convergence


def test_mhc_streams_equal_the_residual_stream_when_they_start_as_copies(glued):
    """Equal in exact arithmetic; in float32 the Sinkhorn sums are 1 within rounding, and the text says which."""
    gap = abs(glued["hc_rms_mhc_64"] - glued["hc_rms_res_64"])
    assert gap < 1e-6 * glued["hc_rms_res_64"]
    sentence = glued["hc_equal_sentence"]
    if gap == 0:
        assert sentence.startswith("The last two are not just close but equal:")
    else:
        assert sentence.startswith(f"The last two agree up to float32 rounding (they differ by {gap:.0e}):")


@pytest.mark.parametrize("seed", range(5))
def test_products_of_doubly_stochastic_matrices_stay_doubly_stochastic(seed):
    generator, product = torch.Generator().manual_seed(seed), np.eye(N_STREAMS)
    for _ in range(HC_DEPTH):
        product = product @ sinkhorn_reference(torch.randn(4, 4, generator=generator))
    assert np.allclose(product.sum(axis=0), 1, atol=1e-6)
    assert np.allclose(product.sum(axis=1), 1, atol=1e-6)
    assert (product >= 0).all()


def stream_rms_reference(kind, seed, width=32):
    """RMS of H after 64 layers of H' = A_r^T H + b F(a_m^T H) at init, written out."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    n = 1 if kind == "residual" else N_STREAMS
    layers = []
    for _ in range(HC_DEPTH):
        mlp = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.GELU(),
                            nn.Linear(4 * width, width))
        mix = np.ones((1, 1)) if n == 1 else mixing_reference(kind, generator)
        layers.append((mlp, torch.tensor(mix, dtype=torch.float32)))
    H = torch.randn(16, width).expand(n, -1, -1)
    with torch.no_grad():
        for number, (mlp, mix) in enumerate(layers):
            read = H[number % n]                            # a_m is one-hot
            H = torch.einsum("nm,nbc->mbc", mix, H) + mlp(read)   # b = 1 for every stream
    return H.square().mean().sqrt().item()


@pytest.mark.parametrize("kind, key", [("residual", "res"), ("HC", "hc"), ("mHC", "mhc")])
def test_stream_rms_after_64_layers_matches_recomputation(glued, one_thread, kind, key):
    values = [stream_rms_reference(kind, seed) for seed in HC_SEEDS]
    assert glued[f"hc_rms_{key}_64"] == pytest.approx(np.median(values), rel=1e-3)


def test_stream_rms_sentence_states_what_the_numbers_show(glued):
    like = 2 / 3 < glued["hc_rms_mhc_64"] / glued["hc_rms_res_64"] < 3 / 2
    grows = glued["hc_rms_hc_64"] > 2 * glued["hc_rms_mhc_64"]
    assert glued["hc_rms_sentence"].startswith("the constrained streams") == (like and grows)


# --- Value residual and gated attention -----------------------------------------------------


def toy_batch_reference(batch, generator, permutation):
    x = torch.randint(0, VOCAB, (batch, SEQ), generator=generator)
    keep = torch.rand(batch, SEQ, generator=generator) < 0.9
    for t in range(2, SEQ):
        x[:, t] = torch.where(keep[:, t], permutation[x[:, t - 2]], x[:, t])
    return torch.cat([torch.full((batch, 1), BOS), x], dim=1)


def build_reference(value_residual, gated, depth=4, width=32):
    """The parameters in the chapter's creation order, as a dict of modules."""
    model = nn.ModuleDict({"wte": nn.Embedding(VOCAB + 1, width),
                           "wpe": nn.Embedding(SEQ + 1, width)})
    for i in range(depth):
        model[f"ln1_{i}"] = nn.LayerNorm(width)
        model[f"qkv_{i}"] = nn.Linear(width, 3 * width)
        if gated:
            model[f"gate_{i}"] = nn.Linear(width, width)
        model[f"out_{i}"] = nn.Linear(width, width)
        model[f"ln2_{i}"] = nn.LayerNorm(width)
        model[f"fc_{i}"] = nn.Linear(width, 4 * width)
        model[f"proj_{i}"] = nn.Linear(4 * width, width)
    model["lnf"] = nn.LayerNorm(width)
    model["head"] = nn.Linear(width, VOCAB)
    return model


def forward_reference(model, idx, value_residual, gated, depth=4, n_head=4):
    """Logits, the attention weights of every layer and the stream after every block."""
    B, T = idx.shape
    x = model["wte"](idx) + model["wpe"](torch.arange(T))
    weights, streams, v_first = [], [], None
    for i in range(depth):
        u = model[f"ln1_{i}"](x)
        q, k, v = (t.view(B, T, n_head, -1).transpose(1, 2)
                   for t in model[f"qkv_{i}"](u).chunk(3, dim=-1))
        if v_first is None:
            v_first = v
        elif value_residual:
            v = (v + v_first) / 2
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        scores = scores + torch.full((T, T), float("-inf")).triu(1)
        w = torch.softmax(scores, dim=-1)
        y = (w @ v).transpose(1, 2).reshape(B, T, -1)
        if gated:
            y = y * torch.sigmoid(model[f"gate_{i}"](u))
        x = x + model[f"out_{i}"](y)
        x = x + model[f"proj_{i}"](F.gelu(model[f"fc_{i}"](model[f"ln2_{i}"](x))))
        weights.append(w)
        streams.append(x)
    return model["head"](model["lnf"](x)), weights, streams


@pytest.fixture(scope="module")
def attention_runs():
    """{variant: [measurements per seed]}, trained and measured as the chapter describes."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    permutation = torch.randperm(VOCAB, generator=torch.Generator().manual_seed(123))
    runs = {}
    for name, vr, gated in [("base", False, False), ("vr", True, False), ("gate", False, True)]:
        runs[name] = []
        for seed in range(2):
            torch.manual_seed(seed)
            batches = torch.Generator().manual_seed(seed)
            model = build_reference(vr, gated)
            opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
            for _ in range(TRAIN_STEPS):
                idx = toy_batch_reference(32, batches, permutation)
                logits, _, _ = forward_reference(model, idx[:, :-1], vr, gated)
                loss = F.cross_entropy(logits.reshape(-1, VOCAB), idx[:, 1:].reshape(-1))
                opt.zero_grad()
                loss.backward()
                opt.step()
            with torch.no_grad():
                idx = toy_batch_reference(256, torch.Generator().manual_seed(1000), permutation)
                logits, weights, streams = forward_reference(model, idx[:, :-1], vr, gated)
                late = [w[:, :, 4:] for w in weights]
                runs[name].append({
                    "loss": F.cross_entropy(logits[:, 2:].reshape(-1, VOCAB),
                                            idx[:, 3:].reshape(-1)).item(),
                    "bos": np.array([w[..., 0].mean().item() for w in late]),
                    "entropy": np.array([-(w * w.clamp_min(1e-30).log()).sum(-1).mean().item()
                                         for w in late]),
                })
    torch.set_num_threads(before)
    return runs


def mean_of(runs, name, key):
    return np.mean([r[key] for r in runs[name]], axis=0)


@pytest.mark.parametrize("key", ["base", "vr", "gate"])
def test_loss_of_each_variant_matches_recomputation(glued, attention_runs, key):
    assert glued[f"vr_loss_{key}"] == pytest.approx(mean_of(attention_runs, key, "loss"),
                                                    rel=1e-3)


@pytest.mark.parametrize("key", ["base", "gate"])
def test_attention_weight_on_bos_matches_recomputation(glued, attention_runs, key):
    recomputed = mean_of(attention_runs, key, "bos").mean()
    assert glued[f"ga_bos_{key}"] == pytest.approx(recomputed, rel=1e-3, abs=1e-5)


@pytest.mark.parametrize("key", ["base", "vr"])
def test_attention_entropy_of_layers_2_to_4_matches_recomputation(glued, attention_runs, key):
    recomputed = mean_of(attention_runs, key, "entropy")[1:].mean()
    assert glued[f"vr_entropy_{key}"] == pytest.approx(recomputed, rel=1e-3)


def test_value_residual_verdict_follows_the_glued_gaps(glued):
    gap, loss_gap = glued["vr_entropy_gap"], glued["vr_loss_gap"]
    assert gap == pytest.approx(glued["vr_entropy_vr"] - glued["vr_entropy_base"], abs=1e-6)
    if gap > 0.1 and loss_gap < -0.01:
        assert glued["vr_verdict"].startswith("Both effects show")
    elif gap > 0.1:
        assert glued["vr_verdict"].startswith("Half of it shows")
    else:
        assert glued["vr_verdict"].startswith("The claim does not reproduce")


def test_gated_attention_verdict_follows_the_glued_sink_weights(glued):
    formed = glued["ga_bos_base_max"] > 2 * glued["ga_bos_uniform"]
    if not formed:
        assert glued["ga_verdict"].startswith("The claim cannot be tested")
        assert "not the phenomenon" in glued["ga_closing"]
    elif glued["ga_bos_gated_max"] < 0.5 * glued["ga_bos_base_max"]:
        assert glued["ga_verdict"].startswith("The effect reproduces")
    else:
        assert "did not remove" in glued["ga_verdict"]


def test_uniform_attention_baselines_are_those_of_queries_4_to_15(glued):
    assert glued["ga_bos_uniform"] == pytest.approx(np.mean([1 / (t + 1) for t in range(4, SEQ)]))
    entropy = np.mean([math.log(t + 1) for t in range(4, SEQ)])
    assert glued["vr_entropy_uniform"] == pytest.approx(entropy)


# --- The sourced table and the references -----------------------------------------------------


@pytest.fixture(scope="module")
def prose():
    return CHAPTER.read_text()


def table_rows(text):
    start = text.index("| model | norm | placement |")
    lines = list(itertools.takewhile(lambda line: line.startswith("|"), text[start:].splitlines()))
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def test_table_has_a_row_per_family_each_with_seven_cells_and_a_source(prose):
    rows = table_rows(prose)
    families = [row[0] for row in rows]
    for family in ["BERT", "GPT-2", "GPT-3", "T5", "LLaMA 1-3", "Mistral", "Gemma 1", "Gemma 2",
                   "Gemma 3", "OLMo 2", "Qwen2.5", "Qwen3", "DeepSeek-V3", "nGPT"]:
        assert family in families
    assert all(len(row) == 7 and row[-1] for row in rows)


def test_rows_without_public_code_say_they_rest_on_the_paper(prose):
    rows = {row[0]: row for row in table_rows(prose)}
    assert rows["GPT-3"][-1].startswith("paper")
    assert "not checked against code" in prose


@pytest.mark.parametrize("arxiv_id", ["2310.02244", "2309.16620", "2505.01618", "2409.19606",
                                      "2512.24880", "2410.17897", "2505.06708", "2410.01131"])
def test_every_paper_the_chapter_measures_is_cited_with_its_arxiv_id(prose, arxiv_id):
    references = prose[prose.index("## References"):]
    assert f"arXiv:{arxiv_id}](https://arxiv.org/abs/{arxiv_id})" in references
