"""Evaluation sets built from real footage: measured, not asserted, behaviour of the platform's algorithms."""
