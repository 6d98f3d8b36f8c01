"""The quality filters of filtered_clips: the scorer contract, the built-in scorers, reject rules, model scorers."""
