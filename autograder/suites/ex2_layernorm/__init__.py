"""Hidden tests for ex2_layernorm, in the order of the notebook's tasks."""

ORDER = ["layer_norm", "LayerNorm", "layer_norm_forward_backward"]
