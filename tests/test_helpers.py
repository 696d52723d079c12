"""The chapters' shared helper module: seeding, glue without myst-nb, vector formatting."""

import sys

import pytest
import addnorm_helpers  # chapters/ is on pytest's pythonpath (pyproject.toml)
import torch


def test_seed_everything_makes_torch_draws_repeat_and_prints_nothing(capsys):
    addnorm_helpers.seed_everything(7)
    first = torch.randn(4)
    addnorm_helpers.seed_everything(7)
    assert torch.equal(first, torch.randn(4))
    assert capsys.readouterr().out == ""


def test_glue_is_a_silent_no_op_when_myst_nb_is_missing(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "myst_nb", None)  # makes `import myst_nb` raise ImportError
    assert addnorm_helpers.glue("anything", 3.5) is None
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    "values, digits, expected",
    [
        ([1.0, -0.5], 2, "[1.00, -0.50]"),
        (torch.tensor([[1.23456], [2.0]]), 3, "[1.235, 2.000]"),
    ],
)
def test_fmt_vector_formats_with_fixed_decimals(values, digits, expected):
    assert addnorm_helpers.fmt_vector(values, digits) == expected


def test_palette_has_distinct_colours():
    colours = list(addnorm_helpers.PALETTE.values())
    assert len(set(colours)) == len(colours) >= 6
