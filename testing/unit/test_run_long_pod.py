"""The run-long pod (gpuconform/pods.py run_long_pod) lets its GPU go within minutes of its runner's death (issue
18): its manifest (the heartbeat annotation seen through a downwardAPI volume, no API access), its in-container
script run here with sh against a heartbeat file under tmp_path, and the run's beat on it
(gpuconform/pytest_plugin/namespaces.py)."""

from __future__ import annotations

import copy
import shutil
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from gpuconform.pytest_plugin import namespaces
from gpuconform.pytest_plugin.namespaces import Namespaces
from gpuconform import cleanup, config, kube, pods, probes, timing


def cfg() -> dict:
    return copy.deepcopy(config.DEFAULTS)


def manifest() -> dict:
    return pods.run_long_pod("access-gpu-a", "gpuconform-r1", "r1", "access", "gpu-a", cfg(), "nvidia.com/gpu")


def test_the_run_long_pod_reads_its_own_heartbeat_annotation_and_nothing_else():
    m = manifest()
    spec, ctr = m["spec"], m["spec"]["containers"][0]
    assert m["metadata"]["annotations"] == {pods.HEARTBEAT: ""}  # stamped by create_pod
    assert spec["volumes"] == [{"name": "heartbeat", "downwardAPI": {"items": [{
        "path": "heartbeat", "fieldRef": {"fieldPath": "metadata.annotations['gpuconform.dev/heartbeat']"}}]}}]
    assert ctr["volumeMounts"] == [{"name": "heartbeat", "mountPath": "/gpuconform", "readOnly": True}]
    assert spec["automountServiceAccountToken"] is False  # no API access: it sees its own metadata only
    assert spec["securityContext"] == pods.RESTRICTED_POD and ctr["securityContext"] == pods.RESTRICTED_CTR
    # the hard limit stays; the heartbeat ends it much earlier when the runner is gone
    assert spec["activeDeadlineSeconds"] == timing.RUN_HOLD_DEADLINE_S
    assert timing.RUN_HOLD_STALE_S <= 300 < timing.RUN_HOLD_DEADLINE_S
    # a live run's beats (every HEARTBEAT_EVERY_S) reach the file within the kubelet's sync period (<= 90 s)
    assert timing.RUN_HOLD_STALE_S >= 2 * (timing.HEARTBEAT_EVERY_S + 90)
    assert ctr["resources"] == {"limits": {"nvidia.com/gpu": "1"}}  # best effort: it holds no CPU
    script = ctr["command"][2]
    assert ctr["command"][:2] == ["sh", "-c"] and pods.HEARTBEAT_FILE in script
    assert f"-gt {timing.RUN_HOLD_STALE_S} ]" in script and f"sleep {timing.RUN_HOLD_EVERY_S:g} 2>/dev/null || sleep 1;" in script


SH = shutil.which("sh")
needs_sh = pytest.mark.skipif(SH is None, reason="no POSIX sh here")


