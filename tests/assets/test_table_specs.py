"""The table specs (videolake.platform.lake.schemas.TABLE_SPECS) are the one list of tables: every per-table mapping covers
exactly those tables, and the asset graph follows their upstreams. A fifth table that misses a mapping fails here."""

from __future__ import annotations

import dagster as dg

from videolake.assets.checks import GATED_TABLES, OPTIONAL_TABLES
from videolake.assets.metadata import PLOTTED
from videolake.assets.ui_metadata import COLUMN_SOURCES, PREVIEW_COLUMNS
from videolake.platform.gates import GATE_DOCS
from videolake.platform.gates.config import TABLE_CONFIGS
from videolake.platform.lake.schemas import PRIMARY_KEYS, TABLE_NAMES, TABLE_SPECS, TABLES


def test_every_per_table_mapping_covers_exactly_the_specs():
    assert TABLE_NAMES == (
        "raw_videos",
        "scene_clips",
        "clip_embeddings",
        "filtered_clips",
        "clip_captions",
        "training_shards",
    )
    assert list(TABLES) == list(PRIMARY_KEYS) == list(TABLE_NAMES)
    # an optional table (clip_embeddings: only with an embedding model) is gated when its asset exists
    assert GATED_TABLES + OPTIONAL_TABLES == tuple(t for t in TABLE_NAMES if t != "clip_embeddings") + (
        "clip_embeddings",
    )
    for mapping in (TABLE_CONFIGS, GATE_DOCS, PREVIEW_COLUMNS, PLOTTED):
        assert set(mapping) == set(TABLE_NAMES), mapping
    assert set(COLUMN_SOURCES) == {t.name for t in TABLE_SPECS if t.upstream is not None}


def test_each_spec_is_consistent():
    seen: set[str] = set()
    for spec in TABLE_SPECS:
        for column in spec.key_columns:
            assert not spec.schema.field(column).nullable, (spec.name, column)
        assert spec.upstream is None or spec.upstream in seen, f"{spec.name}'s upstream must come before it"
        for column, sources in COLUMN_SOURCES.get(spec.name, {}).items():
            assert column in spec.schema.names
            assert all(table in seen and col in TABLES[table].names for table, col in sources), (spec.name, column)
        seen.add(spec.name)


def test_each_specs_gates_are_built_from_its_module_against_its_upstream_and_gated_against_tables():
    import importlib

    from videolake.platform.gates import context_tables

    for spec in TABLE_SPECS:
        assert callable(importlib.import_module(spec.gate_module).build)
        assert context_tables(spec.name) == ((spec.upstream,) if spec.upstream else ()) + spec.gated_against


def test_the_asset_graph_follows_the_specs_upstreams(monkeypatch, tmp_path):
    """With and without the optional tables' assets: a table's parents are its upstream and the tables it reads
    whose assets exist."""
    from videolake.definitions import defs
    from videolake.platform.embedding.tiny_model import build_tiny_clip

    for model in ("", str(build_tiny_clip(tmp_path / "tiny-clip"))):
        monkeypatch.setenv("VIDEOLAKE_EMBED_MODEL", model)
        graph = defs().resolve_asset_graph()
        present = {k.to_user_string() for k in graph.get_all_asset_keys()}
        assert ("clip_embeddings" in present) == bool(model)
        for spec in TABLE_SPECS:
            if spec.name not in present:
                continue
            parents = {k.to_user_string() for k in graph.get(dg.AssetKey(spec.name)).parent_keys}
            expected = {spec.upstream} if spec.upstream else set()
            assert parents == expected | (set(spec.reads) & present), spec.name
