"""A STAND-IN captioner: returns one fixed caption per clip, instantly, without a model.

It exists to measure the platform, not a model: `videolake bench scale` pushes hundreds of thousands of clip rows
through the real caption stage (plan tasks, Ray Data, actor pool, checkpoint pieces, finalize, Delta commit) with
this backend in the actors, so the figure is the data path's own ceiling. Never use it for real captions: every
row it writes says it came from the stand-in (model name ``standin-fixed-caption``).
"""

from __future__ import annotations

from typing import Any

from videolake.platform.captioning.base import CAPTIONERS, CaptionerBackend, CaptionResult

STANDIN_CAPTION = "stand-in caption: no model was run"


@CAPTIONERS.register("standin")
class StandInCaptioner(CaptionerBackend):
    registered_name = "standin"
    needs_engine_env = False

    def load(self) -> None:
        pass

    def caption(self, items: list[dict[str, Any]]) -> list[CaptionResult]:
        return [CaptionResult(caption=STANDIN_CAPTION, prompt_tokens=0, output_tokens=0, latency_s=0.0) for _ in items]
