"""The object store resource: local filesystem (embedded default) or S3, chosen by ``kind``."""

from __future__ import annotations

from typing import Literal, Optional

import dagster as dg
from pydantic import Field

from videolake.platform.objectstore import ObjectStore


class ObjectStoreResource(dg.ConfigurableResource):
    """Where landing videos, clip files, frame-stat caches and model weights live.

    Credentials come from the environment (``dg.EnvVar``) in the prod profile, never from code.
    """

    kind: Literal["local", "s3"] = Field(default="local", description="Backend: 'local' filesystem or 's3'.")
    root: str = Field(default="data/store", description="Local backend: root directory of the store.")
    bucket: str = Field(default="", description="S3 backend: bucket name.")
    prefix: str = Field(default="", description="S3 backend: key prefix inside the bucket.")
    endpoint_url: Optional[str] = Field(default=None, description="S3 backend: endpoint URL (None = AWS default).")
    region: str = Field(default="us-east-1", description="S3 backend: region.")
    access_key_id: Optional[str] = Field(default=None, description="S3 backend: access key id (use dg.EnvVar).")
    secret_access_key: Optional[str] = Field(default=None, description="S3 backend: secret key (use dg.EnvVar).")
    landing: str = Field(default="landing", description="Prefix under which videos land in <landing>/<YYYY-MM-DD>/.")

    def get_store(self) -> ObjectStore:
        if self.kind == "local":
            from videolake.platform.objectstore import LocalObjectStore

            return LocalObjectStore(self.root)
        from videolake.platform.objectstore.s3 import S3ObjectStore

        return S3ObjectStore(
            bucket=self.bucket,
            prefix=self.prefix,
            endpoint_url=self.endpoint_url,
            region=self.region,
            access_key_id=self.access_key_id,
            secret_access_key=self.secret_access_key,
        )
