"""The Add & Norm explorer's Python side: the math, the HTML placeholder, the ipywidgets version, the colours.

The HTML version, in a real browser, is tested in test_browser.py against the same function.
"""

import json
import re

import pytest
import torch
import torch.nn.functional as F
import addnorm_helpers  # chapters/ is on pytest's pythonpath (pyproject.toml)
from addnorm_helpers import PALETTE, AddNormWidget, add_and_norm_stages, explorer_html, random_token
from bs4 import BeautifulSoup
from tests.conftest import REPO
from hypothesis import given, settings
from hypothesis import strategies as st


X = [1.0, 2.0, 3.0, 4.0, 5.0]
FX = [0.5, -1.0, 0.25, 2.0, -0.75]


def tokens(width):
    return st.lists(st.floats(-1e3, 1e3, allow_nan=False, width=32), min_size=width, max_size=width)


@st.composite
def token_pairs(draw):
    width = draw(st.integers(2, 16))
    return draw(tokens(width)), draw(tokens(width))


@settings(max_examples=60, deadline=None)
@given(pair=token_pairs(), gamma=st.floats(0.1, 3.0), beta=st.floats(-2.0, 2.0),
       unstable=st.booleans(), residual=st.booleans())
def test_output_matches_torch_layer_norm_of_the_sum(pair, gamma, beta, unstable, residual):
    x, fx = (torch.tensor(v, dtype=torch.float64) for v in pair)
    summed = (x if residual else 0 * x) + (10 * fx if unstable else fx)
    C = len(x)
    expected = F.layer_norm(summed, (C,), torch.full((C,), gamma, dtype=torch.float64),
                            torch.full((C,), beta, dtype=torch.float64), eps=1e-5)
    stages = add_and_norm_stages(x, fx, gamma, beta, unstable=unstable, residual=residual)
    assert torch.allclose(stages.y, expected, atol=1e-9, rtol=1e-9)


def test_normalized_vector_is_layer_norm_without_gamma_and_beta():
    stages = add_and_norm_stages(X, FX, gamma=2.0, beta=-1.0)
    expected = F.layer_norm(torch.tensor(X, dtype=torch.float64) + torch.tensor(FX, dtype=torch.float64), (5,))
    assert torch.allclose(stages.x_hat, expected, atol=1e-12)
    assert torch.allclose(stages.y, 2.0 * stages.x_hat - 1.0, atol=1e-12)


def test_instability_multiplies_the_sublayer_output_by_ten():
    stages = add_and_norm_stages(X, FX, unstable=True)
    assert stages.transformed.tolist() == pytest.approx([10 * v for v in FX])
    assert stages.summed.tolist() == pytest.approx([a + 10 * b for a, b in zip(X, FX)])


def test_cutting_the_residual_zeroes_the_identity_path():
    stages = add_and_norm_stages(X, FX, residual=False)
    assert stages.identity.tolist() == [0.0] * 5
    assert torch.allclose(stages.x_hat, F.layer_norm(torch.tensor(FX, dtype=torch.float64), (5,)), atol=1e-12)


def test_sigma_is_the_biased_standard_deviation_of_the_sum():
    stages = add_and_norm_stages(X, FX)
    summed = torch.tensor(X, dtype=torch.float64) + torch.tensor(FX, dtype=torch.float64)
    assert stages.mu == pytest.approx(summed.mean().item())
    assert stages.sigma == pytest.approx(summed.var(correction=0).sqrt().item())
    assert stages.denominator == pytest.approx((summed.var(correction=0) + 1e-5).sqrt().item())


def test_eps_sits_inside_the_square_root_on_a_nearly_constant_token():
    # spread 4e-4, far below sqrt(eps): eps inside the root damps the token, eps outside would inflate it
    stages = add_and_norm_stages([0.001, 0.0, 0.0, 0.0, 0.0], [0.0] * 5)
    assert stages.x_hat[0].item() == pytest.approx(0.0008 / (1.6e-7 + 1e-5) ** 0.5)
    assert stages.x_hat[0].item() < 0.3


def test_identity_cosine_is_one_when_the_sublayer_is_silent():
    assert add_and_norm_stages(X, [0.0] * 5).identity_cosine == pytest.approx(1.0)


def test_identity_cosine_falls_when_the_sublayer_is_ten_times_louder():
    stable, unstable = add_and_norm_stages(X, FX), add_and_norm_stages(X, FX, unstable=True)
    assert unstable.identity_cosine < stable.identity_cosine


def test_identity_cosine_is_undefined_when_the_sum_is_constant():
    stages = add_and_norm_stages(X, [2.0, 1.0, 0.0, -1.0, -2.0])   # x + F(x) = 3 everywhere
    assert stages.x_hat.tolist() == [0.0] * 5
    assert stages.identity_cosine != stages.identity_cosine   # NaN


def test_random_tokens_have_two_decimals_and_lie_in_minus_one_to_one():
    values = random_token(1000, torch.Generator().manual_seed(0))
    assert values.abs().max() <= 1.0
    assert torch.equal(values, (values * 100).round() / 100)
    assert values.min() < -0.9 and values.max() > 0.9


