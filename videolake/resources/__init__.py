"""Dagster resources, one per external system: object store, lake (Delta tables), Ray cluster, captioner."""

from videolake.resources.lake import LakeResource
from videolake.resources.object_store import ObjectStoreResource

__all__ = ["LakeResource", "ObjectStoreResource"]
