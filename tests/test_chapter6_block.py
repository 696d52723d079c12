"""Chapter 6's glued claims: the FFN worked example, position-wise exact zeros, parameter
counts, agreement with nn.TransformerEncoderLayer, the measurements on stacks, rank collapse
without the skip path, and the residual-stream sum of writes.

The worked example and the closed-form parameter counts are recomputed here with the
standard library only; the parameter counts are also checked against modules built
independently of the chapter. The distance from rank one is recomputed by least squares (the
chapter uses the rows' mean), and the sum of writes with a block written out by hand.
"""

import math
import re
import statistics

import pytest
import torch
import torch.nn as nn

STEM = "06_transformer_block"

# Seed 001's FFN example: row-vector convention, FFN(x) = ReLU(x W1 + b1) W2 + b2.
SEED_X = [0.5, 1.0, -0.5, 0.3]
SEED_W1 = [[0.2, 0.3, 0.1], [0.4, -0.1, 0.5], [0.1, 0.2, -0.3], [-0.2, 0.4, 0.2]]
SEED_B1 = [0.1, -0.1, 0.2]
SEED_W2 = [[0.5, 0.2, -0.1, 0.3], [0.1, 0.4, 0.2, -0.2], [-0.3, 0.1, 0.5, 0.4]]
SEED_B2 = [0.0, 0.0, 0.0, 0.0]
SEED_WRONG_HIDDEN = [0.47, 0.47, -0.09]  # what seed 001 prints for x W1 + b1
SEED_WRONG_OUTPUT = [0.28, 0.28, 0.05, 0.05]


def row_times_matrix(row, matrix, bias):
    return [sum(r * matrix[i][j] for i, r in enumerate(row)) + bias[j] for j in range(len(bias))]


def gelu(v):
    return 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))


def parse_vector(text):
    return [float(v) for v in text.strip("'\"[] ").split(",")]


def closed_form_block_params(d, d_ff):
    """nn.MultiheadAttention (in_proj + out_proj, with biases), two nn.Linear, two LayerNorms."""
    return 4 * d * d + 4 * d + 2 * d * d_ff + d_ff + d + 4 * d


@pytest.fixture(scope="module")
def ffn_by_hand():
    hidden = row_times_matrix(SEED_X, SEED_W1, SEED_B1)
    activated = [max(0.0, h) for h in hidden]
    return {
        "hidden": hidden,
        "activated": activated,
        "out": row_times_matrix(activated, SEED_W2, SEED_B2),
        "gelu_out": row_times_matrix([gelu(h) for h in hidden], SEED_W2, SEED_B2),
        "blog_replayed": row_times_matrix([max(0.0, h) for h in SEED_WRONG_HIDDEN], SEED_W2, SEED_B2),
    }


# --- the FFN worked example -------------------------------------------------------------


@pytest.mark.parametrize(
    "name, key, tolerance",
    [
        ("ffn_hidden", "hidden", 5e-3),
        ("ffn_activated", "activated", 5e-3),
        ("ffn_out", "out", 5e-4),
        ("ffn_gelu_out", "gelu_out", 5e-4),
        ("ffn_blog_replayed", "blog_replayed", 5e-4),
    ],
)
def test_ffn_worked_example_matches_a_standard_library_computation(glued, ffn_by_hand, name, key, tolerance):
    assert parse_vector(glued[name]) == pytest.approx(ffn_by_hand[key], abs=tolerance)


def test_ffn_worked_example_is_the_one_in_the_errata(glued):
    assert parse_vector(glued["ffn_hidden"]) == pytest.approx([0.49, -0.03, 0.96], abs=1e-9)
    assert parse_vector(glued["ffn_out"]) == pytest.approx([-0.043, 0.194, 0.431, 0.531], abs=1e-9)


def test_ffn_worked_example_is_not_the_seeds_wrong_arithmetic(glued):
    assert parse_vector(glued["ffn_hidden"]) != pytest.approx(SEED_WRONG_HIDDEN, abs=1e-2)
    assert parse_vector(glued["ffn_out"]) != pytest.approx(SEED_WRONG_OUTPUT, abs=1e-2)
    assert float(glued["ffn_blog_hidden_max_abs_diff"]) > 0.1


