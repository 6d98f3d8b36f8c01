"""Dagster resources, one per external system: object store, lake (Delta tables), Ray cluster, captioner; the S3
connection both the object store and the lake use."""

from videolake.resources.lake import LakeResource
from videolake.resources.object_store import ObjectStoreResource
from videolake.resources.s3 import S3Resource

__all__ = ["LakeResource", "ObjectStoreResource", "S3Resource"]
