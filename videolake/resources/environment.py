"""The VIDEOLAKE_* environment variables this package reads, in one list, so that a misspelled one is named.

Every setting comes from the environment (docs/environment.md), and ``os.environ.get`` with a default cannot tell
a setting left out from one spelled wrong: ``VIDEOLAKE_GATE_FILE=strict.yaml`` ran the default gates without a
word. ``unknown_variables`` compares the environment with ``KNOWN`` and suggests the closest known name
(difflib); the CLI and both profiles report each unknown name once per process (``warn_unknown_variables``).
tests/ops/test_env_names.py fails when a name used in the source or the docs is missing here.

``PROFILES`` is the list of VIDEOLAKE_PROFILE's values, so a command can refuse a wrong one in one line before it
builds any resource.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

PROFILE_ENV = "VIDEOLAKE_PROFILE"
PROFILES = ("local", "prod")

KNOWN: frozenset[str] = frozenset(
    {
        "VIDEOLAKE_ALERT_WEBHOOK_URL",
        "VIDEOLAKE_CAPTION_ACTORS",
        "VIDEOLAKE_CAPTION_BACKEND",
        "VIDEOLAKE_CAPTION_GPUS_PER_ACTOR",
        "VIDEOLAKE_CAPTION_MODEL",
        "VIDEOLAKE_CAPTION_MODEL_REVISION",
        "VIDEOLAKE_CAPTION_PROMPT_VERSION",
        "VIDEOLAKE_CAPTION_TRACKS",
        "VIDEOLAKE_DATA_DIR",
        "VIDEOLAKE_DAYS_PER_RUN",
        "VIDEOLAKE_DUE_HOUR",
        "VIDEOLAKE_EMBED_BACKEND",
        "VIDEOLAKE_EMBED_DEVICE",
        "VIDEOLAKE_EMBED_MODEL",
        "VIDEOLAKE_GATES_FILE",
        "VIDEOLAKE_GIT_BRANCH",
        "VIDEOLAKE_GIT_URL",
        "VIDEOLAKE_K8S_NAMESPACE",
        "VIDEOLAKE_MAX_RUN_SECONDS",
        "VIDEOLAKE_METRICS",
        "VIDEOLAKE_MODEL_CACHE",
        "VIDEOLAKE_OPENAI_API_KEY",
        "VIDEOLAKE_OPENAI_BASE_URL",
        "VIDEOLAKE_OPENAI_SERVED_MODEL",
        "VIDEOLAKE_PARTITIONS_START",
        "VIDEOLAKE_PROFILE",
        "VIDEOLAKE_RAY_CPUS",
        "VIDEOLAKE_RAY_CPU_GPUS_PER_WORKER",
        "VIDEOLAKE_RAY_CPU_GPU_MAX_WORKERS",
        "VIDEOLAKE_RAY_CPU_IMAGE",
        "VIDEOLAKE_RAY_CPU_MAX_WORKERS",
        "VIDEOLAKE_RAY_CPU_MIN_WORKERS",
        "VIDEOLAKE_RAY_CPU_WORKER_CPUS",
        "VIDEOLAKE_RAY_CPU_WORKER_MEMORY",
        "VIDEOLAKE_RAY_GPUS_PER_WORKER",
        "VIDEOLAKE_RAY_GPU_WORKERS",
        "VIDEOLAKE_RAY_IMAGE",
        "VIDEOLAKE_RAY_METRICS_PORT",
        "VIDEOLAKE_RAY_NODE_SELECTOR",
        "VIDEOLAKE_RAY_TOLERATIONS",
        "VIDEOLAKE_RUN_RAY_ADDRESS",  # set by a launched run's worker for its steps (assets/executor.py)
        "VIDEOLAKE_S3_BUCKET",
        "VIDEOLAKE_S3_ENDPOINT_URL",
        "VIDEOLAKE_S3_PREFIX",
        "VIDEOLAKE_S3_REGION",
        "VIDEOLAKE_SCENES_CORPUS",
        "VIDEOLAKE_SCENES_EVAL_CACHE",
        "VIDEOLAKE_STEP_START_METHOD",
    }
)
# Names the test suite sets for its own fixtures: never a setting of the package, never reported.
TEST_PREFIXES = ("VIDEOLAKE_TEST_", "VIDEOLAKE_FAKE_")


@dataclass(frozen=True)
class UnknownVariable:
    name: str
    suggestion: str | None  # the closest known name, if one is close

    def message(self) -> str:
        hint = f" (did you mean {self.suggestion}?)" if self.suggestion else ""
        return f"warning: unknown environment variable {self.name}{hint}: videolake does not read it"


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[UnknownVariable]:
    """The VIDEOLAKE_* names of ``environ`` (default: this process's) that no part of videolake reads, sorted."""
    env = os.environ if environ is None else environ
    names = sorted(n for n in env if n.startswith("VIDEOLAKE_") and n not in KNOWN and not n.startswith(TEST_PREFIXES))
    return [UnknownVariable(n, next(iter(difflib.get_close_matches(n, KNOWN, n=1, cutoff=0.8)), None)) for n in names]


_reported: set[str] = set()


def warn_unknown_variables(write: Callable[[str], None] | None = None) -> list[UnknownVariable]:
    """Report each unknown VIDEOLAKE_* variable once per process (default: a line on stderr); returns the new ones.
    Called by the CLI before any command and by both profiles' resource functions (the code location Dagster
    loads), so a misspelled setting is named wherever it would have been ignored."""
    import sys

    out = write or (lambda line: print(line, file=sys.stderr, flush=True))
    new = [u for u in unknown_variables() if u.name not in _reported]
    for u in new:
        _reported.add(u.name)
        out(u.message())
    return new


def profile_error(environ: Mapping[str, str] | None = None) -> str | None:
    """The one-line error for a VIDEOLAKE_PROFILE that names no profile; None when it is unset or valid."""
    env = os.environ if environ is None else environ
    value = env.get(PROFILE_ENV, "local")
    if value in PROFILES:
        return None
    close = difflib.get_close_matches(value, PROFILES, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown {PROFILE_ENV} {value!r}{hint}: use 'local' or 'prod'"
