"""Hidden tests for ex6_beyond_norm, in the order of the notebook's tasks."""

ORDER = ["batch_norm_forward_backward", "ReZeroBlock", "DyT"]
