"""The production Dagster instance config (k8s/dagster-postgres.yaml) on a real local PostgreSQL.

The instance is built from the very file that ships in k8s/, with its credentials in environment variables as the
pods get them, and a partitioned asset is materialized through it. The run, its ASSET_MATERIALIZATION event and the
gpu pool limit must then be in PostgreSQL, seen both through Dagster's API and with plain SQL.
"""

from pathlib import Path

import dagster as dg
import pytest
import yaml
from pg_server import start_postgres

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PROD_INSTANCE_YAML = REPO / "k8s" / "dagster-postgres.yaml"
DB = "dagster_prod_test"


@pytest.fixture(scope="module")
def postgres():
    server = start_postgres()
    try:
        server.create_database(DB)
        yield server
    finally:
        server.close()


FAKE_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: fake, user: {token: not-a-token}}]
contexts: [{name: fake, context: {cluster: fake, user: fake}}]
current-context: fake
"""


def outside_cluster(instance_yaml: str, tmp_path: Path) -> str:
    """The prod instance yaml with one change: the K8sRunLauncher loads a kubeconfig for a fake cluster (nothing
    listens at its address) instead of the in-cluster service account, which exists only inside a pod. Run monitoring
    with resume builds the launcher when the instance starts, so it must be constructible here."""
    kubeconfig = tmp_path / "kubeconfig-fake"
    kubeconfig.write_text(FAKE_KUBECONFIG)
    changed = instance_yaml.replace(
        "    load_incluster_config: true\n", f"    load_incluster_config: false\n    kubeconfig_file: {kubeconfig}\n"
    )
    assert changed != instance_yaml, "k8s/dagster-postgres.yaml no longer sets load_incluster_config: true"
    return changed


@pytest.fixture
def prod_instance(postgres, seaweed, tmp_path, monkeypatch):
    env = {
        "DAGSTER_PG_USERNAME": postgres.user,
        "DAGSTER_PG_PASSWORD": postgres.password,
        "DAGSTER_PG_HOST": postgres.host,
        "DAGSTER_PG_PORT": str(postgres.port),
        "DAGSTER_PG_DB": DB,
        "VIDEOLAKE_K8S_NAMESPACE": "videolake",
        "VIDEOLAKE_S3_BUCKET": seaweed.bucket,
        "VIDEOLAKE_S3_ENDPOINT_URL": seaweed.endpoint_url,
        "VIDEOLAKE_S3_REGION": seaweed.region,
        "AWS_ACCESS_KEY_ID": seaweed.access_key,  # from the videolake-s3 Secret in the cluster
        "AWS_SECRET_ACCESS_KEY": seaweed.secret_key,
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(outside_cluster(PROD_INSTANCE_YAML.read_text(), tmp_path))
    instance = dg.DagsterInstance.from_config(str(home))
    try:
        yield instance
    finally:
        instance.dispose()


daily = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-02-01")


@dg.asset(partitions_def=daily, pool="gpu")
def tiny_captions(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    """A stand-in for a real asset: a partitioned step in the gpu pool that reports row counts."""
    rows = int(context.partition_key[-2:])  # 2024-01-03 -> 3 rows: the metadata tells partitions apart
    print(f"captioned {rows} clips for {context.partition_key}")  # captured step log, shipped to S3
    return dg.MaterializeResult(metadata={"rows": rows, "partition": context.partition_key})


def test_instance_uses_postgres_and_prod_coordination(prod_instance):
    assert type(prod_instance.run_storage).__name__ == "PostgresRunStorage"
    assert type(prod_instance.event_log_storage).__name__ == "PostgresEventLogStorage"
    assert type(prod_instance.schedule_storage).__name__ == "PostgresScheduleStorage"
    coordinator = prod_instance.run_coordinator
    assert type(coordinator).__name__ == "QueuedRunCoordinator"
    queue = prod_instance.get_concurrency_config().run_queue_config
    assert queue.max_concurrent_runs == 8
    assert [(t["key"], t["value"], t["limit"]) for t in queue.tag_concurrency_limits] == [
        ("videolake/gpu", "true", 1),
        ("dagster/partition", {"applyLimitPerUniqueValue": True}, 1),
    ]
    pools = prod_instance.get_concurrency_config().pool_config
    assert pools.default_pool_limit == 4 and pools.pool_granularity.value == "op"
    assert prod_instance.run_retries_enabled and prod_instance.run_retries_max_retries == 2
    assert prod_instance.run_monitoring_enabled and prod_instance.run_monitoring_start_timeout_seconds == 1200
    launcher = prod_instance.run_launcher
    assert type(launcher).__name__ == "K8sRunLauncher" and launcher.supports_resume_run
    assert launcher.job_namespace == "videolake"
    assert launcher.service_account_name == "videolake-runs"
    assert launcher.env_config_maps == ["videolake-config"]
    assert launcher.env_secrets == ["videolake-s3", "dagster-postgresql-secret"]
    assert launcher.instance_config_map == "dagster-instance"
    assert type(prod_instance.compute_log_manager).__name__ == "S3ComputeLogManager"


def test_k8s_run_launcher_config_is_valid(monkeypatch):
    """The launcher needs a cluster to be built, but its config can be checked against dagster-k8s' schema."""
    from dagster._config import process_config
    from dagster_k8s import K8sRunLauncher

    monkeypatch.setenv("VIDEOLAKE_K8S_NAMESPACE", "videolake")
    config = yaml.safe_load(PROD_INSTANCE_YAML.read_text())["run_launcher"]
    assert (config["module"], config["class"]) == ("dagster_k8s", "K8sRunLauncher")
    result = process_config(K8sRunLauncher.config_type(), config["config"])
    assert result.success, result.errors
    assert result.value["service_account_name"] == "videolake-runs"
    assert result.value["job_namespace"] == "videolake"
    assert result.value["env_secrets"] == ["videolake-s3", "dagster-postgresql-secret"]


