"""videolake: raw video in object storage -> captioned training clips in partitioned Delta Lake tables."""

__version__ = "0.1.0"
