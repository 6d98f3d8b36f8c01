"""Object storage behind one interface: local filesystem (embedded default) and S3 (production)."""

from videolake.platform.objectstore.base import OBJECT_STORES, ObjectInfo, ObjectStore, ObjectStoreError, content_key
from videolake.platform.objectstore.local import LocalObjectStore

__all__ = ["OBJECT_STORES", "ObjectInfo", "ObjectStore", "ObjectStoreError", "LocalObjectStore", "content_key"]
