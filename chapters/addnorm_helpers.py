"""Helpers shared by every chapter of Add & Norm: seeding, plot style, glue, and chapter 2's explorer.

Chapters import this module instead of repeating set-up code. It is small on
purpose: anything a learner should read belongs in the chapter itself. The one
exception, the explorer's math (add_and_norm_stages), lives here because the
book's HTML explorer, its ipywidgets version and chapter 2 all use it; chapter 2
shows its source.
"""

import html
import io
import json
import math
import random
from dataclasses import dataclass

import matplotlib as mpl
from matplotlib.figure import Figure
import numpy as np
import torch

# Okabe & Ito's palette: distinguishable under the common colour-vision
# deficiencies. Curves also differ by marker and line style, so colour is
# never the only cue.
PALETTE = {
    "blue": "#0072B2",
    "orange": "#E69F00",
    "green": "#009E73",
    "vermillion": "#D55E00",
    "sky": "#56B4E9",
    "purple": "#CC79A7",
    "yellow": "#F0E442",
    "black": "#000000",
}


def seed_everything(seed: int) -> int:
    """Seed Python, NumPy and PyTorch, and return the seed.

    It prints nothing: a printed ``seed = 0`` tells a reader of the book nothing, so the
    chapters name their seeds once, in a caption or a sentence.
    """
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return seed



def use_course_style() -> None:
    """One plot style for the whole book: readable fonts, light grid, palette."""
    # The course's models are tiny: a second thread mostly waits on the first, and
    # on a busy machine its spinning made small training steps up to 60x slower.
    torch.set_num_threads(1)
    mpl.rcParams.update(
        {
            "figure.figsize": (6.4, 3.8),
            "figure.dpi": 110,
            "savefig.dpi": 110,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.titlesize": 11,
            "axes.labelsize": 10,
            "legend.fontsize": 9,
            "legend.frameon": False,
            "axes.prop_cycle": mpl.cycler(color=list(PALETTE.values())),
            # Fixed metadata keeps SVG/PNG output identical from build to build.
            "svg.hashsalt": "add-and-norm",
        }
    )


def glue(name: str, value, display: bool = False) -> None:
    """Glue ``value`` into the book under ``name``; returns nothing.

    In the book build this is myst-nb's ``glue``. Where myst-nb is not
    installed (Colab, say) it does nothing, so the notebook still runs top to
    bottom; chapters print what they glue, so no number is hidden there.
    """
    try:
        from myst_nb import glue as _glue
    except ImportError:
        return
    _glue(name, value, display=display)


def glue_text(name: str, en, zh) -> None:
    """Glue a phrase whose wording depends on a measurement, once per edition.

    The English pages paste ``name``, the Chinese pages ``name_zh``: both
    editions run the same cell, so the two phrases always state the same
    outcome. ``en`` and ``zh`` may also be ``Markdown`` objects (tables).
    """
    glue(name, en)
    glue(f"{name}_zh", zh)


def show_figure(name: str) -> None:
    """Show the current figure here, and glue it as ``name`` for the book.

    The book pastes it with its caption and alt text through a
    ``{glue:figure}`` directive after the cell (the cell's own output is
    removed there), so captions are text of the page, not of the code, and
    both editions of a chapter share one code cell. Jupyter and Colab show
    the figure in the cell.
    """
    import matplotlib.pyplot as plt

    glue(name, plt.gcf())
    plt.show()


def fmt_vector(values, digits: int = 3) -> str:
    """Format a 1-D tensor or sequence as ``[a, b, c]`` with fixed decimals."""
    if isinstance(values, torch.Tensor):
        values = values.detach().flatten().tolist()
    return "[" + ", ".join(f"{float(v):.{digits}f}" for v in values) + "]"


# ---------------------------------------------------------------------------
# The Add & Norm explorer of chapter 2. One definition of its math, used by the
# chapter, by the ipywidgets version below, and ported line by line to
# _static/explorer.js for the book's HTML version (the browser tests check the
# port against this function and against torch.nn.functional.layer_norm).

LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default
INSTABILITY_FACTOR = 10.0  # "inject instability" multiplies F(x) by this


