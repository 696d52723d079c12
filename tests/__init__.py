"""The test suite. A package, so that benchmarks and tools import its helpers as `tests.grading`, `tests.catalogue`, ..."""
