"""Hidden tests for ex1_residual, in the order of the notebook's tasks."""

ORDER = ["ResidualBlock", "make_mlp", "input_grad_norm"]
