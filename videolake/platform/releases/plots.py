"""The card's pictures as PNG bytes: histograms and bar charts (matplotlib, Agg) and a contact sheet (PIL).

Why ``matplotlib.figure.Figure`` with the Agg canvas and not pyplot: no global figure state and no GUI backend,
so a card can be drawn in a Dagster step, a thread or a headless CLI. matplotlib, PIL and PyAV are imported inside
the functions: the engine modules load without them. The PNGs carry no creation time ("Software" metadata off).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

FIG_SIZE = (6.0, 3.2)
DPI = 100


def _png(fig) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def histogram_png(values: Sequence[float], title: str, xlabel: str, bins: int = 30) -> bytes:
    """A histogram of ``values`` (an empty one says so)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=FIG_SIZE, layout="tight")
    ax = fig.add_subplot()
    vals = [float(v) for v in values if v is not None]
    if vals:
        lo, hi = min(vals), max(vals)
        ax.hist(
            vals,
            bins=bins if hi > lo else 1,
            range=(lo, hi) if hi > lo else (lo - 0.5, hi + 0.5),
            color="#3b6ea8",
            edgecolor="white",
        )
    else:
        ax.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("samples")
    return _png(fig)


def bar_png(labels: Sequence[str], counts: Sequence[int], title: str, xlabel: str) -> bytes:
    """Horizontal bars, one per label (the most frequent first as given)."""
    from matplotlib.figure import Figure

    height = max(FIG_SIZE[1], 0.9 + 0.28 * len(labels))
    fig = Figure(figsize=(FIG_SIZE[0], height), layout="tight")
    ax = fig.add_subplot()
    if labels:
        ys = list(range(len(labels)))
        ax.barh(ys, list(counts), color="#3b6ea8")
        ax.set_yticks(ys, list(labels))
        ax.invert_yaxis()
    else:
        ax.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    return _png(fig)


def middle_frame(mp4: bytes, num_frames: int | None = None) -> Any:
    """The middle frame of an MP4 as a PIL image (frame ``num_frames // 2``; the last decoded one if fewer)."""
    import av

    target = max(0, (num_frames or 0) // 2)
    last = None
    with av.open(io.BytesIO(mp4), mode="r") as container:
        for i, frame in enumerate(container.decode(container.streams.video[0])):
            last = frame
            if i >= target:
                break
    if last is None:
        raise ValueError("the mp4 has no video frame")
    return last.to_image()


def contact_sheet_png(tiles: Sequence[tuple[str, Any]], columns: int = 4, tile_width: int = 200) -> bytes:
    """A grid of (label, PIL image): each image scaled to ``tile_width`` wide, its label (the clip id) below."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default()
    char_w = max(1, int(font.getlength("0")))
    per_line = max(8, (tile_width - 8) // char_w)
    line_h = int(sum(font.getbbox("Ag")[1::2])) + 3
    thumb_h = max((round(img.height * tile_width / img.width) for _, img in tiles), default=tile_width * 3 // 4)
    lines = max((len(_wrap(label, per_line)) for label, _ in tiles), default=1)
    cell_h = thumb_h + 6 + lines * line_h + 6
    rows = max(1, -(-len(tiles) // columns))
    sheet = Image.new("RGB", (columns * tile_width + (columns + 1) * 4, rows * cell_h + 4), "white")
    draw = ImageDraw.Draw(sheet)
    for i, (label, img) in enumerate(tiles):
        x = 4 + (i % columns) * (tile_width + 4)
        y = 4 + (i // columns) * cell_h
        thumb = img.convert("RGB").resize((tile_width, round(img.height * tile_width / img.width)))
        sheet.paste(thumb, (x, y))
        for j, text in enumerate(_wrap(label, per_line)):
            draw.text((x + 2, y + thumb_h + 4 + j * line_h), text, fill="black", font=font)
    if not tiles:
        draw.text((8, 8), "no samples", fill="black", font=font)
    buf = io.BytesIO()
    sheet.save(buf, format="PNG")
    return buf.getvalue()


def _wrap(text: str, width: int) -> list[str]:
    return [text[i : i + width] for i in range(0, len(text), width)] or [""]
