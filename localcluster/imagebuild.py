"""Builds container images from local files as OCI image-layout tarballs (no registry, no Docker engine).

An image here is one layer: a list of (path-in-image, source) entries, where source is a host file to copy,
a symlink target (``"->target"``), literal file content (``bytes``) or None for a directory. The archive is an
OCI layout (``oci-layout``, ``index.json``, ``blobs/sha256/``) whose one manifest carries the annotation
``io.containerd.image.name``, so that ``ctr -n k8s.io images import`` names the image exactly as the manifests
reference it, and every containerd that imports it holds the same manifest digest: a pod may name the image by
digest on any bed node, as on a registry (a docker-archive import makes the manifest itself, and containerd 1.6
and 2.x make different ones).

The suite image (`suite_image`) is the local equivalent of manifests/Dockerfile: the host's Python 3.11 with
its stdlib and the shared libraries it needs (per ldd), the venv's third-party packages that gpuconform
depends on (its runtime dependency closure, never the editable-install hook), busybox (sh, tar, cat for
`kubectl cp`/`exec`) and the repo's suite files under /opt/gpuconform, run as a non-root user.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Union

Source = Union[str, Path, bytes, None]
Entry = tuple[str, Source]

# Fixed mtime keeps archives byte-identical between builds, so re-imports are no-ops for containerd.
EPOCH = 946684800


@dataclass
class Image:
    name: str
    entrypoint: list[str]
    cmd: list[str] = field(default_factory=list)
    files: list[Entry] = field(default_factory=list)
    env: list[str] = field(default_factory=lambda: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"])
    labels: dict[str, str] = field(default_factory=dict)
    user: str = ""
    workdir: str = "/"


def _layer(files: list[Entry]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        seen: set[str] = set()

        def add_dir(path: str) -> None:
            parts = path.strip("/").split("/")
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d and d not in seen:
                    seen.add(d)
                    info = tarfile.TarInfo(d)
                    info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, EPOCH
                    tar.addfile(info)

        add_dir("tmp")
        for dest, src in files:
            dest = dest.strip("/")
            parent = dest.rsplit("/", 1)[0] if "/" in dest else ""
            if parent:
                add_dir(parent)
            if src is None:
                add_dir(dest)
                continue
            info = tarfile.TarInfo(dest)
            info.mtime = EPOCH
            if isinstance(src, str) and src.startswith("->"):
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, src[2:], 0o777
                tar.addfile(info)
            else:
                data = src if isinstance(src, bytes) else Path(src).read_bytes()
                info.size, info.mode = len(data), 0o644 if isinstance(src, bytes) else 0o755
                tar.addfile(info, io.BytesIO(data))
            seen.add(dest)
    return buf.getvalue()


ARCHIVE_FORMAT = "oci-layout"  # in the fingerprint: an archive written in an earlier format is written again


def _fingerprint(image: Image) -> str:
    """What the archive is made of: the image config and each entry's source (path, size, mtime) or content."""
    h = hashlib.sha256(repr((ARCHIVE_FORMAT, image.name, image.entrypoint, image.cmd, image.env, image.labels, image.user,
                             image.workdir)).encode())
    for dest, src in image.files:
        if isinstance(src, bytes):
            h.update(f"{dest}\0bytes\0".encode() + hashlib.sha256(src).digest())
        elif src is None or (isinstance(src, str) and src.startswith("->")):
            h.update(f"{dest}\0{src}\0".encode())
        else:
            st = os.stat(src)
            h.update(f"{dest}\0{src}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return h.hexdigest()


def write_archive(image: Image, out: Path) -> Path:
    """Writes an OCI image-layout tarball for `image` to `out` and returns it; a no-op when none of its sources
    changed since the last write (the archive is byte-identical anyway; this only saves reading them)."""
    key = out.with_name(out.name + ".key")
    fingerprint = _fingerprint(image)
    if out.exists() and key.exists() and key.read_text() == fingerprint:
        return out
    layer = _layer(image.files)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "2000-01-01T00:00:00Z",
        "config": {
            "Entrypoint": image.entrypoint,
            "Cmd": image.cmd or None,
            "Env": image.env,
            "Labels": image.labels or None,
            "User": image.user,
            "WorkingDir": image.workdir,
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": "2000-01-01T00:00:00Z", "created_by": "gpuconform localcluster/imagebuild.py"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()

    def desc(media_type: str, data: bytes) -> dict:
        return {"mediaType": media_type, "digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data)}

    manifest_bytes = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": desc("application/vnd.oci.image.config.v1+json", config_bytes),
        "layers": [desc("application/vnd.oci.image.layer.v1.tar", layer)]}, sort_keys=True).encode()
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [{**desc("application/vnd.oci.image.manifest.v1+json", manifest_bytes),
                            "platform": {"architecture": "amd64", "os": "linux"},
                            "annotations": {"io.containerd.image.name": image.name}}]}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}")  # renamed into place: an importer never sees half an archive
    with tarfile.open(tmp, "w") as tar:
        for name, data in (
            ("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode()),
            *((f"blobs/sha256/{hashlib.sha256(b).hexdigest()}", b) for b in (config_bytes, layer, manifest_bytes)),
            ("index.json", json.dumps(index, sort_keys=True).encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), EPOCH, 0o644
            tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, out)
    key.write_text(fingerprint)
    return out


def busybox_files(busybox: Path) -> list[Entry]:
    """/bin/busybox plus one symlink per applet, i.e. a minimal shell userland."""
    applets = subprocess.run([str(busybox), "--list"], check=True, capture_output=True, text=True).stdout.split()
    files: list[Entry] = [("bin/busybox", busybox)]
    files += [(f"bin/{a}", "->busybox") for a in applets if a != "busybox"]
    return files


# ---------------------------------------------------------------- the suite image (local manifests/Dockerfile)

SUITE_DIR = "opt/gpuconform"
SUITE_USER = "65532:65532"
# What the suite needs at run time, as a checkout on PYTHONPATH (manifests/Dockerfile installs the same sources
# as a wheel instead: gpuconform/ with its fixtures, and tests/ as gpuconform.checks; conftest.py loads the entry
# module, pyproject.toml's testpaths name tests/); the job wrapper comes from manifests/.
SUITE_SOURCES = ("pyproject.toml", "conftest.py", "gpuconform", "tests")
STDLIB_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "site-packages", "dist-packages"}
PASSWD = b"root:x:0:0:root:/root:/sbin/nologin\ngpuconform:x:65532:65532:gpuconform:/tmp:/sbin/nologin\n"
GROUP = b"root:x:0:\ngpuconform:x:65532:\n"

