"""Builds container images from local files as docker-archive tarballs (no registry, no Docker engine).

An image here is one layer: a list of (path-in-image, source) entries, where source is a host file to copy,
a symlink target (``"->target"``) or None for a directory. The archive carries ``RepoTags`` so that
``ctr -n k8s.io images import`` names the image exactly as the manifests reference it.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

# Fixed mtime keeps archives byte-identical between builds, so re-imports are no-ops for containerd.
EPOCH = 946684800


@dataclass
class Image:
    name: str
    entrypoint: list[str]
    cmd: list[str] = field(default_factory=list)
    files: list[tuple[str, str | Path | None]] = field(default_factory=list)
    env: list[str] = field(default_factory=lambda: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"])
    labels: dict[str, str] = field(default_factory=dict)
    user: str = ""


def _layer(files: list[tuple[str, str | Path | None]]) -> bytes:
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
                data = Path(src).read_bytes()
                info.size, info.mode = len(data), 0o755
                tar.addfile(info, io.BytesIO(data))
            seen.add(dest)
    return buf.getvalue()


def write_archive(image: Image, out: Path) -> Path:
    """Writes a docker-archive tarball for `image` to `out` and returns it."""
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
            "WorkingDir": "/",
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": "2000-01-01T00:00:00Z", "created_by": "gpuconform localcluster/imagebuild.py"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    manifest = [{"Config": config_name, "RepoTags": [image.name], "Layers": ["layer.tar"]}]
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, "w") as tar:
        for name, data in (
            (config_name, config_bytes),
            ("layer.tar", layer),
            ("manifest.json", json.dumps(manifest).encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), EPOCH, 0o644
            tar.addfile(info, io.BytesIO(data))
    return out


def busybox_files(busybox: Path) -> list[tuple[str, str | Path | None]]:
    """/bin/busybox plus one symlink per applet, i.e. a minimal shell userland."""
    import subprocess

    applets = subprocess.run([str(busybox), "--list"], check=True, capture_output=True, text=True).stdout.split()
    files: list[tuple[str, str | Path | None]] = [("bin/busybox", busybox)]
    files += [(f"bin/{a}", "->busybox") for a in applets if a != "busybox"]
    return files
