"""Benchmarks of `videolake bench`: each prints a ratio against a baseline measured in the same process."""