def test_seeds_later_steps_are_consistent_with_its_wrong_first_step(ffn_by_hand):
    # The claim the chapter's warning makes: replaying steps 2-3 on the seed's hidden vector
    # reproduces the seed's output to its two printed decimals.
    assert [round(v, 2) for v in ffn_by_hand["blog_replayed"]] == SEED_WRONG_OUTPUT


def test_first_hidden_unit_worked_by_hand(glued):
    assert float(glued["ffn_hidden_first"]) == pytest.approx(0.49, abs=1e-12)


def test_nn_linear_with_transposed_weights_reproduces_the_example(glued):
    assert 0.0 <= float(glued["ffn_module_max_abs_diff"]) < 1e-12


# --- position-wise and causal: exact zeros ----------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["ffn_permutation_max_abs_diff", "ffn_other_tokens_max_abs_diff", "causal_earlier_tokens_max_abs_diff"],
)
def test_claimed_exact_zero_is_exactly_zero(glued, name):
    assert float(glued[name]) == 0.0


@pytest.mark.parametrize("name", ["attn_earlier_tokens_max_abs_diff", "causal_last_token_max_abs_diff"])
def test_attention_without_a_mask_or_on_the_changed_token_does_move(glued, name):
    assert float(glued[name]) > 0.1


def test_an_independent_ffn_is_position_wise_to_the_last_bit():
    torch.manual_seed(123)
    ffn = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 16))
    x = torch.randn(3, 10, 16)
    perm = torch.randperm(10)
    changed = x.clone()
    changed[:, 1:] += torch.randn(3, 9, 16)
    with torch.no_grad():
        y = ffn(x)
        assert torch.equal(ffn(x[:, perm]), y[:, perm])
        assert torch.equal(ffn(changed)[:, 0], y[:, 0])


# --- blocks: shapes and agreement with PyTorch ------------------------------------------


def test_blocks_preserve_the_input_shape(glued):
    assert glued["block_shapes_preserved"] == "True"
    assert glued["block_input_shape"].strip("'\"") == "(8, 32, 64)"


@pytest.mark.parametrize("placement", ["post", "pre"])
def test_block_agrees_with_nn_transformer_encoder_layer(glued, placement):
    assert 0.0 <= float(glued[f"torch_layer_max_abs_diff_{placement}"]) < 1e-5


# --- parameter counts -------------------------------------------------------------------


@pytest.mark.parametrize("d", [64, 512])
def test_closed_form_with_d_ff_4d_is_12_d_squared_plus_13_d(d):
    assert closed_form_block_params(d, 4 * d) == 12 * d * d + 13 * d


@pytest.mark.parametrize(
    "d, n_heads, d_ff",
    [(64, 4, 256), (512, 8, 2048), (48, 3, 100), (32, 1, 32)],
)
def test_closed_form_counts_an_independent_nn_transformer_encoder_layer(d, n_heads, d_ff):
    with torch.device("meta"):
        layer = nn.TransformerEncoderLayer(d, n_heads, d_ff, batch_first=True)
    assert closed_form_block_params(d, d_ff) == sum(p.numel() for p in layer.parameters())


@pytest.mark.parametrize(
    "name, d, d_ff",
    [
        ("params_block_small", 64, 256),
        ("params_closed_form_small", 64, 256),
        ("params_block_base", 512, 2048),
        ("params_closed_form_base", 512, 2048),
        ("params_torch_layer_base", 512, 2048),
    ],
)
def test_glued_block_count_equals_the_closed_form(glued, name, d, d_ff):
    assert int(glued[name]) == closed_form_block_params(d, d_ff)


def test_glued_base_encoder_count_is_six_blocks(glued):
    assert int(glued["params_encoder_base"]) == 6 * closed_form_block_params(512, 2048) == 18_914_304
    assert float(glued["params_encoder_base_millions"]) == pytest.approx(18.914304)


