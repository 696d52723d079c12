"""Helpers shared by every chapter of Add & Norm: seeding, plot style, glue.

Chapters import this module instead of repeating set-up code. It is small on
purpose: anything a learner should read belongs in the chapter itself.
"""

import random

import matplotlib as mpl
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
    """Seed Python, NumPy and PyTorch, print the seed, and return it."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    print(f"seed = {seed}")
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


def fmt_vector(values, digits: int = 3) -> str:
    """Format a 1-D tensor or sequence as ``[a, b, c]`` with fixed decimals."""
    if isinstance(values, torch.Tensor):
        values = values.detach().flatten().tolist()
    return "[" + ", ".join(f"{float(v):.{digits}f}" for v in values) + "]"
