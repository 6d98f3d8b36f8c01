"""The lake resource: where the Delta tables live (a local directory or an s3:// URI)."""

from __future__ import annotations

from typing import Any

import dagster as dg
from pydantic import Field

from videolake.platform.lake.table import Lake
from videolake.resources.s3 import S3Resource


def s3_tables_root(bucket: str, prefix: str = "") -> str:
    """``s3://<bucket>/<prefix>/tables``, or ``s3://<bucket>/tables`` without a prefix."""
    prefix = prefix.strip("/")
    return f"s3://{bucket}/{prefix + '/' if prefix else ''}tables"


class LakeResource(dg.ConfigurableResource):
    """Delta tables at ``<root>/<table>``. For s3:// roots the nested ``s3`` resource (shared with the object store)
    feeds delta-rs storage options.

    ``root`` when given; else, with ``bucket`` set, ``s3://<bucket>/<prefix>/tables``, built from the values Dagster
    resolves at run time (the prod profile gives ``bucket`` and ``prefix`` as ``dg.EnvVar``); else ``data/lake``.
    """

    root: str | None = Field(
        default=None,
        description="Directory or s3://bucket/prefix holding the Delta tables. Unset: s3://<bucket>/<prefix>/tables "
        "when bucket is set, else data/lake.",
    )
    bucket: str = Field(default="", description="S3 bucket of the tables when root is unset.")
    prefix: str = Field(
        default="", description="Key prefix inside the bucket when root is unset (tables under <prefix>/tables)."
    )
    s3: S3Resource = Field(description="S3 connection (endpoint, region, credentials) for s3:// roots.")

    def __init__(self, **data: Any):
        # Dagster does not take a default for a nested resource: a local root gets an unused default one.
        data.setdefault("s3", S3Resource())
        super().__init__(**data)
        if self.root is None:
            bucket, prefix = self.__dict__["bucket"], self.__dict__["prefix"]
            # While bucket or prefix is still a dg.EnvVar (at definition time) root stays unset; the copy Dagster
            # makes at run time, with the resolved values, gets it. Never built from a variable's name.
            if not isinstance(bucket, dg.EnvVar) and not isinstance(prefix, dg.EnvVar):
                object.__setattr__(self, "root", s3_tables_root(bucket, prefix) if bucket else "data/lake")

    def get_lake(self) -> Lake:
        root = self.root
        if root is None:
            raise RuntimeError(
                "LakeResource: bucket/prefix are dg.EnvVar, resolved only when Dagster initializes "
                "the resource (in a run, or with dg.build_resources)"
            )
        if not root.startswith("s3://"):
            import os

            return Lake(os.path.abspath(root))
        return Lake(root, self.s3.storage_options())
