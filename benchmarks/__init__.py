"""Benchmarks: each prints its figures beside the raw client's in the same run."""
