#!/usr/bin/env python3
"""The local test bed: a real single-node Kubernetes with a simulated GPU device plugin and kwok fake GPU nodes.

    cluster.py up            build what is missing, start what is not running, wait for Ready + plugin registered
    cluster.py down          stop what `up` started (by pid) and remove its state
    cluster.py status        one line per component, node and GPU counts
    cluster.py faults        list the named faults
    cluster.py fault NAME    apply one fault
    cluster.py fault-clear   restore the healthy state (and the shape the bed was started in)
    cluster.py bed PROFILE LAYOUT   switch the real node's pool profile / plugin install layout (shapes.py)
    cluster.py plugin-version VERSION   roll NVIDIA's plugin DaemonSet to release VERSION (v0.18.2 or v0.19.3)
    cluster.py upgrade-during-run VERSION   once a rehearsal holds the nodes: plugin-version VERSION and restart the
                                        DRA driver's DaemonSet (make rehearse's upgrade)

Everything runs as root on this machine: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
containerd (Debian's) with runc and CNI bridge, kubelet, and kwok. State, logs and the kubeconfig live in
.localcluster/ next to this directory; host state the kubelet insists on (/var/lib/kubelet) and the simulated
GPU "hardware" (/var/lib/gpu-sim) are wiped on `down` and before a fresh `up`. See localcluster/README.md.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bed  # noqa: E402
import dranode  # noqa: E402
import faults  # noqa: E402
import gpunode  # noqa: E402
import shapes  # noqa: E402
from bed import (NODE_NAME, CTRD_ROOT, CTRD_SOCK, CTRD_STATE, CNI_BRIDGE, GPU_SIM, KUBECONFIG, KUBELET_ROOT, KWOK_NODES,  # noqa: E402
                 PKI, PORTS, RUN, STATE, WRONG_PLUGIN_DIR, BedError, Bins, Kubectl, build, make_pki, node_ip,
                 node_ready, pid_of, read_state, remove_cgroups, say, sh, start, stop, wait_for, write_state)
from controlplane import service_vip, start_control_plane  # noqa: E402
# Re-exported: testing/e2e/test_incluster.py builds and imports the suite image through this module.
from bed import IMAGES as IMAGES  # noqa: E402
from gpunode import build_suite_image as build_suite_image, ctr as ctr  # noqa: E402


# ---------------------------------------------------------------- leftovers

def port_owner(port: int) -> str | None:
    out = sh("ss", "-Hltnp", f"sport = :{port}", check=False).stdout.strip()
    return out or None


def mounts_under(*prefixes: Path) -> list[str]:
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mnt = line.split()[4].replace("\\040", " ")
        if any(mnt == str(p) or mnt.startswith(f"{p}/") for p in prefixes):
            found.append(mnt)
    return sorted(found, key=lambda m: -m.count("/"))


def clean_host_state() -> list[str]:
    """Removes what a killed earlier run leaves: shims, mounts, netns, CNI bridge, cgroups, node state."""
    cleaned = []
    for pid in sh("pgrep", "-f", f"containerd-shim.*{CTRD_SOCK}", check=False).stdout.split():
        os.kill(int(pid), signal.SIGKILL)
        cleaned.append(f"containerd-shim pid {pid}")
    for pid in sh("pgrep", "-f", f"kwok.*--node-port={PORTS['kwok']}", check=False).stdout.split():
        os.kill(int(pid), signal.SIGKILL)
        cleaned.append(f"kwok pid {pid}")
    mounts = mounts_under(KUBELET_ROOT, CTRD_STATE, CTRD_ROOT, Path("/run/netns"), GPU_SIM)
    for m in mounts:
        sh("umount", "-l", m, check=False)
    if mounts:
        cleaned.append(f"{len(mounts)} mounts")
    for ns in sh("ip", "netns", "list", check=False).stdout.split("\n"):
        if ns.startswith("cni-"):
            sh("ip", "netns", "delete", ns.split()[0], check=False)
            cleaned.append(f"netns {ns.split()[0]}")
    if sh("ip", "link", "show", CNI_BRIDGE, check=False).returncode == 0:
        sh("ip", "link", "delete", CNI_BRIDGE, check=False)
        cleaned.append(f"bridge {CNI_BRIDGE}")
    removed = remove_cgroups("kubepods")
    if removed:
        cleaned.append(f"{removed} kubepods cgroups")
    for d in (KUBELET_ROOT, GPU_SIM, CTRD_STATE, Path("/var/lib/cni/networks/gpuconform"), WRONG_PLUGIN_DIR.parent):
        if d.exists():
            sh("rm", "-rf", "--one-file-system", str(d))
            cleaned.append(str(d))
    return cleaned


# ---------------------------------------------------------------- kwok

# The kwok pool imitates what GPU Feature Discovery and the NVIDIA plugin publish for three setups, so the
# suite's sharing and MIG rules run end to end against real Node objects: whole GPUs, time-slicing and MIG
# strategy mixed. Each shape (labels, resources) is the shapes.py profile of that name, as on the real node.
KWOK_POOLS = ("plain", "time-slicing", "mig-mixed")  # shapes.PROFILES, node i gets KWOK_POOLS[i % 3]
# The operator layout's node labels: the operator's nvidia.com/gpu.present (which the validator DaemonSet and
# GPU node discovery follow) plus NFD's pci-10de label. kwok nodes run no plugin pod (the plugin's affinity
# keeps type=kwok out), so no plugin layout applies to them beyond these labels.
KWOK_LAYOUT = "operator"
KWOK_NODE_RESOURCES = {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "1Ti"}


def kwok_node(i: int, prefix: str = "kwok-gpu", pool_prefix: str = "kwok",
              labels: dict[str, str] | None = None) -> dict:
    """Node `<prefix>-<i>` in pool KWOK_POOLS[i % 3] (label node-pool=<pool_prefix>-<pool>), managed by kwok
    (annotation kwok.x-k8s.io/node=fake) and labelled type=kwok; `labels` are added (or override)."""
    name, pool = f"{prefix}-{i}", KWOK_POOLS[i % len(KWOK_POOLS)]
    res = {**KWOK_NODE_RESOURCES, **{r: str(n) for r, n in shapes.resources(pool).items()}}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name,
                         "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                         "labels": {"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                    "kubernetes.io/arch": "amd64", "node-pool": f"{pool_prefix}-{pool}",
                                    **shapes.gfd_labels(pool, KWOK_LAYOUT), **(labels or {})}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {"capacity": res, "allocatable": res}}


VECTORADD_OK = """[Vector addition of 50000 elements]
Copy input data from the host memory to the CUDA device
CUDA kernel launch with 196 blocks of 256 threads
Copy output data from the CUDA device to the host memory
Test PASSED
Done
"""


def kwok_config() -> Path:
    """kwok's default stages run pods to Running (Job pods to Succeeded); ClusterLogs serves `kubectl logs`."""
    log = STATE / "kwok-vectoradd.log"
    log.write_text(VECTORADD_OK)
    cfg = STATE / "kwok.yaml"
    cfg.write_text((HERE / "kwok-stages.yaml").read_text() + "---\n" + json.dumps(
        {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterLogs", "metadata": {"name": "gpu-sim-logs"},
         "spec": {"logs": [{"containers": ["vectoradd"], "logsFile": str(log)}]}}) + "\n")
    return cfg


