"""End-to-end: the local test bed itself meets its acceptance criteria (issue 2), checked with plain kubectl and
independent of the suite's code, so a bug in the suite cannot hide a broken bed (or the reverse).

Healthy bed only; the fault matrix (test_fault_matrix.py) covers the broken states. Needs `make cluster-up`.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time

import pytest
from bedtools import KUBECONFIG, ROOT, STATE, bed_shape, get, kubectl, shapes

NODE = "gpu-node-0"
RES = "nvidia.com/gpu"
IMAGES = {"probe": "localhost/gpuconform/probe-tools:sim", "vectoradd": "localhost/gpuconform/cuda-sample:vectoradd-sim"}

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not KUBECONFIG.exists(),
                                                  reason="local cluster not running (make cluster-up)")]


def wait(what: str, fn, timeout: float = 90):
    """Polls fn until it returns something truthy; the failure says what was awaited and the last value."""
    end, last = time.monotonic() + timeout, None
    while time.monotonic() < end:
        last = fn()
        if last:
            return last
        time.sleep(1)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


@pytest.fixture(scope="module")
def ns():
    name = f"gc-testbed-{secrets.token_hex(3)}"
    kubectl("create", "namespace", name)
    kubectl("label", "namespace", name, "pod-security.kubernetes.io/enforce=restricted",
            "app.kubernetes.io/part-of=gpuconform-testbed")
    yield name
    kubectl("delete", "namespace", name, "--wait=false", check=False)


def pod(ns: str, name: str, *, gpus: int, image: str = IMAGES["probe"], command: list[str] | None = None,
        node: str = NODE, tolerate: bool = True) -> dict:
    c: dict = {"name": "c", "image": image, "imagePullPolicy": "IfNotPresent",
               "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                   "runAsNonRoot": True, "runAsUser": 65534,
                                   "seccompProfile": {"type": "RuntimeDefault"}}}
    if command:
        c["command"] = command
    if gpus:
        c["resources"] = {"limits": {RES: str(gpus)}}
    # the NVIDIA runtime class, as localcluster/gpuconform.yaml names it: NVIDIA's plugin (the bed's default stack)
    # passes the device list for the runtime to inject, and this node's default runtime is runc
    spec: dict = {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": node}, "containers": [c],
                  "activeDeadlineSeconds": 120, "runtimeClassName": "nvidia"}
    if tolerate:
        spec["tolerations"] = [{"key": RES, "operator": "Exists", "effect": "NoSchedule"}]
    m = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec}
    kubectl("apply", "-f", "-", input=json.dumps(m))
    return m


def phase(ns: str, name: str) -> str:
    return get("pod", "-n", ns, name).get("status", {}).get("phase", "")


def finished(ns: str, name: str) -> str:
    p = phase(ns, name)
    return p if p in ("Succeeded", "Failed") else ""


# ------------------------------------------------------------------ the node, the plugin, the kubelet


def test_gpu_node_is_ready_and_advertises_four_gpus():
    node = get("node", NODE)
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}.get("Ready")
    assert ready == "True", f"{NODE} Ready={ready}"
    assert node["status"]["allocatable"].get(RES) == "4", node["status"]["allocatable"]


def test_plugin_pod_runs_and_kubelet_metric_and_configz_are_reachable_through_the_node_proxy():
    lay = shapes.LAYOUT_OBJECTS[bed_shape()[1]]
    pods = get("pods", "-n", lay.namespace, "-l", ",".join(f"{k}={v}" for k, v in lay.labels.items()),
               "--field-selector", f"spec.nodeName={NODE}")["items"]
    pods = [p for p in pods if (p["metadata"].get("ownerReferences") or [{}])[0].get("name") == lay.daemonset]
    assert [p["status"]["phase"] for p in pods] == ["Running"], "expected one Running plugin pod on the GPU node"
    metrics = kubectl("get", "--raw", f"/api/v1/nodes/{NODE}/proxy/metrics")
    line = [ln for ln in metrics.splitlines()
            if ln.startswith("kubelet_device_plugin_registration_total") and f'resource_name="{RES}"' in ln]
    assert line and float(line[0].split()[-1]) >= 1, "registration counter for nvidia.com/gpu missing or zero"
    cfgz = json.loads(kubectl("get", "--raw", f"/api/v1/nodes/{NODE}/proxy/configz"))["kubeletconfig"]
    assert cfgz["topologyManagerPolicy"] == "single-numa-node"
    assert cfgz["cpuManagerPolicy"] == "static"


# ------------------------------------------------------------------ pods through the plugin


def test_one_gpu_pod_runs_vector_add_to_test_passed(ns):
    pod(ns, "vectoradd", gpus=1, image=IMAGES["vectoradd"])
    assert wait("vectoradd to finish", lambda: finished(ns, "vectoradd")) == "Succeeded"
    assert "Test PASSED" in kubectl("logs", "-n", ns, "vectoradd")


@pytest.mark.parametrize("gpus", [0, 1, 2])
def test_pod_sees_exactly_the_gpus_it_requested(ns, gpus):
    name = f"sees-{gpus}"
    pod(ns, name, gpus=gpus, command=["sh", "-c", "nvidia-smi -L 2>&1; ls /dev | grep -c '^nvidia[0-9]' || true"])
    assert wait(f"{name} to finish", lambda: finished(ns, name)) == "Succeeded"
    out = kubectl("logs", "-n", ns, name)
    listed = [ln for ln in out.splitlines() if ln.startswith("GPU ")]
    assert len(listed) == gpus, f"requested {gpus}, nvidia-smi -L listed {len(listed)}:\n{out}"
    assert out.strip().splitlines()[-1] == str(gpus), f"requested {gpus}, /dev/nvidiaN count differs:\n{out}"


def test_five_gpu_pod_stays_pending_with_insufficient_gpus(ns):
    pod(ns, "five", gpus=5, command=["true"])

    def insufficient() -> str:
        evs = get("events", "-n", ns, "--field-selector", "involvedObject.name=five")["items"]
        return next((e["message"] for e in evs if e["reason"] == "FailedScheduling"
                     and f"Insufficient {RES}" in e["message"]), "")

    msg = wait("a FailedScheduling event naming Insufficient nvidia.com/gpu", insufficient)
    assert phase(ns, "five") == "Pending", msg


# ------------------------------------------------------------------ kwok nodes


def test_kwok_nodes_are_ready_with_gpus_and_run_pods(ns):
    kwok = get("nodes", "-l", "type=kwok")["items"]
    assert len(kwok) >= 3, f"expected at least 3 kwok nodes, found {len(kwok)}"
    for n in kwok:
        ready = {c["type"]: c["status"] for c in n["status"]["conditions"]}.get("Ready")
        gpus = {k: v for k, v in n["status"]["allocatable"].items() if k.startswith("nvidia.com/") and int(v) > 0}
        assert ready == "True" and gpus, f"{n['metadata']['name']}: Ready={ready}, GPU resources {gpus}"
    target = next(n["metadata"]["name"] for n in kwok if int(n["status"]["allocatable"].get(RES, "0")) > 0)
    pod(ns, "on-kwok", gpus=1, node=target, image=IMAGES["vectoradd"])
    wait(f"a pod requesting 1 GPU to run on {target}", lambda: phase(ns, "on-kwok") == "Running")
    assert get("pod", "-n", ns, "on-kwok")["spec"]["nodeName"] == target


def test_gpu_taint_keeps_untolerating_pods_off_the_kwok_pool(ns):
    target = get("nodes", "-l", "type=kwok,node-pool=kwok-plain")["items"][0]["metadata"]["name"]
    pod(ns, "no-toleration", gpus=0, node=target, command=["true"], tolerate=False)

    def untolerated() -> str:
        evs = get("events", "-n", ns, "--field-selector", "involvedObject.name=no-toleration")["items"]
        return next((e["message"] for e in evs if e["reason"] == "FailedScheduling" and "taint" in e["message"]), "")

    wait("a FailedScheduling event naming the untolerated taint", untolerated)


# ------------------------------------------------------------------ recovery from a killed run (runs last: restarts the bed)


def test_cluster_up_recovers_after_every_bed_process_was_sigkilled(ns):
    """A CI job killed mid-run leaves shims, mounts, netns, the CNI bridge and cgroups behind; `up` cleans them."""
    pod(ns, "before-kill", gpus=1, command=["sleep", "300"])
    wait("a running GPU pod (so a shim, netns and mounts exist)", lambda: phase(ns, "before-kill") == "Running")
    # Only the bed's own processes, as a killed CI job loses them: containerd's shims run in sessions of their
    # own and survive, holding the pod's mounts and network namespace.
    pids = [int(p.read_text()) for p in (STATE / "run").glob("*.pid")]
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
    time.sleep(1)
    up = subprocess.run(["python3", str(ROOT / "localcluster" / "cluster.py"), "up"], capture_output=True, text=True,
                        timeout=600)
    assert up.returncode == 0, f"cluster.py up after SIGKILL failed:\n{up.stdout[-2000:]}\n{up.stderr[-2000:]}"
    said = up.stdout + up.stderr
    assert "cleaned leftovers of an earlier run" in said and "containerd-shim" in said, said[-2000:]
    test_gpu_node_is_ready_and_advertises_four_gpus()
    pod(ns, "after-restart", gpus=1, image=IMAGES["vectoradd"])
    assert wait("vectoradd after the restart", lambda: finished(ns, "after-restart")) == "Succeeded"
