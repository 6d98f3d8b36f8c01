"""The S3 connection resource: endpoint, region and credentials, shared by the object store and the lake."""

from __future__ import annotations

import dagster as dg
from pydantic import Field


class S3Resource(dg.ConfigurableResource):
    """How to reach S3 (or an S3-compatible server). Which bucket and prefix is the user's business (the object
    store, the lake); this holds only the connection settings, once, for both.

    In the prod profile every field is a ``dg.EnvVar``, resolved by Dagster at run time: the UI shows the variable's
    name, never its value, and the code location does not bake the values in.
    """

    endpoint_url: str | None = Field(
        default=None, description="Endpoint URL of an S3-compatible server (None or empty = AWS default)."
    )
    region: str = Field(default="us-east-1", description="S3 region.")
    access_key_id: str | None = Field(
        default=None, description="Access key id (use dg.EnvVar; None = the SDKs' own credential chain)."
    )
    secret_access_key: str | None = Field(
        default=None, description="Secret key (use dg.EnvVar; None = the SDKs' own credential chain)."
    )

    @property
    def endpoint(self) -> str | None:
        """The endpoint URL, None for AWS (an empty environment variable counts as unset)."""
        return self.endpoint_url or None

    def object_store(self, bucket: str, prefix: str = ""):
        """An S3ObjectStore for ``s3://<bucket>/<prefix>/`` on this connection."""
        from videolake.platform.objectstore.s3 import S3ObjectStore

        return S3ObjectStore(
            bucket=bucket,
            prefix=prefix,
            endpoint_url=self.endpoint,
            region=self.region,
            access_key_id=self.access_key_id,
            secret_access_key=self.secret_access_key,
        )

    def storage_options(self) -> dict[str, str]:
        """delta-rs storage options for tables under ``s3://`` on this connection."""
        from videolake.platform.lake.storage import storage_options_for_s3

        return storage_options_for_s3(
            endpoint_url=self.endpoint,
            region=self.region,
            access_key_id=self.access_key_id,
            secret_access_key=self.secret_access_key,
        )
