"""Training shards: the clips of a day as WebDataset tar shards, bucketed by resolution, aspect ratio and length.

- ``config.ShardConfig``: the encoding and packing settings (part of the stage version);
- ``buckets``: the bucket a clip falls into and the bucket names;
- ``tarfile_det``: deterministic tar members (a sample is a byte fragment; a shard is fragments + the end blocks);
- ``encode``: one clip's frames [start, end) of its source as an upright H.264 MP4;
- ``verify``: a shard's members and samples read back, an mp4's frame count.

The stage that runs them is ``videolake.platform.stages.shard``.
"""
