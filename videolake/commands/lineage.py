"""`videolake lineage ID`: the chain of one id through every table, with the Delta version each was read at.

ID is a training sample's key or a clip_id, a video_id, or a source object's uri. Prints the source object, the
video's raw_videos row, and per clip its scene, embedding, quality verdict, caption and shard rows; writes the
clip's frames as a contact sheet (PNG) unless --no-sheet: to --out, by default under $VIDEOLAKE_DATA_DIR/lineage/
(printed), never into the current directory.
"""

from __future__ import annotations

import argparse
import json
import os


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", help="a sample key / clip_id, a video_id, or a source object's uri")
    p.add_argument("--json", action="store_true", help="print the chain as one JSON object")
    p.add_argument(
        "--out",
        "--sheet",
        dest="sheet",
        default=None,
        help="where to write the clip's contact sheet (PNG; default: $VIDEOLAKE_DATA_DIR/lineage/lineage-<clip>.png, "
        "never the current directory; the path is printed)",
    )
    p.add_argument("--no-sheet", action="store_true", help="do not decode the clip's frames")
    p.add_argument("--frames", type=int, default=8, help="frames on the contact sheet (default 8)")


def default_sheet_path(clip_id: str) -> str:
    """Where a contact sheet goes without --out: beside the local lake and store, under the data directory
    ($VIDEOLAKE_DATA_DIR/lineage/), so a lineage query never leaves a PNG in whatever directory it ran in."""
    data = os.path.abspath(os.environ.get("VIDEOLAKE_DATA_DIR", "data"))
    return os.path.join(data, "lineage", f"lineage-{clip_id[:16]}-{clip_id.rsplit('_', 2)[1]}.png")


def _line(row: dict) -> str:
    return "  ".join(f"{k}={row[k]}" for k in row if k not in ("clip_id", "video_id") and row[k] is not None)


def run(args: argparse.Namespace) -> int:
    from videolake.commands.release import lake_and_store
    from videolake.platform.lake.lineage import CLIP_TABLES, clip_frames, trace

    with lake_and_store() as (lake, store, _config):
        chain = trace(lake, args.id)
        sheet = None
        if chain.found and chain.rows.get("scene_clips") and not args.no_sheet:
            from PIL import Image

            from videolake.platform.releases.plots import contact_sheet_png

            frames = clip_frames(store, chain, args.frames)
            clip = chain.rows["scene_clips"][0]["clip_id"]
            sheet = args.sheet or default_sheet_path(clip)
            os.makedirs(os.path.dirname(os.path.abspath(sheet)), exist_ok=True)
            tiles = [(f"frame {i + 1} of {len(frames)}", Image.fromarray(f)) for i, f in enumerate(frames)]
            with open(sheet, "wb") as fh:
                fh.write(contact_sheet_png(tiles))
    if args.json:
        print(
            json.dumps(
                {
                    "query": chain.query,
                    "kind": chain.kind,
                    "video_id": chain.video_id,
                    "clip_ids": chain.clip_ids,
                    "versions": chain.versions,
                    "rows": chain.rows,
                    "contact_sheet": sheet,
                },
                default=str,
            )
        )
        return 0 if chain.found else 1
    if not chain.found:
        print(f"{args.id}: no video in raw_videos has this id or source object")
        return 1
    print(f"{chain.query} ({chain.kind})")
    for row in chain.rows["raw_videos"]:
        print(f"  source object  {row['source_uri']}")
        print(f"  raw_videos     v{chain.versions['raw_videos']}  {row['video_id']}  {_line(row)}")
    for cid in chain.clip_ids:
        print(f"  clip {cid}")
        for table in CLIP_TABLES:
            for row in (r for r in chain.rows.get(table, []) if r["clip_id"] == cid):
                print(f"    {table:<16} v{chain.versions[table]}  {_line(row)}")
    if sheet:
        print(f"  contact sheet  {sheet}")
    return 0
