"""The lake resource: where the Delta tables live (a local directory or an s3:// URI)."""

from __future__ import annotations

from typing import Optional

import dagster as dg
from pydantic import Field

from videolake.platform.lake import Lake


class LakeResource(dg.ConfigurableResource):
    """Delta tables at ``<root>/<table>``. For s3:// roots the S3 settings feed delta-rs storage options."""

    root: str = Field(default="data/lake", description="Directory or s3://bucket/prefix holding the Delta tables.")
    endpoint_url: Optional[str] = Field(default=None, description="S3 endpoint URL for s3:// roots.")
    region: str = Field(default="us-east-1", description="S3 region for s3:// roots.")
    access_key_id: Optional[str] = Field(default=None, description="S3 access key id (use dg.EnvVar).")
    secret_access_key: Optional[str] = Field(default=None, description="S3 secret key (use dg.EnvVar).")

    def get_lake(self) -> Lake:
        if not self.root.startswith("s3://"):
            import os

            return Lake(os.path.abspath(self.root))
        from videolake.platform.lake_storage import storage_options_for_s3

        return Lake(
            self.root,
            storage_options_for_s3(
                endpoint_url=self.endpoint_url,
                region=self.region,
                access_key_id=self.access_key_id,
                secret_access_key=self.secret_access_key,
            ),
        )
