"""The prod profile's S3 wiring: one S3 connection resource (endpoint, region, credentials) nested in both the
object store and the lake; bucket, prefix, endpoint, region and credentials as dg.EnvVar, resolved at run time."""

from __future__ import annotations

import dagster as dg
import pytest

from videolake.resources import LakeResource, ObjectStoreResource, S3Resource

SECRET = "sk-very-secret-0123456789"
PROD_S3_ENV = {
    "VIDEOLAKE_S3_BUCKET": "videolake-data",
    "VIDEOLAKE_S3_PREFIX": "lake",
    "VIDEOLAKE_S3_ENDPOINT_URL": "http://seaweed.example:8333",
    "VIDEOLAKE_S3_REGION": "eu-west-3",
    "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": SECRET,
    "VIDEOLAKE_RAY_IMAGE": "registry.example.com/videolake/videolake:9.9.9",
    "VIDEOLAKE_K8S_NAMESPACE": "videolake",
}
OPTIONAL = ("VIDEOLAKE_S3_PREFIX", "VIDEOLAKE_S3_ENDPOINT_URL", "VIDEOLAKE_S3_REGION")


@pytest.fixture
def prod_env(monkeypatch):
    for k, v in PROD_S3_ENV.items():
        monkeypatch.setenv(k, v)
    return monkeypatch


@dg.asset
def s3_probe(lake: LakeResource, object_store: ObjectStoreResource) -> dict:
    """What the assets see at run time: the store and lake they build and the connections behind them."""
    store, lk = object_store.get_store(), lake.get_lake()
    return {
        "same_connection": object_store.s3 == lake.s3,
        "store": (store.bucket, store.prefix, repr(store)),
        "store_conn": (
            object_store.s3.endpoint,
            object_store.s3.region,
            object_store.s3.access_key_id,
            object_store.s3.secret_access_key,
        ),
        "lake_root": lk.root,
        "lake_options": dict(lk.storage_options),
    }


def _run(resources: dict):
    defs = dg.Definitions(assets=[s3_probe], resources={k: resources[k] for k in ("s3", "object_store", "lake")})
    result = defs.get_implicit_global_asset_job_def().execute_in_process()
    assert result.success
    return result, result.output_for_node("s3_probe")


def test_prod_store_and_lake_share_one_s3_resource_whose_fields_are_env_vars(prod_env):
    from videolake.resources.prod import prod_resources

    resources = prod_resources()
    s3, store, lake = resources["s3"], resources["object_store"], resources["lake"]
    assert isinstance(s3, S3Resource)
    assert store.s3 is s3 and lake.s3 is s3
    names = {f: getattr(s3, f).env_var_name for f in ("endpoint_url", "region", "access_key_id", "secret_access_key")}
    assert names == {
        "endpoint_url": "VIDEOLAKE_S3_ENDPOINT_URL",
        "region": "VIDEOLAKE_S3_REGION",
        "access_key_id": "AWS_ACCESS_KEY_ID",
        "secret_access_key": "AWS_SECRET_ACCESS_KEY",
    }
    for r in (store, lake):
        assert isinstance(r.bucket, dg.EnvVar) and r.bucket.env_var_name == "VIDEOLAKE_S3_BUCKET"
        assert isinstance(r.prefix, dg.EnvVar) and r.prefix.env_var_name == "VIDEOLAKE_S3_PREFIX"
    assert lake.root is None  # built from the resolved bucket and prefix at run time, never from a variable's name


def test_prod_s3_values_are_resolved_at_run_time_not_at_definition(prod_env):
    from videolake.resources.prod import prod_resources

    resources = prod_resources()
    # changed after the resources (and the Definitions below) are built: the run must see the new values
    for k, v in {
        "VIDEOLAKE_S3_BUCKET": "other-bucket",
        "VIDEOLAKE_S3_PREFIX": "/p/q/",
        "VIDEOLAKE_S3_ENDPOINT_URL": "http://minio.example:9000",
        "VIDEOLAKE_S3_REGION": "ap-south-2",
        "AWS_ACCESS_KEY_ID": "AKIDOTHER",
    }.items():
        prod_env.setenv(k, v)
    result, seen = _run(resources)
    assert seen["same_connection"] is True
    assert seen["store"] == (
        "other-bucket",
        "p/q",
        "S3ObjectStore(bucket='other-bucket', prefix='p/q', endpoint='http://minio.example:9000')",
    )
    assert seen["store_conn"] == ("http://minio.example:9000", "ap-south-2", "AKIDOTHER", SECRET)
    assert seen["lake_root"] == "s3://other-bucket/p/q/tables"
    options = seen["lake_options"]
    assert (
        options["AWS_ENDPOINT_URL"],
        options["AWS_REGION"],
        options["AWS_ACCESS_KEY_ID"],
        options["AWS_SECRET_ACCESS_KEY"],
    ) == ("http://minio.example:9000", "ap-south-2", "AKIDOTHER", SECRET)
    # the secret reaches the clients, never the run's events (logs, metadata)
    assert not [e for e in result.all_events if SECRET in repr(e)]


