"""Hidden tests for ex3_batchnorm, in the order of the notebook's tasks.

Task 3 (the written answer) is graded by hand and has no hidden tests.
"""

ORDER = ["batch_norm", "BatchNorm1d"]
