"""localcluster/build.sh, run over a fake `go` that records its calls and writes the binaries it is asked for: one
`go build` for the Kubernetes binaries, etcd and the bed's own tools, then, in the same job and in the order
cluster.py up needs them, the images' binaries and the bed's other tools (tools/bed: NVIDIA's plugin and GFD with cgo,
NFD's master, containerd, kwok), while their modules download beside it under `nice`; each group is said on stdout as
soon as it is ready, and bed.Bins hands it out then; a failed step fails the build once the rest is done and cached; a
warm cache runs no go at all; NVIDIA's previous plugin release is built only when asked (`build.sh nvidia-prev`);
and the versions tools/bed pins are the ones the bed names."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LOCALCLUSTER = Path(__file__).resolve().parents[2] / "localcluster"
sys.path.insert(0, str(LOCALCLUSTER))
import bed  # noqa: E402


GROUPS = {"K8S_BIN", "K8S_TOOLS_BIN", "KWOK_BIN", "NFD_BIN", "IMAGES_BIN", "NVIDIA_BIN", "CONTAINERD2_BIN", "MOCKNVML_LIB"}

FAKE_GO = r'''#!/usr/bin/env python3
import json, os, re, sys
from pathlib import Path
args = sys.argv[1:]
log = Path(os.environ["FAKE_GO_LOG"])
with open(log, "a") as f:
    f.write(json.dumps({"cwd": os.getcwd(), "args": args, "nice": os.nice(0),
                        "cgo": os.environ.get("CGO_ENABLED")}) + "\n")
if os.environ.get("FAKE_GO_FAIL") and any(os.environ["FAKE_GO_FAIL"] in a for a in args):
    sys.exit("fake go: failing as asked")
if args[0] == "mod":  # go mod download
    sys.exit()
if args[0] == "list":  # go list -m -f {{.Dir}} MODULE: the module's directory
    d = log.parent / "nfd"
    (d / "deployment/base/nfd-crds").mkdir(parents=True, exist_ok=True)
    (d / "deployment/base/nfd-crds/nfd-api-crds.yaml").write_text("# crds\n")
    print(d)
    sys.exit()
def name(pkg):
    parts = pkg.split("@")[0].rstrip("/").split("/")
    return parts[-2] if re.fullmatch(r"v[0-9]+", parts[-1]) else parts[-1]
out, pkgs, it = None, [], iter(args[1:])
for a in it:
    if a in ("-o", "-tags", "-ldflags"):
        v = next(it)
        out = v if a == "-o" else out
    elif not a.startswith("-"):
        pkgs += sorted(str(p) for p in Path(a[:-4]).iterdir() if p.is_dir()) if a.endswith("/...") else [a]
if args[0] == "install":
    out = os.environ["GOBIN"] + "/"
if out.endswith("/"):
    for p in pkgs:
        Path(out, name(p)).write_text("binary\n")
else:
    Path(out).write_text("binary\n")
'''


@pytest.fixture
def bed_build(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "go").write_text(FAKE_GO)
    (fake / "go").chmod(0o755)
    cache = tmp_path / "cache"
    # The mock NVML is C, built by mocknvml/build.sh: found cached under its key, as build.sh computes it.
    key = hashlib.sha256(b"".join((LOCALCLUSTER / "mocknvml" / f).read_bytes()
                                  for f in ("mocknvml.c", "gen_stubs.py", "build.sh"))).hexdigest()[:12]
    (cache / "mocknvml" / key).mkdir(parents=True)
    (cache / "mocknvml" / key / ".complete").write_text("build_seconds=1\n")
    env = {k: v for k, v in os.environ.items() if k not in ("K8S_VERSION", "NVIDIA_PREV_TAG")}
    env.update(PATH=f"{fake}:{os.environ['PATH']}", GPUCONFORM_CACHE=str(cache), HOME=str(tmp_path),
               FAKE_GO_LOG=str(tmp_path / "go.log"))

    def run(*args: str, **extra: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
        (tmp_path / "go.log").unlink(missing_ok=True)
        r = subprocess.run(["bash", str(LOCALCLUSTER / "build.sh"), *args], capture_output=True, text=True,
                           env={**env, **extra}, timeout=60)
        calls = [json.loads(line) for line in (tmp_path / "go.log").read_text().splitlines()] \
            if (tmp_path / "go.log").exists() else []
        return r, calls

    return run


def _dirs(stdout: str) -> dict[str, Path]:
    return {k: Path(v) for k, v in (line.split("=", 1) for line in stdout.split())}


def test_a_cold_build_runs_the_go_builds_one_after_another_kubernetes_first_and_downloads_beside_them(bed_build):
    r, calls = bed_build()
    assert r.returncode == 0, r.stderr
    dirs = _dirs(r.stdout)
    assert set(dirs) == GROUPS
    builds = [c for c in calls if c["args"][0] == "build"]
    k8s = [c for c in builds if "k8s.io/kubernetes/cmd/kubelet" in c["args"]]
    assert len(k8s) == 1
    for pkg in ("kubectl", "kube-scheduler", "kube-controller-manager", "kube-apiserver"):
        assert f"k8s.io/kubernetes/cmd/{pkg}" in k8s[0]["args"]
    assert {"go.etcd.io/etcd/server/v3", "./cmd/..."} <= set(k8s[0]["args"])
    assert not [c for c in calls if c is not k8s[0] and any("k8s.io/kubernetes/cmd/" in a or "etcd" in a
                                                            for a in c["args"])]
    assert {p.name for p in dirs["K8S_BIN"].iterdir()} == {"kubectl", "kubelet", "kube-scheduler",
                                                           "kube-controller-manager", "kube-apiserver", "etcd",
                                                           ".complete"}
    assert (dirs["K8S_TOOLS_BIN"] / "checkpoint-share").exists() and (dirs["K8S_TOOLS_BIN"] / ".complete").exists()
    # tools/bed, one build each, in the order cluster.py up needs them: the plugin and GFD (cgo), NFD's master (the
    # device-plugin node's images), containerd (the DRA node), kwok (the kwok nodes, started last)
    tools = [c for c in builds if c["cwd"] == str(LOCALCLUSTER / "tools" / "bed")]
    assert [c["cgo"] for c in tools] == ["1", "0", "0", "0"]
    assert {"github.com/NVIDIA/k8s-device-plugin/cmd/nvidia-device-plugin",
            "github.com/NVIDIA/k8s-device-plugin/cmd/gpu-feature-discovery"} <= set(tools[0]["args"])
    assert "netgo,osusergo" in tools[0]["args"]  # so that net and what is above it compile as for the pure-Go builds
    assert "sigs.k8s.io/node-feature-discovery/cmd/nfd-master" in tools[1]["args"]
    assert {"github.com/containerd/containerd/v2/cmd/containerd",
            "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"} <= set(tools[2]["args"])
    assert "sigs.k8s.io/kwok/cmd/kwok" in tools[3]["args"]
    assert not any("@" in a for c in calls for a in c["args"] if not a.startswith("-"))  # nothing by go install @v
    images = [c for c in builds if c["cwd"] == str(LOCALCLUSTER / "images")]
    assert len(images) == 1
    # one after another, at normal priority, Kubernetes first: the later ones reuse its compiled libraries
    assert builds == k8s + images + tools and {c["nice"] for c in builds} == {k8s[0]["nice"]}
    # each group is said when it is ready: the cached mock NVML at once, the rest in build order
    said = [line.split("=", 1)[0] for line in r.stdout.split()]
    assert said == ["MOCKNVML_LIB", "K8S_BIN", "K8S_TOOLS_BIN", "IMAGES_BIN", "NVIDIA_BIN", "NFD_BIN",
                    "CONTAINERD2_BIN", "KWOK_BIN"]
    downloads = [c for c in calls if c["args"][:2] == ["mod", "download"]]
    assert {c["cwd"] for c in downloads} == {str(LOCALCLUSTER / "tools" / "bed"), str(LOCALCLUSTER / "images")}
    assert {c["nice"] for c in downloads} == {min(k8s[0]["nice"] + 10, 19)}
    assert (dirs["KWOK_BIN"] / "kwok").exists()
    assert {p.name for p in dirs["CONTAINERD2_BIN"].iterdir()} == {"containerd", "containerd-shim-runc-v2",
                                                                  ".complete"}
    assert {p.name for p in dirs["NVIDIA_BIN"].iterdir()} == {"nvidia-device-plugin", "gpu-feature-discovery",
                                                             ".complete"}
    assert {p.name for p in dirs["NFD_BIN"].iterdir()} == {"nfd-master", "nfd-api-crds.yaml", ".complete"}
    assert not any("v0.18.2" in a for c in calls for a in c["args"])  # the previous release: only when asked
    for job in ("go", "download"):
        assert f"] {job}: done in " in r.stderr
    assert "go: built kubectl kubelet" in r.stderr

    again, calls = bed_build()  # warm: no go at all, the same directories
    assert again.returncode == 0 and calls == [] and _dirs(again.stdout) == dirs

    shutil.rmtree(dirs["K8S_TOOLS_BIN"])  # the tools alone (as after editing one): never Kubernetes again
    again, calls = bed_build()
    assert again.returncode == 0 and _dirs(again.stdout) == dirs
    assert len(calls) == 1 and calls[0]["args"][-1] == "./cmd/..."
    assert not any("k8s.io/kubernetes/cmd/" in a or "etcd" in a for a in calls[0]["args"])
    assert (dirs["K8S_TOOLS_BIN"] / "checkpoint-share").exists()


def test_a_failed_step_fails_the_build_after_the_rest_is_built_and_cached(bed_build):
    r, _ = bed_build(FAKE_GO_FAIL="containerd/v2/cmd/containerd")
    assert r.returncode == 1
    assert "go: FAILED building containerd" in r.stderr and "fake go: failing as asked" in r.stderr
    assert "FAILED: go (exit 1)" in r.stderr
    dirs = _dirs(r.stdout)
    assert GROUPS - set(dirs) == {"CONTAINERD2_BIN"}  # kwok, built after it, still was
    assert all((d / ".complete").exists() for d in dirs.values())
    again, calls = bed_build()  # the rerun builds only what failed, with no download job (nothing else compiles)
    assert again.returncode == 0 and set(_dirs(again.stdout)) == GROUPS
    assert [c["args"][0] for c in calls] == ["build"]
    assert "github.com/containerd/containerd/v2/cmd/containerd" in calls[0]["args"]


def test_when_kubernetes_fails_the_rest_still_builds_and_the_build_fails(bed_build):
    r, calls = bed_build(FAKE_GO_FAIL="k8s.io/kubernetes/cmd/kubelet")
    assert r.returncode == 1 and "FAILED: go (exit 1)" in r.stderr
    assert GROUPS - set(_dirs(r.stdout)) == {"K8S_BIN", "K8S_TOOLS_BIN"}


def test_the_previous_plugin_release_is_built_only_when_asked_and_alone(bed_build):
    r, calls = bed_build("nvidia-prev")
    assert r.returncode == 0, r.stderr
    dirs = _dirs(r.stdout)
    assert set(dirs) == {"NVIDIA_PREV_BIN"}
    assert len(calls) == 1 and calls[0]["cgo"] == "1"
    assert [a for a in calls[0]["args"] if "@" in a] == ["github.com/NVIDIA/k8s-device-plugin/cmd/nvidia-device-plugin@v0.18.2"]
    assert (dirs["NVIDIA_PREV_BIN"] / "nvidia-device-plugin").exists()


def test_an_unknown_group_is_refused(bed_build):
    r, calls = bed_build("everything")
    assert r.returncode == 2 and "usage: build.sh" in r.stderr and calls == []


def test_the_versions_tools_bed_pins_are_the_ones_the_bed_deploys():
    """nvidia.py names its images and CRDs by TAG and NFD_TAG; tools/bed/go.mod (pin.sh) is what gets built."""
    import sys
    sys.path.insert(0, str(LOCALCLUSTER))
    import nvidia
    mod = (LOCALCLUSTER / "tools" / "bed" / "go.mod").read_text()
    assert f"\tgithub.com/NVIDIA/k8s-device-plugin {nvidia.TAG} " in mod  # (tidy marks it // indirect)
    assert f"sigs.k8s.io/node-feature-discovery => sigs.k8s.io/node-feature-discovery {nvidia.NFD_TAG}\n" in mod
    assert f"sigs.k8s.io/node-feature-discovery/api/nfd => sigs.k8s.io/node-feature-discovery/api/nfd " \
           f"{nvidia.NFD_TAG}\n" in mod
    pin = (LOCALCLUSTER / "tools" / "bed" / "pin.sh").read_text()
    assert f"NVIDIA={nvidia.TAG} NFD={nvidia.NFD_TAG}" in pin
    assert f"NVIDIA_PREV_TAG=${{NVIDIA_PREV_TAG:-{nvidia.PREV_TAG}}}" in (LOCALCLUSTER / "build.sh").read_text()


def _streaming(tmp_path: Path, script: str) -> subprocess.Popen:
    (tmp_path / "build").write_text(script)
    return subprocess.Popen(["bash", str(tmp_path / "build")], stdout=subprocess.PIPE, text=True)


def test_bins_hand_out_each_group_as_the_build_says_it_and_wait_for_one_still_building(tmp_path, capsys):
    gate = tmp_path / "gate"
    proc = _streaming(tmp_path, f"echo K8S_BIN=/k8s; while [ ! -e {gate} ]; do sleep 0.05; done; echo KWOK_BIN=/kwok\n")
    bins = bed.Bins(proc=proc)
    assert bins.k8s == Path("/k8s") and bins["kubelet"] == "/k8s/kubelet"  # while the build still runs
    assert proc.poll() is None
    gate.touch()
    assert bins["kwok"] == "/kwok/kwok"  # waited for it
    bins.finish()
    assert "waiting for build.sh's KWOK_BIN" in capsys.readouterr().out


def test_bins_raise_for_a_group_the_build_failed_to_make_and_finish_raises(tmp_path):
    seen = []
    bins = bed.Bins(proc=_streaming(tmp_path, "echo K8S_BIN=/k8s; exit 1\n"), on_ready=lambda g, d: seen.append(g))
    assert bins.k8s == Path("/k8s") and bins.k8s == Path("/k8s")
    with pytest.raises(bed.BedError, match="no CONTAINERD2_BIN"):
        bins.containerd2
    with pytest.raises(bed.BedError, match="building the test-bed binaries failed"):
        bins.finish()
    assert seen == ["K8S_BIN"]  # once per group
    with pytest.raises(AttributeError):
        bins.nonsense


@pytest.fixture
def fake_make(tmp_path, monkeypatch):
    """A `make` that says the virtualenv is stale (-q) and then installs it, or fails with FAKE_MAKE_RC."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    (tmp_path / "bin" / "make").write_text('#!/bin/sh\ncase " $* " in *" -q "*) exit 1;; esac\n'
                                           f'echo "$@" >> {tmp_path}/make.log; sleep 0.2; exit "${{FAKE_MAKE_RC:-0}}"\n')
    (tmp_path / "bin" / "make").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setattr(bed, "_VENV", [])
    return tmp_path / "make.log"


def test_the_virtualenv_installs_beside_the_build_and_the_suite_image_waits_for_it(fake_make, capsys):
    bed.start_venv()
    bed.start_venv()  # once per process
    bed.venv_ready()
    assert fake_make.read_text().split() == ["--no-print-directory", "-s", "-C", str(LOCALCLUSTER.parent),
                                             ".venv/.installed"]
    out = capsys.readouterr().out
    assert "installing the suite's virtualenv" in out and "waiting for the suite's virtualenv" in out


def test_a_failed_virtualenv_install_fails_the_suite_image(fake_make, monkeypatch):
    monkeypatch.setenv("FAKE_MAKE_RC", "2")
    bed.start_venv()
    with pytest.raises(bed.BedError, match="installing the suite's virtualenv failed"):
        bed.venv_ready()