def test_number_of_heads_does_not_change_the_count(glued):
    assert glued["params_same_for_every_head_count"] == "True"


def test_ffn_share_of_block_parameters(glued):
    d, d_ff = 64, 256
    assert float(glued["ffn_share_of_block"]) == pytest.approx(
        (2 * d * d_ff + d_ff + d) / closed_form_block_params(d, d_ff)
    )


def test_rough_tally_of_the_base_model_is_near_the_published_65_million(glued):
    d, d_ff = 512, 2048
    decoder_block = 2 * (4 * d * d + 4 * d) + 2 * d * d_ff + d_ff + d + 3 * 2 * d
    tally = 6 * closed_form_block_params(d, d_ff) + 6 * decoder_block + 37_000 * d
    assert float(glued["params_tally_base_millions"]) == pytest.approx(tally / 1e6)
    assert 60 < tally / 1e6 < 65


# --- stacks ------------------------------------------------------------------------------


def test_pre_norm_stream_grows_with_depth(glued):
    assert 1.0 < float(glued["pre_stream_rms_d6"]) < float(glued["pre_stream_rms_d48"])


@pytest.mark.parametrize("name", ["pre_final_rms_d6", "pre_final_rms_d48", "post_stream_rms_d48"])
def test_final_norm_and_post_norm_deliver_unit_scale(glued, name):
    assert float(glued[name]) == pytest.approx(1.0, abs=1e-3)


def test_sandwich_absorbs_inflated_sublayer_weights_but_pre_norm_does_not(glued):
    assert float(glued["sandwich_rms_ratio_x10"]) == pytest.approx(1.0, abs=0.05)
    assert float(glued["prenorm_rms_ratio_x10"]) > 5.0


def test_sandwich_grows_faster_than_pre_norm_at_initialization(glued):
    assert float(glued["sandwich_rms_d48_init"]) > float(glued["prenorm_rms_d48_init"])
    assert float(glued["sublayer_output_rms_init"]) < 1.0


def test_deepnorm_constants_for_48_layers(glued):
    assert float(glued["deepnorm_alpha"]) == pytest.approx((2 * 48) ** 0.25)
    assert float(glued["deepnorm_beta"]) == pytest.approx((8 * 48) ** -0.25)


def test_deepnorm_stack_starts_closer_to_the_identity_than_post_norm(glued):
    assert float(glued["deepnorm_cos_in_out_d48"]) > 0.9 > float(glued["post_cos_in_out_d48"])


# --- the prose shows what the code measured ----------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "ffn_hidden", "ffn_out", "ffn_blog_replayed", "ffn_permutation_max_abs_diff",
        "ffn_other_tokens_max_abs_diff", "causal_earlier_tokens_max_abs_diff",
        "torch_layer_max_abs_diff_post", "torch_layer_max_abs_diff_pre", "params_block_base",
        "params_closed_form_base", "params_torch_layer_base", "params_encoder_base",
        "pre_stream_rms_d48", "pre_final_rms_d48", "sandwich_rms_ratio_x10", "prenorm_rms_ratio_x10",
        "deepnorm_cos_in_out_d48",
        # words chosen by the measurement, never typed
        "sandwich_absorbs", "sandwich_vs_prenorm_init", "sandwich_prediction_verdict",
        "post_cos_verdict", "deepnorm_cos_verdict",
    ],
)
def test_glued_number_is_shown_in_the_prose(prose, name):
    assert re.search(r"\{glue(:text)?\}`" + re.escape(name) + r"[`:]", prose)



# --- rank collapse without the skip path (Dong et al. 2021) ------------------------------

RANK_B, RANK_T, RANK_C, RANK_HEADS, RANK_DEPTH = 8, 32, 64, 4, 48


