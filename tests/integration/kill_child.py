"""A Dagster run in its own process, for the kill tests (tests/integration/test_kill_resume.py).

``python kill_child.py '<json>'`` materializes the named assets of one partition with the real resources (local
object store, Delta lake, local Ray, the captioner on the tiny test model) and prints one JSON line per
materialization: ``{"asset": ..., "units_total": ..., "units_reused": ..., "units_computed": ...}``.

``delay_s`` slows every object read by that many seconds (a slow disk), so the parent can SIGKILL the run at
about half of the work. The slow store is defined in this script (``__main__``), so Ray pickles it by value and
its workers need not import this file.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time


def main(args: dict) -> None:
    import dagster as dg
    from dagster_ray import LocalRay

    from videolake.assets import cpu_assets
    from videolake.assets.captions import build_clip_captions
    from videolake.platform.objectstore import LocalObjectStore
    from videolake.resources import LakeResource, ObjectStoreResource
    from videolake.resources.captioner import CaptionerResource

    class SlowLocalObjectStore(LocalObjectStore):
        def __init__(self, root: str, delay_s: float) -> None:
            super().__init__(root)
            self.delay_s = delay_s

        @contextlib.contextmanager
        def open_local(self, key, suffix=""):
            time.sleep(self.delay_s)
            with super().open_local(key, suffix) as path:
                yield path

    class SlowStoreResource(ObjectStoreResource):
        delay_s: float = 0.0

        def get_store(self):
            return SlowLocalObjectStore(self.root, self.delay_s)

    ray_init = {"num_cpus": 2, "include_dashboard": False, "log_to_driver": False, "ignore_reinit_error": True}
    captioner = CaptionerResource(
        model=args.get("model", ""),
        model_name="tiny-test-model",
        batch_size=1,
        max_tokens=8,
        max_frames=2,
        num_actors=1,
        engine_threads=1,  # as the tiny model's policy (TINY_MODEL_ENGINE_THREADS)
    )
    assets = {
        "raw_videos": cpu_assets.raw_videos,
        "scene_clips": cpu_assets.scene_clips,
        "filtered_clips": cpu_assets.filtered_clips,
        "clip_captions": build_clip_captions(captioner),
    }
    resources = {
        "object_store": SlowStoreResource(kind="local", root=args["store"], delay_s=args.get("delay_s", 0.0)),
        "lake": LakeResource(root=args["lake"]),
        "ray_cluster": LocalRay(ray_init_options=ray_init),
        "caption_ray": LocalRay(ray_init_options=ray_init),
        "captioner": captioner,
    }
    selected = [assets[a] for a in args["assets"]]
    upstream = [a for name, a in assets.items() if name not in args["assets"] and name != "clip_captions"]
    run_config = {"ops": {"filtered_clips": {"config": {"thresholds": args.get("thresholds", {})}}}}
    if "filtered_clips" not in args["assets"]:
        run_config = {}
    result = dg.materialize(
        selected + [a.to_source_asset() for a in upstream],
        partition_key=args["day"],
        resources=resources,
        instance=dg.DagsterInstance.ephemeral(),
        run_config=run_config,
    )
    for e in result.get_asset_materialization_events():
        md = e.materialization.metadata
        print(
            json.dumps(
                {
                    "asset": e.asset_key.path[-1],
                    **{
                        k: md[k].value
                        for k in (
                            "units_total",
                            "units_reused",
                            "units_computed",
                            "goodput",
                            "accelerator_s_all_attempts",
                        )
                        if k in md
                    },
                }
            ),
            flush=True,
        )
    sys.exit(0 if result.success else 1)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