@pytest.fixture
def placeholder():
    return BeautifulSoup(explorer_html(X, FX), "html.parser").select_one(".addnorm-explorer")


def test_placeholder_carries_the_exact_vectors(placeholder):
    assert [float(v) for v in placeholder["data-x"].split(",")] == X
    assert [float(v) for v in placeholder["data-fx"].split(",")] == FX


def test_placeholder_carries_eps_factor_and_palette_from_the_helpers(placeholder):
    assert float(placeholder["data-eps"]) == addnorm_helpers.LAYER_NORM_EPS == 1e-5
    assert float(placeholder["data-factor"]) == addnorm_helpers.INSTABILITY_FACTOR == 10
    assert json.loads(placeholder["data-palette"]) == PALETTE


def test_placeholder_shows_every_stage_as_a_table_without_javascript(placeholder):
    rows = placeholder.select(".ane-fallback tbody tr")
    stages = add_and_norm_stages(X, FX)
    expected = [stages.identity, stages.transformed, stages.summed, stages.x_hat, stages.y]
    assert len(rows) == len(expected)
    for row, values in zip(rows, expected):
        assert [float(td.text) for td in row.select("td")] == pytest.approx(values.tolist(), abs=0.005)


@pytest.fixture
def widget():
    return AddNormWidget(X, FX)


def bar_heights(axes):
    """Heights of the bars of one panel (its first bar container: shaded bands are not bars)."""
    return [bar.get_height() for bar in axes.containers[0]]


def test_widget_draws_every_stage_as_bars(widget):
    stages = widget.stages
    panels = widget.figure.axes
    expected = [stages.identity, stages.transformed, stages.summed, stages.summed, stages.x_hat, stages.y]
    for axes, values in zip(panels, expected):
        assert bar_heights(axes) == pytest.approx(values.tolist())


def test_widget_instability_button_multiplies_the_drawn_sublayer_output_by_ten(widget):
    widget.unstable.value = True
    assert bar_heights(widget.figure.axes[1]) == pytest.approx([10 * v for v in FX])


def test_widget_instability_button_says_its_state(widget):
    off = widget.unstable.description
    widget.unstable.value = True
    assert "on" in widget.unstable.description and widget.unstable.description != off
    assert widget.unstable.button_style != ""


def test_widget_outlines_the_stable_normalized_vector_after_instability(widget):
    assert len(widget.figure.axes[4].containers) == 1
    widget.unstable.value = True
    outlines = [bar.get_height() for bar in widget.figure.axes[4].containers[1]]
    assert outlines == pytest.approx(add_and_norm_stages(X, FX).x_hat.tolist())


def test_widget_residual_button_zeroes_the_drawn_identity_path(widget):
    widget.residual.value = False
    assert bar_heights(widget.figure.axes[0]) == [0.0] * 5
    assert widget.residual.description.endswith("off")


def test_widget_sliders_scale_and_shift_the_drawn_output(widget):
    widget.gamma.value, widget.beta.value = 2.0, -0.5
    expected = 2.0 * add_and_norm_stages(X, FX).x_hat - 0.5
    assert bar_heights(widget.figure.axes[5]) == pytest.approx(expected.tolist())


def test_widget_sliders_cover_the_explorers_ranges(widget):
    assert (widget.gamma.min, widget.gamma.max, widget.gamma.value) == (0.1, 3.0, 1.0)
    assert (widget.beta.min, widget.beta.max, widget.beta.value) == (-2.0, 2.0, 0.0)


def test_widget_readout_shows_mu_and_sigma(widget):
    stages = widget.stages
    assert f"μ = {stages.mu:.3f}" in widget.readout.value
    assert f"σ = {stages.sigma:.3f}" in widget.readout.value


def test_widget_new_vector_button_draws_new_two_decimal_vectors(widget):
    widget.new_vector.click()
    assert widget.x.tolist() != X and widget.fx.tolist() != FX
    assert bar_heights(widget.figure.axes[0]) == pytest.approx(widget.x.tolist())


def test_widget_shows_a_picture_of_the_stages(widget):
    assert bytes(widget.image.value).startswith(b"\x89PNG")


HEX_COLOUR = re.compile(r"#[0-9A-Fa-f]{6}\b|#[0-9A-Fa-f]{3}\b")


def is_grey(colour):
    digits = colour[1:]
    step = len(digits) // 3
    return len({digits[i:i + step] for i in range(0, len(digits), step)}) == 1


@pytest.mark.parametrize("name", ["explorer.js", "explorer.css", "quiz.js", "quiz.css"])
def test_static_assets_use_only_palette_colours_and_greys(name):
    palette = {colour.lower() for colour in PALETTE.values()}
    colours = {c.lower() for c in HEX_COLOUR.findall((REPO / "_static" / name).read_text())}
    assert {c for c in colours if c not in palette and not is_grey(c)} == set()

