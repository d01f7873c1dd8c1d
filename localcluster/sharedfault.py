"""The "double-assigned" fault: the kubelet's own record (its device manager state, what the PodResources API
List reports) assigns one GPU to two running containers at once, the state a stale or corrupted device checkpoint
leaves after a kubelet restart.

Real interfaces only: two tenant pods each get one GPU the normal way; then the kubelet is stopped, its device
checkpoint (<kubelet root>/device-plugins/kubelet_internal_checkpoint) is rewritten by tools/k8s/cmd/checkpoint-share
(which uses the kubelet's own checkpoint package, so the checksum verifies) to give tenant-b's container tenant-a's
device, and the kubelet is started again. It loads the record at start (k8s.io/kubernetes v1.34.4
pkg/kubelet/cm/devicemanager/manager.go readCheckpoint -> podDevices.fromCheckpointData) and, re-admitting the two
pods whose containers are still running, keeps it (devicesToAllocate returns early for a container the runtime
reports running while the pod sources are not yet all seen, and never re-checks IDs across containers).

The tool also drops the GPU resource from the checkpoint's RegisteredDevices (-forget-registered; a checkpoint the
kubelet writes while no plugin is registered looks so). Otherwise the restarted kubelet publishes capacity 0 until
the plugin re-registers and re-admits the running pods against allocatable raised only to the number of distinct
allocated devices (manager.go sanitizeNodeAllocatable: the union, one short with a device held twice), so
tenant-b would fail admission (OutOfnvidia.com/gpu) instead of keeping the shared record.

    apply(bins, kubectl) -> one-line description     clear(kubectl) -> one-line description

Used by faults.py for the fault table's row "double-assigned" (faulttable.py, step DoubleAssign). tenant-b's
container keeps running on the GPU it was really given; only the kubelet's record (and, if the container restarts,
what the kubelet injects: the Allocate response is copied too) names tenant-a's GPU. The GPU tenant-b really holds
is free in the kubelet's eyes meanwhile.
"""

from __future__ import annotations

import json
import time

import bed
import gpunode

NS = "team-inference"
TENANTS = ("tenant-a", "tenant-b")  # tenant-b's container is given tenant-a's device in the kubelet's record
CONTAINER = "serve"
CHECKPOINT = bed.KUBELET_ROOT / "device-plugins" / "kubelet_internal_checkpoint"
TOOL = "checkpoint-share"


def resource() -> str:
    """The node's GPU resource: the bed profile's first one (plain: nvidia.com/gpu), as faults.py uses it."""
    return next(iter(gpunode.healthy_counts()))


def tenant_objects(res: str) -> list[dict]:
    """Two other teams' long-running pods on the GPU node, one device each (like faults.py's gpu-hog)."""
    labels = {"app": "tenant", "app.kubernetes.io/part-of": "gpuconform-localcluster"}
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}] + [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": labels},
         "spec": {"nodeSelector": {"kubernetes.io/hostname": bed.NODE_NAME}, "terminationGracePeriodSeconds": 0,
                  "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                  "containers": [{"name": CONTAINER, "image": bed.IMAGES["probe"], "imagePullPolicy": "IfNotPresent",
                                  "command": ["sleep", "2147483647"],
                                  "resources": {"limits": {res: "1"}}}]}}
        for name in TENANTS]


def checkpoint_tool(bins: bed.Bins) -> str:
    """The checkpoint-share binary (build.sh's k8s-tools group)."""
    tool = bins.tools / TOOL
    if not tool.exists():
        raise bed.BedError(f"{tool} is missing: rebuild with localcluster/build.sh k8s-tools")
    return str(tool)


def read_record() -> dict[tuple[str, str, str], list[str]]:
    """(pod UID, container, resource) -> device IDs, from the kubelet's device checkpoint (plain JSON; the
    checksum is checked by the Go tool and by the kubelet)."""
    data = json.loads(CHECKPOINT.read_text())["Data"]
    return {(e["PodUID"], e["ContainerName"], e["ResourceName"]):
            sorted({i for ids in (e.get("DeviceIDs") or {}).values() for i in ids})
            for e in data.get("PodDeviceEntries") or []}


def _pods(kubectl: bed.Kubectl) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in kubectl.json("get", "pods", "-n", NS, "-l", "app=tenant")["items"]
            if not p["metadata"].get("deletionTimestamp")}


def _running(pod: dict) -> str | None:
    """The container ID of the tenant's running container, None while it does not run."""
    if pod.get("status", {}).get("phase") != "Running":
        return None
    for cs in pod["status"].get("containerStatuses") or []:
        if cs.get("name") == CONTAINER and "running" in (cs.get("state") or {}):
            return cs.get("containerID")
    return None