@dataclass(frozen=True)
class AddNormStages:
    """Every intermediate of Add & Norm on one token of C features."""

    identity: torch.Tensor  # (C,) the identity path: x, or zeros with the residual connection off
    transformed: torch.Tensor  # (C,) the transformation path: F(x), or 10 F(x) when unstable
    summed: torch.Tensor  # (C,) the Add: identity + transformed
    mu: float  # mean of the sum
    sigma: float  # standard deviation of the sum, biased: divides by C
    denominator: float  # sqrt(sigma^2 + eps), what LayerNorm divides by
    x_hat: torch.Tensor  # (C,) (summed - mu) / denominator
    y: torch.Tensor  # (C,) gamma * x_hat + beta, the output
    identity_cosine: float  # cosine of x_hat with LayerNorm(x): how much of x's direction is left


def add_and_norm_stages(x, fx, gamma=1.0, beta=0.0, eps=LAYER_NORM_EPS, unstable=False, residual=True):
    """Add & Norm of one token, LayerNorm(x + F(x)) * gamma + beta, with every intermediate.

    ``x`` is the token (C,), ``fx`` the sublayer's output F(x) (C,); ``gamma`` and ``beta``
    are one number each, shared by all features. ``unstable`` multiplies F(x) by 10,
    ``residual=False`` cuts the identity path. Computed in float64; the normalization is
    torch.nn.LayerNorm's: biased variance, eps inside the square root.
    """
    x = torch.as_tensor(x, dtype=torch.float64)  # (C,)
    fx = torch.as_tensor(fx, dtype=torch.float64)  # (C,)
    identity = x if residual else torch.zeros_like(x)
    transformed = INSTABILITY_FACTOR * fx if unstable else fx
    summed = identity + transformed  # Add
    mu = summed.mean()
    var = ((summed - mu) ** 2).mean()  # biased: divides by C
    denominator = torch.sqrt(var + eps)  # eps inside the square root
    x_hat = (summed - mu) / denominator  # Norm
    y = gamma * x_hat + beta  # scale and shift
    x_alone = (x - x.mean()) / torch.sqrt(((x - x.mean()) ** 2).mean() + eps)  # LayerNorm(x)
    lengths = x_hat.norm() * x_alone.norm()
    cosine = (x_hat @ x_alone / lengths).item() if lengths > 0 else math.nan
    return AddNormStages(identity, transformed, summed, mu.item(), var.sqrt().item(), denominator.item(),
                         x_hat, y, cosine)


def random_token(features: int = 5, generator: torch.Generator | None = None) -> torch.Tensor:
    """A token of ``features`` values uniform in [-1, 1], rounded to two decimals (float64)."""
    values = 2 * torch.rand(features, generator=generator, dtype=torch.float64) - 1
    return values.round(decimals=2)


# The explorer's stand-in without JavaScript is in both languages: the chapter's code is the same in
# both editions, so the page's own language (<html lang>) picks the text, by this rule. Jupyter
# (lang "en") shows the English.
FALLBACK_STYLE = (
    "<style>html:not(:lang(zh)) .ane-fallback [lang|=zh], html:lang(zh) .ane-fallback [lang=en]"
    " {display: none}</style>"
)


def in_both_languages(english: str, chinese: str) -> str:
    """HTML of ``english`` and ``chinese`` side by side, each marked with its language; FALLBACK_STYLE shows one."""
    return f"<span lang='en'>{english}</span><span lang='zh-CN'>{chinese}</span>"