def relative_residual_reference(x):
    """|X - 1 x*^T|_F / |X|_F per sequence, x* found by least squares, not by a mean."""
    ones = torch.ones(x.shape[1], 1, dtype=x.dtype)
    values = []
    for seq in x:  # (T, C)
        best = torch.linalg.lstsq(ones, seq).solution  # (1, C): argmin |seq - 1 x^T|
        values.append(((seq - ones @ best).norm() / seq.norm()).item())
    return values


class PureAttentionLayer(nn.Module):
    def __init__(self, skip):
        super().__init__()
        self.attn = nn.MultiheadAttention(RANK_C, RANK_HEADS, batch_first=True)
        self.skip = skip

    def forward(self, x):
        a = self.attn(x, x, x, need_weights=False)[0]
        return x + a if self.skip else a


@pytest.fixture(scope="module")
def pure_attention_curve(one_thread):
    """Median relative residual of pure attention at depths 0..3, seed 0, as the chapter draws."""
    torch.manual_seed(0)
    x = torch.randn(RANK_B, RANK_T, RANK_C, dtype=torch.float64)
    layers = [PureAttentionLayer(skip=False).double() for _ in range(RANK_DEPTH)]
    curve = [statistics.median(relative_residual_reference(x))]
    with torch.no_grad():
        for layer in layers[:3]:
            x = layer(x)
            curve.append(statistics.median(relative_residual_reference(x)))
    return curve


def test_pure_attention_collapses_towards_rank_one_in_a_few_layers(pure_attention_curve):
    assert pure_attention_curve[0] > 0.9
    assert pure_attention_curve[3] < 1e-10


def test_attention_with_a_skip_path_does_not_collapse(one_thread):
    torch.manual_seed(11)
    x = torch.randn(RANK_B, RANK_T, RANK_C, dtype=torch.float64)
    with torch.no_grad():
        for _ in range(12):
            x = PureAttentionLayer(skip=True).double()(x)
    assert min(relative_residual_reference(x)) > 0.5


def test_glued_seed_0_curve_is_within_the_glued_range_of_seeds(glued, pure_attention_curve):
    # The glued values are medians over five seeds; seed 0 alone must be of the same order.
    for depth in (1, 2):
        glued_value = float(glued[f"rank_pure_d{depth}"])
        assert glued_value / 10 < pure_attention_curve[depth] < glued_value * 10


def test_glued_rank_collapse_numbers_say_what_the_prose_claims(glued):
    assert float(glued["rank_input"]) > 0.9
    assert float(glued["rank_pure_d1"]) > float(glued["rank_pure_d2"]) > float(glued["rank_pure_d3"])
    assert int(glued["rank_pure_floor_depth"]) <= 6
    assert float(glued["rank_skip_min_d48"]) > 0.1 and float(glued["rank_block_min_d48"]) > 0.1


def test_doubly_exponential_verdict_follows_the_exponent_growth(glued):
    grows = float(glued["rank_exponent_growth_2"]) > 2 and float(glued["rank_exponent_growth_3"]) > 2
    assert glued["rank_doubly_verdict"].strip("'") == ("reproduces" if grows else "does not reproduce")


def test_exponent_growth_is_the_ratio_of_digits_lost(glued):
    digits = [-math.log10(float(glued[f"rank_pure_d{d}"])) for d in (1, 2, 3)]
    assert float(glued["rank_exponent_growth_2"]) == pytest.approx(digits[1] / digits[0], rel=1e-3)
    assert float(glued["rank_exponent_growth_3"]) == pytest.approx(digits[2] / digits[1], rel=1e-3)


def test_ffn_verdict_follows_the_two_curves(glued):
    slows = float(glued["rank_ffn_d2"]) > float(glued["rank_pure_d2"])
    assert glued["rank_ffn_verdict"].strip("'").startswith("slows" if slows else "does not slow")


def test_skip_verdict_follows_the_lowest_seed(glued):
    keeps = min(float(glued["rank_skip_min_d48"]), float(glued["rank_block_min_d48"])) > 0.1
    assert glued["rank_skip_verdict"].strip("'") == ("do not collapse" if keeps else "also approach rank one")


# --- the residual-stream view (Elhage et al. 2021) ---------------------------------------