def start(beat: Path, every_s: int = 1, stale_s: int = 1) -> subprocess.Popen:
    return subprocess.Popen([SH, "-c", pods.run_long_script(every_s, stale_s, str(beat))],  # type: ignore[list-item]
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@needs_sh
@pytest.mark.parametrize("first", ["2025-03-01T12:00:00Z", None], ids=["stamped", "no-file"])
def test_without_a_changing_heartbeat_the_pod_exits_after_the_limit_and_says_why(tmp_path, first):
    beat = tmp_path / "heartbeat"
    if first is not None:
        beat.write_text(first)
    t0 = time.monotonic()
    p = start(beat)
    out, _ = p.communicate(timeout=30)
    took = time.monotonic() - t0
    assert p.returncode == 0, out
    # `date +%s` counts whole seconds: "more than 1 s" by the container's clock is 2 ticks, which can come just over
    # 1 s of real time after the first read
    assert 1 <= took < 10, (took, out)
    assert "== orphaned ==" in out and "limit 1s): its runner is gone; exiting to free the device" in out
    assert len(probes.rounds(out)) >= 2  # it did its device check in rounds until then


@needs_sh
def test_a_heartbeat_that_keeps_changing_keeps_the_pod_holding_its_device_then_it_stops(tmp_path):
    """A live run: the kubelet rewrites the file as the runner patches the pod; the pod outlives the limit many
    times over. The runner dies (SIGKILL: the beats stop): the pod exits within the limit and a round."""
    beat = tmp_path / "heartbeat"
    beat.write_text("0")
    alive = threading.Event()
    alive.set()

    def runner() -> None:
        n = 0
        while alive.is_set():
            n += 1
            beat.write_text(str(n))
            time.sleep(0.5)

    t = threading.Thread(target=runner, daemon=True)
    t.start()
    p = start(beat, stale_s=2)
    try:
        time.sleep(5)  # longer than it would take without beats (limit 2 s, a round of 1 s)
        assert p.poll() is None, p.communicate()[0]
        alive.clear()
        killed = time.monotonic()
        out, _ = p.communicate(timeout=30)
    finally:
        alive.clear()
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0 and "== orphaned ==" in out, out
    assert time.monotonic() - killed < 8
    assert len(probes.rounds(out)) >= 4


# ------------------------------------------------------------------ the run's beat on it (gpuconform/pytest_plugin/namespaces.py)

class Core:
    """The CoreV1Api calls Namespaces makes for namespaces and pods, recorded."""

    def __init__(self, pod_patch_status: int | None = None):
        self.calls: list[tuple] = []
        self.pod_patch_status = pod_patch_status

    def create_namespace(self, body):
        self.calls.append(("create ns", body["metadata"]["name"]))

    def patch_namespace(self, name, body, **kw):
        self.calls.append(("patch ns", name))

    def delete_namespace(self, name, **kw):
        self.calls.append(("delete ns", name))

    def create_namespaced_pod(self, ns, body):
        self.calls.append(("create pod", body["metadata"]["name"], dict(body["metadata"].get("annotations") or {})))

    def patch_namespaced_pod(self, name, ns, body):
        if self.pod_patch_status:
            raise ApiException(status=self.pod_patch_status, reason="x")
        self.calls.append(("patch pod", name, dict(body["metadata"]["annotations"])))

    def delete_namespaced_pod(self, name, ns, **kw):
        self.calls.append(("delete pod", name))


def spaces(core: Core, monkeypatch) -> Namespaces:
    monkeypatch.setattr(timing, "HEARTBEAT_EVERY_S", 3600)  # beats come from beat_once here
    monkeypatch.setattr(kube, "pod_watch", lambda *a, **k: SimpleNamespace(stop=lambda: None))
    api = kube.CountingApiClient(k8s.Configuration(), kube.RateLimiter(1000, 1000), 1.0)
    return Namespaces(kube.Cluster(api, core, None, "test", 1.0), "r1")  # type: ignore[arg-type]


def test_the_run_stamps_its_run_long_pods_at_create_and_beats_them_until_they_are_deleted(monkeypatch):
    core = Core()
    s = spaces(core, monkeypatch)
    ns = s.ensure()
    m = manifest()
    s.create_pod(m)
    s.create_pod(pods.probe_pod("plain", ns, "r1", "count", "gpu-a", cfg(), 0))
    created = {c[1]: c[2] for c in core.calls if c[0] == "create pod"}
    assert cleanup.parse_time(created["access-gpu-a"][pods.HEARTBEAT]) is not None  # stamped now
    assert pods.HEARTBEAT not in created["plain"]
    assert m["metadata"]["annotations"] == {pods.HEARTBEAT: ""}, "the caller's manifest is not changed"
    s.beat_once()
    assert [c[:2] for c in core.calls if c[0].startswith("patch")] == [("patch ns", ns), ("patch pod", "access-gpu-a")]
    s.delete_pod(ns, "access-gpu-a")
    core.calls.clear()
    s.beat_once()
    assert core.calls == [("patch ns", ns)]
    s.end(keep=False, timeout_s=5)


def test_a_pod_gone_from_the_api_is_no_longer_beaten_and_a_refused_beat_is_logged_once(monkeypatch):
    lines: list[str] = []
    monkeypatch.setattr(namespaces, "log", lines.append)
    core = Core(pod_patch_status=404)
    s = spaces(core, monkeypatch)
    s.ensure()
    s.create_pod(manifest())
    s.beat_once()
    assert s._beating == set()
    core.pod_patch_status = 403
    s.create_pod(manifest())
    s.beat_once()
    s.beat_once()
    err = "\n".join(lines)
    assert err.count("could not refresh the heartbeat on pod gpuconform-r1/access-gpu-a") == 1, err
    assert f"the pod exits, freeing its GPU, after {timing.RUN_HOLD_STALE_S}s without one" in err
    s.end(keep=False, timeout_s=5)