def explorer_html(x, fx) -> str:
    """The HTML of the book's Add & Norm explorer, starting from token ``x`` and sublayer output ``fx``.

    _static/explorer.js turns it into the interactive explorer. Without that script (in
    Jupyter, say) it shows what the explorer starts with: every stage as a table, in the page's language.
    """
    stages = add_and_norm_stages(x, fx)
    rows = [
        (("x, identity path", "x，恒等路径"), stages.identity),
        (("F(x), transformation path", "F(x)，变换路径"), stages.transformed),
        (("x + F(x), the Add", "x + F(x)，相加（Add）"), stages.summed),
        (("x̂, normalized", "x̂，归一化之后"), stages.x_hat),
        (("y = γ x̂ + β (γ = 1, β = 0)", "y = γ x̂ + β（γ = 1，β = 0）"), stages.y),
    ]
    body = "".join(
        f"<tr><th scope='row'>{in_both_languages(*map(html.escape, names))}</th>"
        + "".join(f"<td>{v:.2f}</td>" for v in values.tolist())
        + "</tr>"
        for names, values in rows
    )
    header = "".join(f"<th scope='col'>{i + 1}</th>" for i in range(len(stages.summed)))
    numbers = lambda values: ",".join(repr(v) for v in torch.as_tensor(values, dtype=torch.float64).tolist())
    statistics = f"μ = {stages.mu:.3f}, σ = {stages.sigma:.3f}"
    introduction = in_both_languages(
        "The interactive explorer needs the book's JavaScript. In Jupyter, run"
        " <code>AddNormWidget(x, fx)</code> (from addnorm_helpers) for its ipywidgets version."
        f" Here is where it starts: {statistics}.",
        "交互演示需要本书的 JavaScript。在 Jupyter 中运行 <code>AddNormWidget(x, fx)</code>"
        f"（来自 addnorm_helpers），可以得到它的 ipywidgets 版本。下表是它的初始状态：{statistics.replace(', ', '，')}。",
    )
    return (
        f"<div class='addnorm-explorer' data-x='{numbers(x)}' data-fx='{numbers(fx)}'"
        f" data-eps='{LAYER_NORM_EPS!r}' data-factor='{INSTABILITY_FACTOR!r}'"
        f" data-palette='{html.escape(json.dumps(PALETTE))}'>"
        f"<div class='ane-fallback'>{FALLBACK_STYLE}<p>{introduction}</p>"
        f"<table><thead><tr><th scope='col'>{in_both_languages('feature', '特征')}</th>{header}</tr></thead>"
        f"<tbody>{body}</tbody></table>"
        "</div></div>"
    )


class AddNormWidget:
    """The Add & Norm explorer as ipywidgets, for learners running the chapter in Jupyter.

    Same controls and same math (add_and_norm_stages) as the book's HTML explorer; the six
    stages are drawn with matplotlib. Display it as the last expression of a cell.
    """

    def __init__(self, x, fx, seed: int = 0):
        import ipywidgets as widgets

        self.x = torch.as_tensor(x, dtype=torch.float64)
        self.fx = torch.as_tensor(fx, dtype=torch.float64)
        self._generator = torch.Generator().manual_seed(seed)  # for "new random vector"
        self.unstable = widgets.ToggleButton(value=False, layout={"width": "auto"})
        self.residual = widgets.ToggleButton(value=True, layout={"width": "auto"})
        self.new_vector = widgets.Button(description="New random vector", icon="refresh",
                                         layout={"width": "auto"})
        slider = {"step": 0.1, "continuous_update": False, "readout_format": ".1f"}
        self.gamma = widgets.FloatSlider(value=1.0, min=0.1, max=3.0, description="γ (gamma)", **slider)
        self.beta = widgets.FloatSlider(value=0.0, min=-2.0, max=2.0, description="β (beta)", **slider)
        self.readout = widgets.HTML()
        self.image = widgets.Image(format="png")
        self.figure = None  # the last figure drawn, kept for inspection

        for control in (self.unstable, self.residual, self.gamma, self.beta):
            control.observe(self.update, names="value")
        self.new_vector.on_click(self.draw_new_vector)
        self.widget = widgets.VBox([
            widgets.HBox([self.unstable, self.residual, self.new_vector]),
            widgets.HBox([self.gamma, self.beta]),
            self.readout,
            self.image,
        ])
        self.update()

    @property
    def stages(self) -> AddNormStages:
        return add_and_norm_stages(self.x, self.fx, self.gamma.value, self.beta.value,
                                   unstable=self.unstable.value, residual=self.residual.value)

    def draw_new_vector(self, _button=None) -> None:
        self.x = random_token(len(self.x), self._generator)
        self.fx = random_token(len(self.fx), self._generator)
        self.update()

    def update(self, _change=None) -> None:
        stages = self.stages
        factor = f"{INSTABILITY_FACTOR:g}"
        if self.unstable.value:
            self.unstable.description, self.unstable.button_style = f"Instability on: F(x) × {factor}", "warning"
            self.unstable.icon = "exclamation-triangle"
        else:
            self.unstable.description, self.unstable.button_style = f"Inject instability: F(x) × {factor}", ""
            self.unstable.icon = ""
        on = self.residual.value
        self.residual.description = f"Residual connection: {'on' if on else 'off'}"
        self.residual.button_style = "info" if on else ""
        cosine = "undefined" if math.isnan(stages.identity_cosine) else f"{stages.identity_cosine:.3f}"
        self.readout.value = (
            f"μ = {stages.mu:.3f}, σ = {stages.sigma:.3f}, √(σ² + ε) = {stages.denominator:.3f};"
            f" cosine of x̂ with LayerNorm(x), the share of x's direction left: {cosine}"
        )
        changed = self.unstable.value or not self.residual.value
        reference = add_and_norm_stages(self.x, self.fx).x_hat if changed else None
        self.figure = draw_add_and_norm(stages, self.gamma.value, self.beta.value, self.unstable.value, reference)
        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png")
        self.image.value = buffer.getvalue()

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)