def test_prod_lake_root_is_bucket_prefix_tables_exactly(prod_env):
    from videolake.resources.prod import prod_resources

    _, seen = _run(prod_resources())
    assert seen["lake_root"] == "s3://videolake-data/lake/tables"
    assert seen["store"][:2] == ("videolake-data", "lake")
    for prefix in ("", "/"):  # set but empty: no prefix
        prod_env.setenv("VIDEOLAKE_S3_PREFIX", prefix)
        _, seen = _run(prod_resources())
        assert seen["lake_root"] == "s3://videolake-data/tables"
        assert seen["store"][:2] == ("videolake-data", "")
    prod_env.delenv("VIDEOLAKE_S3_PREFIX")  # unset: no prefix either
    _, seen = _run(prod_resources())
    assert seen["lake_root"] == "s3://videolake-data/tables"


def test_prod_optional_s3_settings_unset_take_the_defaults(prod_env):
    """An EnvVar whose variable is unset fails the run, also for an optional field: an unset optional setting is no
    EnvVar but the field's default (AWS endpoint, us-east-1, no prefix)."""
    from videolake.resources.prod import prod_resources

    for k in OPTIONAL:
        prod_env.delenv(k)
    resources = prod_resources()
    assert (resources["s3"].endpoint_url, resources["s3"].region) == (None, "us-east-1")
    assert resources["lake"].prefix == "" and resources["object_store"].prefix == ""
    _, seen = _run(resources)
    assert seen["store_conn"] == (None, "us-east-1", "AKIDEXAMPLE", SECRET)
    assert seen["lake_root"] == "s3://videolake-data/tables"
    assert "AWS_ENDPOINT_URL" not in seen["lake_options"] and seen["lake_options"]["AWS_REGION"] == "us-east-1"
    prod_env.setenv("VIDEOLAKE_S3_ENDPOINT_URL", "")  # set but empty: the AWS default too
    _, seen = _run(prod_resources())
    assert seen["store_conn"][0] is None and "AWS_ENDPOINT_URL" not in seen["lake_options"]


@pytest.mark.parametrize("bucket", [None, "", "  "])
def test_prod_without_a_bucket_fails_at_load(prod_env, bucket):
    from videolake.resources.prod import prod_resources

    if bucket is None:
        prod_env.delenv("VIDEOLAKE_S3_BUCKET")
    else:
        prod_env.setenv("VIDEOLAKE_S3_BUCKET", bucket)
    with pytest.raises(RuntimeError, match="VIDEOLAKE_S3_BUCKET"):
        prod_resources()


def test_lake_root_given_or_built(tmp_path):
    import os

    assert LakeResource().root == "data/lake"
    assert LakeResource(root=str(tmp_path / "lake")).get_lake().root == os.path.abspath(tmp_path / "lake")
    assert LakeResource(bucket="b", prefix="/x/y/").root == "s3://b/x/y/tables"
    assert LakeResource(bucket="b").root == "s3://b/tables"
    assert LakeResource(root="s3://given/t", bucket="b", prefix="p").root == "s3://given/t"
    assert ObjectStoreResource(root=str(tmp_path / "store")).get_store().__class__.__name__ == "LocalObjectStore"


def test_local_profile_resources_unchanged(monkeypatch, tmp_path):
    from videolake.resources.local import local_resources

    monkeypatch.setenv("VIDEOLAKE_DATA_DIR", str(tmp_path))
    resources = local_resources()
    assert resources["lake"].root == str(tmp_path / "lake")
    assert resources["lake"].get_lake().root == str(tmp_path / "lake")
    assert (resources["object_store"].kind, resources["object_store"].root) == ("local", str(tmp_path / "store"))
    assert "s3" not in resources
