"""A directory built on first use is built once, however many processes ask at the same time
(videolake/platform/runtime/built_once.py: the tiny test models)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from videolake.platform.runtime.built_once import build_once, lock_path, locked


def _complete(d: Path) -> bool:
    return (d / "done").is_file()


def _fill(tmp: Path, text: str) -> None:
    (tmp / "weights").write_text(text)
    (tmp / "done").write_text("")


def test_a_caller_that_waited_for_the_lock_uses_what_the_builder_completed_and_builds_nothing(tmp_path):
    """The waiter found the directory incomplete before the lock, and complete once it held it: it must not build
    (before the lock, a second builder replaced the first one's complete directory while it was being read)."""
    out = tmp_path / "model"
    checked = threading.Event()
    built: list[str] = []
    result: list[bool] = []

    def complete(d: Path) -> bool:
        done = _complete(d)
        checked.set()
        return done

    def waiter() -> None:
        result.append(build_once(out, complete, lambda tmp: (built.append("waiter"), _fill(tmp, "waiter"))))

    with locked(lock_path(out)):  # another process is building
        thread = threading.Thread(target=waiter)
        thread.start()
        assert checked.wait(30)  # the waiter saw no complete directory; now it waits for the lock
        out.mkdir()
        _fill(out, "builder")  # the other process completes the directory, then releases the lock
    thread.join(30)
    assert not thread.is_alive()
    assert (result, built, (out / "weights").read_text()) == ([False], [], "builder")


def test_an_interrupted_build_is_replaced_and_a_failed_one_leaves_nothing_behind(tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    (out / "weights").write_text("half")  # no completion marker: an interrupted build
    assert build_once(out, _complete, lambda tmp: _fill(tmp, "new")) is True
    assert (out / "weights").read_text() == "new"
    assert build_once(out, _complete, lambda tmp: pytest.fail("a complete directory is built again")) is False

    other = tmp_path / "other"

    def broken(tmp: Path) -> None:
        (tmp / "weights").write_text("partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        build_once(other, _complete, broken)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".model.lock", ".other.lock", "model"]