def draw_add_and_norm(stages: AddNormStages, gamma: float, beta: float, unstable: bool, reference=None):
    """Six bar charts of the Add & Norm stages, every bar labelled with its value.

    ``reference``, if given, is drawn as dashed outlines over the normalized vector: x_hat
    with F(x) x 1 and the residual on, for comparison.

    A bare Figure, not pyplot's: Jupyter's inline backend would show a pyplot figure a second time.
    """
    fig = Figure(figsize=(10.5, 5.6))
    axes = fig.subplots(2, 3)
    features = range(len(stages.summed))
    sum_colour, sum_hatch = (PALETTE["vermillion"], "xx") if unstable else (PALETTE["sky"], "..")
    factor = f"{INSTABILITY_FACTOR:g} " if unstable else ""
    panels = [  # (axes, title, values, colour, hatch)
        (axes[0, 0], "A1. identity path: x", stages.identity, PALETTE["blue"], ""),
        (axes[0, 1], f"A2. transformation path: {factor}F(x)", stages.transformed, PALETTE["orange"], "//"),
        (axes[0, 2], f"A3. Add: x + {factor}F(x)", stages.summed, sum_colour, sum_hatch),
        (axes[1, 0], "B1. statistics: μ (dashed), μ ± σ (band)", stages.summed, sum_colour, sum_hatch),
        (axes[1, 1], "B2. normalize: x̂ = (v − μ) / √(σ² + ε)", stages.x_hat, PALETTE["green"], ""),
        (axes[1, 2], f"B3. y = γ x̂ + β  (γ = {gamma:.1f}, β = {beta:.1f})", stages.y, PALETTE["purple"], "--"),
    ]
    add_range = max(1.0, max(v.abs().max().item() for v in (stages.identity, stages.transformed, stages.summed)))
    norm_range = max(2.5, stages.x_hat.abs().max().item(), stages.y.abs().max().item())
    for k, (ax, title, values, colour, hatch) in enumerate(panels):
        bars = ax.bar(features, values.tolist(), color=colour, hatch=hatch, edgecolor="black")
        ax.bar_label(bars, fmt="%.2f", padding=2, fontsize=8)
        limit = 1.25 * (add_range if k < 4 else norm_range)
        ax.set(title=title, ylim=(-limit, limit), xticks=features,
               xticklabels=[str(i + 1) for i in features])
        ax.title.set_fontsize(9)
        ax.axhline(0, color="black", linewidth=0.8)
    if reference is not None:
        axes[1, 1].bar(features, reference.tolist(), width=0.95, fill=False, linestyle="--", edgecolor="black",
                       label="x̂ with F(x) × 1, residual on")
        axes[1, 1].legend(loc="lower right", fontsize=7)
    axes[1, 0].axhspan(stages.mu - stages.sigma, stages.mu + stages.sigma, color="grey", alpha=0.2)
    axes[1, 0].axhline(stages.mu, color="black", linestyle="--")
    for ax in axes[1]:
        ax.set_xlabel("feature")
    fig.tight_layout()
    return fig
