"""Object storage behind one interface: local filesystem (embedded default) and S3 (production)."""

from videolake.platform.objectstore.base import (
    LISTING_PROBLEMS,
    OBJECT_STORES,
    ObjectArchivedError,
    ObjectInfo,
    ObjectStore,
    ObjectStoreError,
    content_key,
)
from videolake.platform.objectstore.local import LocalObjectStore
from videolake.platform.objectstore.s3 import S3ObjectStore  # registers "s3"; boto3 itself loads lazily

__all__ = [
    "LISTING_PROBLEMS",
    "OBJECT_STORES",
    "ObjectArchivedError",
    "ObjectInfo",
    "ObjectStore",
    "ObjectStoreError",
    "LocalObjectStore",
    "S3ObjectStore",
    "content_key",
]