def test_partition_materialization_is_recorded_in_postgres(prod_instance, postgres, seaweed):
    prod_instance.event_log_storage.set_concurrency_slots("gpu", 1)
    result = dg.materialize(
        [tiny_captions], instance=prod_instance, partition_key="2024-01-03", tags={"videolake/gpu": "true"}
    )
    assert result.success
    run_id = result.run_id

    # through Dagster
    run = prod_instance.get_run_by_id(run_id)
    assert run.status == dg.DagsterRunStatus.SUCCESS
    assert run.tags["dagster/partition"] == "2024-01-03" and run.tags["videolake/gpu"] == "true"
    event = prod_instance.get_latest_materialization_event(dg.AssetKey("tiny_captions"))
    assert event.run_id == run_id
    assert event.asset_materialization.partition == "2024-01-03"
    assert event.asset_materialization.metadata["rows"].value == 3
    assert prod_instance.get_materialized_partitions(dg.AssetKey("tiny_captions")) == {"2024-01-03"}
    assert prod_instance.event_log_storage.get_concurrency_info("gpu").slot_count == 1

    # and in the database itself
    with postgres.connect(DB) as conn, conn.cursor() as cur:
        cur.execute("SELECT status FROM runs WHERE run_id = %s", (run_id,))
        assert cur.fetchall() == [("SUCCESS",)]
        cur.execute(
            "SELECT asset_key, partition FROM event_logs WHERE run_id = %s AND dagster_event_type = %s",
            (run_id, "ASSET_MATERIALIZATION"),
        )
        assert cur.fetchall() == [('["tiny_captions"]', "2024-01-03")]
        cur.execute(
            "SELECT dagster_event_type FROM event_logs WHERE run_id = %s AND dagster_event_type IS NOT NULL "
            "ORDER BY id",
            (run_id,),
        )
        types = [row[0] for row in cur.fetchall()]
        assert types.count("ASSET_MATERIALIZATION") == 1, types
        assert types[-1] == "PIPELINE_SUCCESS", types  # RUN_SUCCESS keeps its legacy name in storage
        cur.execute('SELECT "limit" FROM concurrency_limits WHERE concurrency_key = %s', ("gpu",))
        assert cur.fetchall() == [(1,)]

    # the step's stdout went to S3 through the S3ComputeLogManager
    keys = [
        o["Key"]
        for o in seaweed.client()
        .list_objects_v2(Bucket=seaweed.bucket, Prefix="dagster/compute-logs/")
        .get("Contents", [])
    ]
    out_keys = [k for k in keys if run_id in k and k.endswith(".out")]
    assert out_keys, keys
    body = seaweed.client().get_object(Bucket=seaweed.bucket, Key=out_keys[0])["Body"].read().decode()
    assert "captioned 3 clips for 2024-01-03" in body

    # a second partition adds to the same storage; the first stays recorded
    second = dg.materialize([tiny_captions], instance=prod_instance, partition_key="2024-01-17")
    assert second.success
    assert prod_instance.get_materialized_partitions(dg.AssetKey("tiny_captions")) == {"2024-01-03", "2024-01-17"}
    with postgres.connect(DB) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT partition FROM event_logs WHERE dagster_event_type = %s ORDER BY partition",
            ("ASSET_MATERIALIZATION",),
        )
        assert cur.fetchall() == [("2024-01-03",), ("2024-01-17",)]