def _ns_gone_or_active(kubectl: bed.Kubectl) -> bool:
    phase = kubectl("get", "namespace", NS, "-o", "jsonpath={.status.phase}", check=False).strip()
    return phase != "Terminating"


def apply(bins: bed.Bins, kubectl: bed.Kubectl) -> str:
    res = resource()
    tool = checkpoint_tool(bins)  # before touching anything: a missing tool leaves the bed as it was
    bed.wait_for(f"namespace {NS} of an earlier run to finish terminating", lambda: _ns_gone_or_active(kubectl), 90)
    kubectl.apply(*tenant_objects(res))
    bed.wait_for(f"tenant pods {', '.join(TENANTS)} in {NS} to run with one {res} each",
                 lambda: all(_running(_pods(kubectl).get(t, {})) for t in TENANTS), 90, "kubelet")
    pods = _pods(kubectl)
    uid = {t: pods[t]["metadata"]["uid"] for t in TENANTS}
    cid = {t: _running(pods[t]) for t in TENANTS}
    key = {t: (uid[t], CONTAINER, res) for t in TENANTS}
    # The kubelet checkpoints an allocation before it creates the container (manager.go allocateContainerResources
    # -> writeCheckpoint), so a running tenant is already in the file; wait anyway rather than assume.
    bed.wait_for("the kubelet's device checkpoint to record both tenants",
                 lambda: all(read_record().get(k) for k in key.values()), 30, "kubelet")
    before = read_record()
    real_b = before[key["tenant-b"]]

    policy = bed.read_state().get("topology_policy", "single-numa-node")
    bed.stop("kubelet")  # a running kubelet rewrites the checkpoint from memory: edit it only while it is down
    try:
        change = bed.sh(tool, "-resource", res, "-from", f"{uid['tenant-a']}/{CONTAINER}",
                        "-to", f"{uid['tenant-b']}/{CONTAINER}", "-forget-registered", str(CHECKPOINT)).stdout.strip()
        bed.say(f"{TOOL}: {change}")
        edited = CHECKPOINT.stat().st_mtime_ns
    finally:
        gpunode.start_kubelet(bins, bed.node_ip(), kubectl, policy)
    gpunode.wait_plugin_registered(kubectl)
    # The plugin's first device list after re-registration makes the kubelet write its in-memory record back
    # (manager.go genericDeviceUpdateCallback -> writeCheckpoint): once the file is newer than the edit, it shows
    # what the restarted kubelet holds, not what we wrote.
    bed.wait_for("the restarted kubelet to rewrite its device checkpoint from memory",
                 lambda: CHECKPOINT.stat().st_mtime_ns > edited, 60, "kubelet")
    after = read_record()
    a_ids, b_ids = after.get(key["tenant-a"]), after.get(key["tenant-b"])
    if not a_ids or a_ids != b_ids:
        raise bed.BedError(f"the restarted kubelet did not keep the shared assignment: tenant-a {a_ids}, "
                           f"tenant-b {b_ids} (expected both {before[key['tenant-a']]})")
    # Both pods must have survived re-admission with their containers untouched (no UnexpectedAdmissionError,
    # no restart): otherwise the record would not describe two live containers.
    time.sleep(2)
    pods = _pods(kubectl)
    moved = [t for t in TENANTS if _running(pods.get(t, {})) != cid[t]]
    if moved:
        raise bed.BedError(f"tenant pod(s) {', '.join(moved)} did not survive the kubelet restart unchanged: "
                           + "; ".join(f"{t}: phase {pods.get(t, {}).get('status', {}).get('phase')}, "
                                       f"reason {pods.get(t, {}).get('status', {}).get('reason')}" for t in moved))
    return (f"the kubelet's record assigns {res} {', '.join(a_ids)} to both {NS}/tenant-a and {NS}/tenant-b "
            f"(tenant-b's container really runs on {', '.join(real_b)}, which the kubelet now counts as free)")


def clear(kubectl: bed.Kubectl) -> str:
    """Deletes the tenant pods. No kubelet restart is needed: the device manager drops the entries of pods that are
    no longer active on its next UpdateAllocatedDevices (any GPU pod admission, topology hint or PodResources List),
    and its checkpoint with its next write; a later restart would load them and drop them the same way."""
    kubectl("delete", "namespace", NS, "--wait=true", "--timeout=60s", check=False)
    return f"tenant pods in {NS} deleted; the kubelet frees their device record on its next allocation or List"


__all__ = ["apply", "clear", "read_record", "resource", "tenant_objects", "checkpoint_tool"]