def start_kwok(bins: Bins, kubectl: Kubectl) -> None:
    if KWOK_NODES <= 0:
        return
    start("kwok", [bins["kwok"], f"--kubeconfig={PKI / 'kwok.kubeconfig'}", "--manage-all-nodes=false",
                   "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                   "--node-ip=127.0.0.1", f"--node-port={PORTS['kwok']}",
                   f"--server-address=127.0.0.1:{PORTS['kwok']}",
                   f"--tls-cert-file={PKI / 'kwok-serving.crt'}", f"--tls-private-key-file={PKI / 'kwok-serving.key'}",
                   f"--config={kwok_config()}"])
    kubectl.apply(*(kwok_node(i) for i in range(KWOK_NODES)))
    for i in range(KWOK_NODES):
        wait_for(f"kwok node kwok-gpu-{i} Ready", lambda i=i: node_ready(kubectl, f"kwok-gpu-{i}"), 60, "kwok")


# ---------------------------------------------------------------- commands

COMPONENTS = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "containerd", "kubelet", "kwok"]


def up() -> None:
    if os.geteuid() != 0:
        raise BedError("the local test bed runs containerd and kubelet and needs root")
    for tool in ("containerd", "runc", "ctr", "openssl", "ss"):
        if not shutil.which(tool):
            raise BedError(f"{tool} is not installed; run `make deps` (Debian packages) first")
    bed.start_venv()  # the suite image's packages, installed while the binaries build
    bins = build()
    ip = node_ip()
    running = [c for c in COMPONENTS if pid_of(c)]
    if not running:
        for c in COMPONENTS:
            (RUN / f"{c}.pid").unlink(missing_ok=True)
        busy = {c: o for c, p in PORTS.items() if (o := port_owner(p))}
        if busy:
            raise BedError("ports needed by the test bed are in use by processes it did not start: "
                           + "; ".join(f"{c} port {PORTS[c]}: {o}" for c, o in busy.items()))
        cleaned = clean_host_state()
        if cleaned:
            say("cleaned leftovers of an earlier run: " + ", ".join(cleaned))
        for c in dranode.stop_all():
            say(f"stopped {c} left from an earlier run")
        dranode.clean_host_state()
        if (STATE / "etcd").exists() and not (PKI / "done").exists():
            shutil.rmtree(STATE / "etcd")
    elif len(running) < len(COMPONENTS):
        say(f"partly running ({', '.join(running)}); starting the rest")
    make_pki(ip)
    kubectl = Kubectl(bins)
    start_control_plane(bins, ip, kubectl)
    faults.restore_runtime_class(kubectl)  # a bed restarted under runtime-class-missing keeps it missing
    if not read_state().get("profile"):  # a fresh bed starts in the shape the environment asks for
        profile, layout = shapes.current()
        stack = shapes.wanted_stack()
        write_state(profile=profile, layout=layout, base_profile=profile, base_layout=layout, base_stack=stack,
                    stack=shapes.stack_for(profile, stack))
    archives = gpunode.start_node(bins, ip, kubectl, policy=read_state().get("topology_policy", "single-numa-node"))
    if not read_state().get("fault"):
        gpunode.deploy_plugin(kubectl)
        gpunode.wait_plugin_registered(kubectl)
        gpunode.deploy_operator(kubectl)
    if dranode.wanted() and dranode.is_up(kubectl):
        say(f"DRA node {dranode.NODE} already up")
    elif dranode.wanted():
        write_state(dra=True)
        dranode.start(bins, ip, kubectl, archives)
    start_kwok(bins, kubectl)
    if not read_state().get("fault"):  # a restarted bed's stack pods start again: a run must not meet them starting
        real = [NODE_NAME] + ([dranode.NODE] if read_state().get("dra") else [])
        wait_for("the GPU stack's pods Ready on " + ", ".join(real),
                 lambda: not bed.unready_stack_pods(kubectl, real), 180, "kubelet")
    bins.finish()  # a step the bring-up did not wait for (the bed's own tools) must not fail unseen
    mem = cluster_memory_mib()
    say(f"cluster up in {time.monotonic() - bed.T0:.0f}s; processes use {mem} MiB RSS; "
        f"export KUBECONFIG={KUBECONFIG}")


