"""Benchmarks (`make bench`): ratios against a baseline measured in the same run, not tests."""
