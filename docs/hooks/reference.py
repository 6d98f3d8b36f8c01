"""MkDocs hook: the reference pages, generated at build time from the code's own descriptions.

Why: a setting's description lives next to the setting (a pydantic ``Field(description=...)`` of a Dagster config
or resource, a ``params.param(help=...)`` of a plugin's ``Config``, the comments of a frozen engine dataclass, the
gate sentences of ``GATE_DOCS``, the commented ``gates.example.yaml``, a column's ``description`` metadata, the
figures of ``FIGURE_DOCS``). Written a second time in the docs, it would drift; so the pages ``configuration.md``
and ``tables.md`` are built from those sources by ``on_files`` and never exist as files.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import sys
import textwrap
import tokenize
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `mkdocs build` from a clean clone: the checkout's videolake, installed or not
    sys.path.insert(0, str(ROOT))


# ------------------------------------------------------------------------------------------------ formatting


def _cell(text: object) -> str:
    """One markdown table cell: no line breaks, no bare pipes."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(value: object) -> str:
    text = repr(value) if not isinstance(value, str) else f'"{value}"'
    return f"`{_cell(text)}`" if text else ""


def _type_name(annotation: object) -> str:
    name = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    return name.replace("typing.", "").replace("NoneType", "None")


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ sources


def _pydantic_rows(cls: type) -> list[tuple[str, ...]]:
    """name, type, default, description of every field of a Dagster Config or ConfigurableResource."""
    from pydantic_core import PydanticUndefined

    rows = []
    for name, info in cls.model_fields.items():
        if info.default_factory is not None:
            default = _code(info.default_factory())
        elif info.default is PydanticUndefined:
            default = "required"
        else:
            default = _code(info.default)
        if not info.description:
            raise ValueError(f"{cls.__qualname__}.{name} has no description: give it Field(description=...)")
        rows.append((f"`{name}`", f"`{_type_name(info.annotation)}`", default, info.description))
    return rows


def _param_rows(config_cls: type) -> list[tuple[str, ...]]:
    """A plugin Config's fields (``params.param``): name, type, default, accepted values, help."""
    from videolake.platform.params import describe

    rows = []
    for f in describe(config_cls):
        accepts = []
        if "choices" in f:
            accepts.append("one of " + ", ".join(_code(c) for c in f["choices"]))
        if "min" in f:
            accepts.append(f">= {f['min']}")
        if "max" in f:
            accepts.append(f"<= {f['max']}")
        rows.append((f"`{f['name']}`", f"`{f['type']}`", _code(f["default"]), "; ".join(accepts), f["help"]))
    return rows


def field_comments(cls: type) -> dict[str, str]:
    """The comments of a frozen dataclass's fields, read from its source: the comment lines right above a field and
    the comment at the end of its line. A field without one that follows another field directly shares that
    field's description (a comment above a group of fields)."""
    src = textwrap.dedent(inspect.getsource(cls))
    lines = src.splitlines()
    trailing: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT and lines[tok.start[0] - 1].strip() != tok.string.strip():
            trailing[tok.start[0]] = tok.string.lstrip("#").strip()
    (node,) = ast.parse(src).body
    out: dict[str, str] = {}
    previous: str | None = None
    for stmt in node.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            previous = None
            continue
        above = []
        i = stmt.lineno - 2
        while i >= 0 and lines[i].strip().startswith("#"):
            above.insert(0, lines[i].strip().lstrip("#").strip())
            i -= 1
        parts = [" ".join(above), trailing.get(stmt.lineno, "")]
        text = " ".join(p for p in parts if p)
        if not text and previous is not None:
            text = f"(as `{previous}`)"
        out[stmt.target.id] = text
        previous = stmt.target.id
    return out


