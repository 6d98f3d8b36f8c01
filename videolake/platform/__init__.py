"""The engine: pure functions and small classes over pyarrow tables. Never imports dagster.

Heavy modules (ray, vllm, torch, great_expectations, kubernetes) are imported inside the functions that use them.
"""