class ReferencePreNormBlock(nn.Module):
    def __init__(self, d, heads, d_ff):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ffn = nn.Sequential(nn.Linear(d, d_ff), nn.GELU(), nn.Linear(d_ff, d))
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def writes(self, x, mask):
        """(stream after the block, attention write, FFN write)."""
        h = self.norm1(x)
        a = self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        m = self.ffn(self.norm2(x + a))
        return x + a + m, a, m


def test_pre_norm_stream_is_the_input_plus_every_write(one_thread):
    torch.manual_seed(5)
    x0 = torch.nn.functional.layer_norm(torch.randn(2, 16, 32), (32,))
    mask = torch.ones(16, 16, dtype=torch.bool).triu(1)
    x, total = x0, torch.zeros_like(x0)
    with torch.no_grad():
        for _ in range(12):
            x, a, m = ReferencePreNormBlock(32, 4, 128).writes(x, mask)
            total = total + a + m
    assert ((x - (x0 + total)).norm() / x.norm()).item() < 1e-5


def test_glued_sum_of_writes_holds_for_pre_norm_and_fails_for_post_norm(glued):
    assert float(glued["stream_sum_err_pre"]) < 1e-5
    assert float(glued["stream_sum_err_post"]) > 0.5
    assert int(glued["stream_n_writes"]) == 2 * 48


@pytest.mark.parametrize("sublayer", ["attn", "ffn"])
def test_glued_write_ratios_are_positive_and_below_one(glued, sublayer):
    for when in ("first", "last"):
        assert 0 < float(glued[f"write_ratio_{sublayer}_{when}"]) < 1


def test_write_ratio_verdict_follows_first_and_last_block(glued):
    first = float(glued["write_ratio_attn_first"]) + float(glued["write_ratio_ffn_first"])
    last = float(glued["write_ratio_attn_last"]) + float(glued["write_ratio_ffn_last"])
    assert glued["write_ratio_trend"].strip("'").startswith("are smaller" if last < first else "are not smaller")


def test_pre_norm_stream_trend_verdict_follows_the_glued_sizes(glued):
    grows = float(glued["pre_stream_rms_d48"]) > float(glued["pre_stream_rms_d6"]) > 1.0
    verdict = glued["pre_stream_trend"].strip("'")
    assert verdict in (("grows with every block", "grows with depth") if grows else ("does not grow with depth",))


def test_sublayer_output_verdict_follows_its_rms(glued):
    smaller = float(glued["sublayer_output_rms_init"]) < 1
    assert glued["sublayer_output_vs_input"].strip("'") == ("smaller than" if smaller else "no smaller than")


@pytest.mark.parametrize(
    "name",
    [
        "rank_input", "rank_pure_d1", "rank_pure_d2", "rank_pure_d3", "rank_pure_floor_depth",
        "rank_skip_d48", "rank_block_d48", "rank_ffn_d2", "rank_exponent_growth_2",
        "stream_sum_err_pre", "stream_sum_err_post", "write_ratio_attn_first", "write_ratio_ffn_last",
        "rank_doubly_verdict", "rank_ffn_verdict", "rank_skip_verdict", "write_ratio_trend",
        "pre_stream_trend", "sublayer_output_vs_input",
    ],
)
def test_new_glued_value_is_shown_in_the_prose(prose, name):
    assert re.search(r"\{glue(:text)?\}`" + re.escape(name) + r"[`:]", prose)


def test_the_summary_says_post_norm_scrambles_rather_than_keeps_its_input(prose):
    summary = prose[prose.index("## Summary"):prose.index("## Check your understanding")]
    assert "keep cosine" not in summary
    assert "{glue:text}`post_cos_verdict`" in summary


def test_the_chapter_ends_with_references_citing_dong_and_elhage(prose):
    references = prose[prose.index("## References"):]
    assert prose.rstrip().endswith(references.rstrip())
    for cited in ("arXiv:2103.03404", "transformer-circuits.pub", "arXiv:1706.03762", "arXiv:2203.00555"):
        assert cited in references