def down() -> None:
    stopped = dranode.stop_all() + [c for c in reversed(COMPONENTS) if stop(c)]
    dranode.clean_host_state()
    service_vip(node_ip(), on=False)
    cleaned = clean_host_state()
    if STATE.exists():
        for d in ("etcd", "run", "images", "containerd", "pki"):
            shutil.rmtree(STATE / d, ignore_errors=True)
        for f in ("kubeconfig", "state.json", "kubelet.yaml"):
            (STATE / f).unlink(missing_ok=True)
    if CTRD_ROOT.exists():
        shutil.rmtree(CTRD_ROOT.parent, ignore_errors=True)
    say(f"stopped {', '.join(stopped) or 'nothing (not running)'}; removed state"
        + (f" ({', '.join(cleaned)})" if cleaned else ""))


def cluster_memory_mib() -> int:
    total = 0
    pids = [p for c in COMPONENTS if (p := pid_of(c))]
    pids += [int(p) for p in sh("pgrep", "-f", f"containerd-shim.*{CTRD_SOCK}", check=False).stdout.split()]
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total // 1024


def status() -> int:
    ok = True
    for c in COMPONENTS:
        pid = pid_of(c)
        ok &= bool(pid) or (c == "kwok" and KWOK_NODES <= 0)
        print(f"{c:24} {'running (pid %d)' % pid if pid else 'stopped'}")
    if pid_of("kube-apiserver"):
        bins = build(quiet=True)
        if bins:
            print(Kubectl(bins)("get", "nodes", "-o", "custom-columns=NODE:.metadata.name,READY:.status.conditions[-1:].status,"
                    "GPU_CAPACITY:.status.capacity.nvidia\\.com/gpu,GPU_ALLOCATABLE:.status.allocatable.nvidia\\.com/gpu",
                    check=False), end="")
    st = read_state()
    print(f"profile: {st.get('profile') or '-'}; layout: {st.get('layout') or '-'}; plugin stack: {st.get('stack') or '-'}; fault: {st.get('fault') or 'none'}; memory: {cluster_memory_mib()} MiB RSS; kubeconfig: {KUBECONFIG}")
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    cmds = {"up": up, "down": down, "status": status, "faults": faults.list_faults,
            "fault-clear": faults.clear}
    try:
        if len(argv) == 2 and argv[0] == "fault":
            return faults.apply(argv[1]) or 0
        if argv[:1] == ["dra"] and len(argv) in (2, 3) and argv[1] in ("up", "down", "fault", "shape"):
            bins = build()
            if argv[1] == "up":
                dranode.up(bins, Kubectl(bins))
            elif argv[1] == "down":
                dranode.down(bins, Kubectl(bins))
            elif argv[1] == "shape":
                dranode.set_shape(bins, Kubectl(bins), argv[2] if len(argv) == 3 else "")
            else:
                dranode.set_fault(bins, Kubectl(bins), argv[2] if len(argv) == 3 else "")
            return 0
        if len(argv) in (3, 4) and argv[0] == "bed":
            return gpunode.switch(argv[1], argv[2], *argv[3:])
        if argv[:1] == ["restart-kubelet"] and len(argv) <= 3 and argv[2:] in ([], ["--during-run"]):
            return faults.restart_kubelet(float(argv[1]) if len(argv) >= 2 else 0, during_run=argv[2:] != [])
        if argv[:1] == ["plugin-version"] and len(argv) == 2:
            return gpunode.plugin_version(argv[1])
        if argv[:1] == ["upgrade-during-run"] and len(argv) == 2:
            return faults.upgrade_during_run(argv[1])
        if argv[:1] == ["cut-access"] and len(argv) in (2, 3):
            return faults.cut_access(float(argv[1]), *argv[2:])
        if argv[:1] == ["roll-plugin"] and len(argv) == 3 and argv[2] in faults.ROLL_CHANGES:
            return faults.roll_plugin_during_run(float(argv[1]), argv[2])
        if argv[:1] == ["nvml-event"] and len(argv) >= 3:
            return faults.nvml_event_during_run(float(argv[1]), argv[2:])
        if argv[:1] == ["dra-signal"] and len(argv) == 2:
            return dranode.signal_driver_during_run(Kubectl(build()), float(argv[1]))
        if len(argv) != 1 or argv[0] not in cmds:
            raise BedError(f"usage: cluster.py {{{'|'.join(cmds)}|fault NAME|bed PROFILE LAYOUT|"
                           "plugin-version VERSION|upgrade-during-run VERSION|restart-kubelet [DELAY_S [--during-run]]|cut-access DELAY_S [CHECK]|roll-plugin DELAY_S {slow-start|crashloop|time-slicing|kubelet-restart}|nvml-event DELAY_S LINE...|"
                           "dra-signal DELAY_S}}")
        return cmds[argv[0]]() or 0
    except BedError as e:
        print(f"localcluster: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