# Runs in the venv's interpreter: the files (relative to site-packages) of every distribution in the runtime
# dependency closure of `project` (extras and environment markers evaluated), without `project` itself, so the
# editable-install hook and dev-only tools (ruff, pip, setuptools) stay out.
_CLOSURE = r"""
import json, os, sys
from importlib import metadata
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

root = canonicalize_name(sys.argv[1])
seen, todo, dists = set(), [(root, ())], {}
while todo:
    name, extras = todo.pop()
    d = metadata.distribution(name)
    key = canonicalize_name(d.metadata["Name"])
    if (key, extras) in seen:
        continue
    seen.add((key, extras))
    dists[key] = d
    for r in d.requires or []:
        req = Requirement(r)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in (*extras, "")):
            todo.append((req.name, tuple(sorted(req.extras))))
del dists[root]
site = os.path.normpath(str(dists[next(iter(dists))].locate_file(""))) if dists else ""
files, names = set(), []
for key, d in sorted(dists.items()):
    names.append(f"{d.metadata['Name']}=={d.version}")
    if d.files is None:
        sys.exit(f"{key}: no RECORD, cannot tell its files")
    for f in d.files:
        p = os.path.normpath(str(f.locate()))
        if p.startswith(site + os.sep) and "__pycache__" not in p and not p.endswith(".pyc") and os.path.isfile(p):
            files.add(os.path.relpath(p, site))
print(json.dumps({"site": site, "dists": names, "files": sorted(files)}))
"""


def tree(src: Path, dest: str, skip: Iterable[str] = ()) -> list[Entry]:
    """Every file under `src` as entries under `dest`: sorted, without __pycache__/*.pyc and the directories
    named in `skip`; file symlinks are followed (the image gets the content), dangling ones left out."""
    skip = set(skip) | {"__pycache__"}
    out: list[Entry] = []
    for root, dirs, names in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        rel = os.path.relpath(root, src)
        for n in sorted(names):
            p = Path(root) / n
            if n.endswith(".pyc") or not p.is_file():
                continue
            out.append((f"{dest}/{n}" if rel == "." else f"{dest}/{rel}/{n}", p))
    return out


