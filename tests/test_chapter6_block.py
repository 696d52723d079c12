"""Chapter 6's glued claims: the FFN worked example, position-wise exact zeros, parameter
counts, agreement with nn.TransformerEncoderLayer, and the measurements on stacks.

The worked example and the closed-form parameter counts are recomputed here with the
standard library only; the parameter counts are also checked against modules built
independently of the chapter.
"""

import math
import re

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

