"""Hidden tests for ex4_prepost, in the order of the notebook's tasks."""

ORDER = ["PostNormBlock", "PreNormBlock", "make_stack", "ffn_grad_norms"]
