"""Hidden tests for ex5_rmsnorm, in the order of the notebook's tasks."""

ORDER = ["rms_norm", "RMSNorm"]
