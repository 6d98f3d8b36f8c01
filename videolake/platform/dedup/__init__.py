"""Duplicates a training set must not keep. ``exact``: the same bytes landed on more than one day."""
