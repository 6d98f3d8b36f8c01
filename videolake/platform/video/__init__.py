"""Decoding and measuring a video: probe, frame statistics, orientation, frame ranges and sampled pixels."""
