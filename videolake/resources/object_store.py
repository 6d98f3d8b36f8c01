"""The object store resource: local filesystem (embedded default) or S3, chosen by ``kind``."""

from __future__ import annotations

from typing import Any, Literal

import dagster as dg
from pydantic import Field

from videolake.platform.objectstore import ObjectStore
from videolake.resources.s3 import S3Resource


class ObjectStoreResource(dg.ConfigurableResource):
    """Where landing videos, clip files, frame-stat caches and model weights live.

    The S3 connection (endpoint, region, credentials) is the nested ``s3`` resource, shared with the lake; in the
    prod profile its fields and ``bucket`` / ``prefix`` are ``dg.EnvVar``, never values in code.
    """

    kind: Literal["local", "s3"] = Field(default="local", description="Backend: 'local' filesystem or 's3'.")
    root: str = Field(default="data/store", description="Local backend: root directory of the store.")
    bucket: str = Field(default="", description="S3 backend: bucket name.")
    prefix: str = Field(default="", description="S3 backend: key prefix inside the bucket.")
    s3: S3Resource = Field(description="S3 backend: the connection (endpoint, region, credentials).")
    landing: str = Field(default="landing", description="Prefix under which videos land in <landing>/<YYYY-MM-DD>/.")

    def __init__(self, **data: Any):
        # Dagster does not take a default for a nested resource: the local backend gets an unused default one.
        data.setdefault("s3", S3Resource())
        super().__init__(**data)

    def get_store(self) -> ObjectStore:
        if self.kind == "local":
            from videolake.platform.objectstore import LocalObjectStore

            return LocalObjectStore(self.root)
        return self.s3.object_store(self.bucket, self.prefix)