def _dataclass_rows(cls: type, skip: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    comments = field_comments(cls)
    hints = typing.get_type_hints(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        rows.append((f"`{f.name}`", f"`{_type_name(hints[f.name])}`", _code(default), comments.get(f.name, "")))
    return rows


def _builtin(registry) -> list[tuple[str, type]]:
    """The registry's implementations that videolake ships (installed plugins are left out)."""
    return [(n, registry.get(n)) for n in registry.names() if registry.get(n).__module__.startswith("videolake.")]


# ------------------------------------------------------------------------------------------------ pages


FIELD_HEADER = ("field", "type", "default", "description")


def configuration_page() -> str:
    from videolake.assets.configs import FilteredClipsConfig, RawVideosConfig, SceneClipsConfig, TrainingShardsConfig
    from videolake.assets.releases import ReleaseConfig
    from videolake.platform.embedding.base import EMBEDDERS
    from videolake.platform.gates import GATE_DOCS, gate_names
    from videolake.platform.gates.config import LENIENT_CAPTION_CONTENT
    from videolake.platform.filters.quality import SCORERS, QualityConfig
    from videolake.platform.scenes.base import DETECTORS
    from videolake.resources.alerts import AlertWebhookResource
    from videolake.resources.captioner import CaptionerResource
    from videolake.resources.embedder import EmbedderResource
    from videolake.resources.lake import LakeResource
    from videolake.resources.object_store import ObjectStoreResource
    from videolake.resources.s3 import S3Resource

    out = [
        "# Configuration reference\n",
        "Generated when the site is built, from the descriptions in the code (`docs/hooks/reference.py`): a "
        "setting is described once, where it is defined. Environment variables that fill these settings are on "
        "[environment variables](environment.md).\n",
        "## Run configuration of the assets\n",
        "Set per run in the Dagster UI's launchpad (or a schedule's run config), under "
        "`ops: <asset>: config:`. A field that changes a table's rows is part of its stage version: a changed value "
        "computes the day again instead of reusing its checkpoints.\n",
    ]
    for asset, cls in (
        ("raw_videos", RawVideosConfig),
        ("scene_clips", SceneClipsConfig),
        ("filtered_clips", FilteredClipsConfig),
        ("training_shards", TrainingShardsConfig),
        ("dataset_release", ReleaseConfig),
    ):
        out += [f"### {asset}\n", f"`{cls.__module__}.{cls.__name__}`\n", _table(FIELD_HEADER, _pydantic_rows(cls))]

    out += [
        "### Quality thresholds\n",
        "The keys of filtered_clips' `thresholds` (`QualityConfig`, `videolake/platform/filters/quality.py`).\n",
        _table(FIELD_HEADER, _dataclass_rows(QualityConfig, skip=("scorers", "scorer_params"))),
    ]

    out += ["## Resources\n", "The Dagster resources of the code location, set by the profile (`VIDEOLAKE_PROFILE`).\n"]
    for title, cls in (
        ("Object store", ObjectStoreResource),
        ("Lake", LakeResource),
        ("S3 connection", S3Resource),
        ("Captioner", CaptionerResource),
        ("Embedder", EmbedderResource),
        ("Alert webhook", AlertWebhookResource),
    ):
        out += [f"### {title}\n", f"`{cls.__module__}.{cls.__name__}`\n", _table(FIELD_HEADER, _pydantic_rows(cls))]

    params_header = ("parameter", "type", "default", "accepts", "description")
    out += [
        "## Scene detector parameters\n",
        "scene_clips' `detector_params` and `videolake scenes FILE --detector D --param K=V` (the values are "
        "text, parsed to the parameter's type). Plugins add their own ([plugins](plugins.md)).\n",
    ]
    for name, cls in _builtin(DETECTORS):
        out += [
            f"### {name}\n",
            f"{inspect.getdoc(cls).splitlines()[0]}\n",
            _table(params_header, _param_rows(cls.Config)),
        ]

    out += ["## Embedding backend parameters\n", "The embedder resource's `backend_params`.\n"]
    for name, cls in _builtin(EMBEDDERS):
        out += [f"### {name}\n", _table(params_header, _param_rows(cls.Config))]

    out += [
        "## Quality scorers\n",
        "The built-in scorers read `QualityConfig` (above); their scores are filtered_clips columns and their rules "
        "reject reasons.\n",
        _table(
            ("scorer", "columns", "reject reasons"),
            [
                (f"`{n}`", ", ".join(f"`{c}`" for c in cls.columns), ", ".join(f"`{r}`" for r in cls.rules))
                for n, cls in _builtin(SCORERS)
            ],
        ),
    ]

    lenient = LENIENT_CAPTION_CONTENT["clip_captions"]["gates"]
    out += [
        "## Quality gates\n",
        "Blocking asset checks, evaluated on every partition of their table. Each gate is `enabled` with severity "
        "`error` (a failure blocks downstream assets) unless the gates file says otherwise. With the tiny "
        "random-weight test model, the caption content gates marked *warn (test model)* only warn.\n",
    ]
    for table, docs in GATE_DOCS.items():
        rows = []
        for gate in gate_names(table):
            note = "warn (test model)" if table == "clip_captions" and gate in lenient else "error"
            rows.append((f"`{table}.{gate}`", note, docs[gate]))
        out += [f"### {table}\n", _table(("gate", "severity", "passes when"), rows)]

    example = ROOT / "videolake" / "platform" / "gates" / "gates.example.yaml"
    out += [
        "### The gates file\n",
        "Thresholds and per-gate settings, overridable without code edits: point `VIDEOLAKE_GATES_FILE` at a YAML "
        "file with the keys to change (unknown keys are errors), then re-check stored partitions with "
        "`videolake check --partition YYYY-MM-DD`. Every key with its default "
        "(`videolake/platform/gates/gates.example.yaml`):\n",
        "```yaml\n" + example.read_text().rstrip() + "\n```\n",
    ]
    return "\n".join(out)


def tables_page() -> str:
    from videolake.assets.figure_docs import FIGURE_DOCS
    from videolake.platform.lake.schemas import TABLE_SPECS

    out = [
        "# Tables reference\n",
        "Every Delta table of the lake, in pipeline order, with its columns as the code declares them "
        "(`videolake/platform/lake/schemas.py`; the Dagster UI shows the same descriptions on each asset's page). "
        "Every table is partitioned by `partition_date`.\n",
    ]
    for spec in TABLE_SPECS:
        upstream = f"`{spec.upstream}`" if spec.upstream else "none (the landing folder)"
        optional = " Optional: it exists only when an embedding model is configured." if spec.optional else ""
        out.append(f"## {spec.name}\n")
        out.append(f"Key: `{spec.key}`. Upstream: {upstream}.{optional}\n")
        rows = []
        for f in spec.schema:
            desc = (f.metadata or {}).get(b"description", b"").decode()
            rows.append((f"`{f.name}`", f"`{f.type}`", "yes" if f.nullable else "no", desc))
        out.append(_table(("column", "type", "nullable", "description"), rows))
    out += [
        "## Figures\n",
        "What the assets report on each materialization (the `details` and `step` tables of the UI show them "
        "beside the value; `videolake/assets/figure_docs.py`).\n",
        _table(
            ("figure", "unit", "meaning"), [(f"`{k}`", unit, meaning) for k, (unit, meaning) in FIGURE_DOCS.items()]
        ),
    ]
    return "\n".join(out)


GENERATED = {"configuration.md": configuration_page, "tables.md": tables_page}


def on_files(files, config):
    from mkdocs.structure.files import File

    for uri, build in GENERATED.items():
        if files.get_file_from_path(uri) is not None:
            raise ValueError(f"docs/{uri} is generated by docs/hooks/reference.py: remove the file")
        files.append(File.generated(config, uri, content=build()))
    return files