def _add_path(path: Path, entries: dict[str, Source]) -> None:
    """`path` at its real location, plus every symlink on the way (/lib -> usr/lib, soname links)."""
    cur = Path("/")
    parts = path.parts[1:]
    for i, part in enumerate(parts):
        nxt = cur / part
        if nxt.is_symlink():
            target = os.readlink(nxt)
            entries[str(nxt)[1:]] = "->" + target
            resolved = Path(os.path.normpath(target if os.path.isabs(target) else cur / target))
            _add_path(resolved.joinpath(*parts[i + 1:]), entries)
            return
        cur = nxt
    entries[str(cur)[1:]] = cur


def shared_libs(objects: Iterable[Path]) -> list[Entry]:
    """The shared libraries (and the dynamic loader) that `objects` load, per ldd; libraries ldd cannot find
    are left out, as on the host (the Python module that needs one fails to import there too)."""
    found: set[str] = set()
    for obj in objects:
        out = subprocess.run(["ldd", str(obj)], capture_output=True, text=True)
        if out.returncode:  # not a dynamic object
            continue
        for line in out.stdout.splitlines():
            parts = line.split()
            path = parts[parts.index("=>") + 1] if "=>" in parts[:-1] else (parts[0] if parts else "")
            if path.startswith("/"):
                found.add(path)
    entries: dict[str, Source] = {}
    for path in sorted(found):
        _add_path(Path(path), entries)
    return sorted(entries.items())


def venv_packages(venv_python: Path, project: str, dest: str) -> list[Entry]:
    """The venv's installed files of `project`'s runtime dependency closure, as entries under `dest`."""
    out = subprocess.run([str(venv_python), "-c", _CLOSURE, project], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"listing {project}'s dependencies with {venv_python} failed: "
                           f"{(out.stderr or out.stdout).strip()[-400:]}")
    info = json.loads(out.stdout)
    return [(f"{dest}/{f}", Path(info["site"]) / f) for f in info["files"]]


def suite_image(name: str, repo: Path, busybox: Path, python: Path = Path("/usr/bin/python3.11"),
                venv: Path | None = None, labels: dict[str, str] | None = None) -> Image:
    """The conformance suite as an image, equivalent to manifests/Dockerfile, from local files only."""
    venv = venv or repo / ".venv"
    if not (venv / "bin" / "python").exists():
        raise RuntimeError(f"{venv} does not exist: run `make deps` (the suite image takes its packages from it)")
    if not python.exists():
        raise RuntimeError(f"{python} does not exist: the suite image is built from the host's Python 3.11")
    ver = python.name  # python3.11
    stdlib = python.resolve().parent.parent / "lib" / ver
    files: list[Entry] = busybox_files(busybox) + [("usr/bin/env", "->/bin/busybox")]
    files += [(f"usr/bin/{ver}", python.resolve()), ("usr/bin/python3", f"->{ver}"), ("usr/bin/python", f"->{ver}")]
    files += tree(stdlib, f"usr/lib/{ver}", STDLIB_SKIP | {p.name for p in stdlib.glob("config-*")})
    files += venv_packages(venv / "bin" / "python", "gpuconform", f"usr/local/lib/{ver}/dist-packages")
    for rel in SUITE_SOURCES:
        src = repo / rel
        files += tree(src, f"{SUITE_DIR}/{rel}") if src.is_dir() else [(f"{SUITE_DIR}/{rel}", src)]
    files.append(("usr/local/bin/gpuconform-job", repo / "manifests" / "gpuconform_job.py"))
    certs = Path("/etc/ssl/certs/ca-certificates.crt")
    if certs.exists():
        files.append(("etc/ssl/certs/ca-certificates.crt", certs))
    files += [("etc/passwd", PASSWD), ("etc/group", GROUP)]
    objects = [python.resolve()] + [Path(s) for _, s in files if isinstance(s, Path) and ".so" in s.name]
    files += shared_libs(objects)
    return Image(
        name, ["python3", "-m", "pytest", "-p", "no:cacheprovider"],
        cmd=["--html=/reports/report.html", "--self-contained-html", "--junitxml=/reports/junit.xml",
             "--gpuconform-summary=/reports/summary.json"],
        files=files, labels=labels or {}, user=SUITE_USER, workdir="/" + SUITE_DIR,
        env=["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
             f"PYTHONPATH=/{SUITE_DIR}", "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1", "HOME=/tmp"])
