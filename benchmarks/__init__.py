"""Benchmark scripts whose figures the README reports: run each from the top folder as `python -m benchmarks.NAME`."""
