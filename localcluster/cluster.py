#!/usr/bin/env python3
"""The local test bed: a real single-node Kubernetes with a simulated GPU device plugin and kwok fake GPU nodes.

    cluster.py up            build what is missing, start what is not running, wait for Ready + plugin registered
    cluster.py down          stop what `up` started (by pid) and remove its state
    cluster.py status        one line per component, node and GPU counts
    cluster.py faults        list the named faults
    cluster.py fault NAME    apply one fault
    cluster.py fault-clear   restore the healthy state (and the shape the bed was started in)
    cluster.py bed PROFILE LAYOUT   switch the real node's pool profile / plugin install layout (shapes.py)

Everything runs as root on this machine: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
containerd (Debian's) with runc and CNI bridge, kubelet, and kwok. State, logs and the kubeconfig live in
.localcluster/ next to this directory; host state the kubelet insists on (/var/lib/kubelet) and the simulated
GPU "hardware" (/var/lib/gpu-sim) are wiped on `down` and before a fresh `up`. See localcluster/README.md.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import shlex
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import imagebuild  # noqa: E402

STATE = Path(os.environ.get("GPUCONFORM_STATE", HERE.parent / ".localcluster"))
PKI, LOGS, RUN = STATE / "pki", STATE / "logs", STATE / "run"
KUBECONFIG = STATE / "kubeconfig"
KUBELET_ROOT = Path("/var/lib/kubelet")
GPU_SIM = Path("/var/lib/gpu-sim")
NVIDIA_MAJOR = 195
WRONG_PLUGIN_DIR = Path("/var/lib/gpuconform-wrong/device-plugins")  # the wrong-socket-dir fault mounts this
CTRD_ROOT, CTRD_STATE = Path("/var/lib/gpuconform/containerd"), Path("/run/gpuconform/containerd")
CTRD_SOCK = CTRD_STATE / "containerd.sock"
CNI_BRIDGE = "gcbr0"
POD_CIDR = "10.88.0.0/16"

NODE_NAME = os.environ.get("GPUCONFORM_NODE_NAME", "gpu-node-0")
GPUS = int(os.environ.get("GPUCONFORM_GPUS", "4"))
KWOK_NODES = int(os.environ.get("GPUCONFORM_KWOK_NODES", "3"))
GPU_PRODUCT = "NVIDIA A100-SXM4-40GB"
DRIVER, CUDA = "550.54.15", "12.4"

PORTS = {"etcd": 12379, "etcd-peer": 12380, "kube-apiserver": 6443, "kubelet": 10250, "kwok": 10247,
         "kube-controller-manager": 10257, "kube-scheduler": 10259}

IMAGES = {
    "pause": "registry.k8s.io/pause:3.10",
    "plugin": "localhost/gpuconform/gpu-device-plugin:sim",
    "probe": "localhost/gpuconform/probe-tools:sim",
    "vectoradd": "localhost/gpuconform/cuda-sample:vectoradd-sim",
    "suite": "localhost/gpuconform/suite:dev",  # the suite itself, for manifests/ (in-cluster Job)
}
IMAGE_LABEL = {"org.opencontainers.image.source": "gpuconform localcluster (built from local files)"}
# The NVIDIA runtime handler and RuntimeClass (nvidia-ctk runtime configure / the GPU operator; README.md), served by
# the nvidia-container-runtime stand-in runtime_sim.py, whose behaviour <GPU_SIM>/runtime.json sets.
NVIDIA_RUNTIME = "nvidia"
RUNTIME_SIM = HERE / "nvidia-runtime-sim"
PLUGIN_CM = "gpu-sim-config"  # the simulated plugin's ConfigMap; namespace and DaemonSet come from the layout (shapes.py)
RESOURCE = "nvidia.com/gpu"

T0 = time.monotonic()


class BedError(Exception):
    """A failure with a one-line message; main() prints it and exits non-zero."""


def say(msg: str) -> None:
    print(f"[localcluster +{time.monotonic() - T0:5.1f}s] {msg}", flush=True)


def node_ip() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # no packet is sent; picks the default-route address
        return s.getsockname()[0]


# ---------------------------------------------------------------- binaries

@dataclass
class Bins:
    k8s: Path
    kwok: Path
    images: Path
    tools: Path  # the bed's own Go tools (build.sh K8S_TOOLS_BIN, tools/k8s/cmd)
    nvidia: Path  # NVIDIA's plugin and GFD, NFD's master and CRDs (build.sh NVIDIA_BIN; nvidia.py)
    mocknvml: Path  # the mock libnvidia-ml.so.1 (build.sh MOCKNVML_LIB; mocknvml/)
    containerd2: Path  # containerd 2.x and its runc shim for the DRA node (build.sh CONTAINERD2_BIN; dranode.py)

    def __getitem__(self, name: str) -> str:
        return str((self.kwok if name == "kwok" else self.k8s) / name)


_BINS: list[Bins] = []


def build(quiet: bool = False) -> Bins:
    """Runs build.sh (a no-op when cached) and returns where the binaries are; `quiet` hides its progress. Once per
    process."""
    if _BINS:
        return _BINS[0]
    # A bed keeps the Kubernetes release it was started with (state k8s_version), whatever K8S_VERSION says later:
    # a fault that restarts the kubelet must not bring another release's kubelet.
    env = dict(os.environ)
    if read_state().get("k8s_version"):
        env["K8S_VERSION"] = read_state()["k8s_version"]
    out = subprocess.run([str(HERE / "build.sh")], stdout=subprocess.PIPE, text=True, env=env,
                         stderr=subprocess.DEVNULL if quiet else None)
    if out.returncode:
        raise BedError("building the test-bed binaries failed (see the [build] lines above)")
    dirs = dict(line.split("=", 1) for line in out.stdout.split())
    if not read_state().get("k8s_version") and STATE.exists():
        write_state(k8s_version=Path(dirs["K8S_BIN"]).name.split("-", 1)[0])
    _BINS.append(Bins(Path(dirs["K8S_BIN"]), Path(dirs["KWOK_BIN"]), Path(dirs["IMAGES_BIN"]),
                      Path(dirs["K8S_TOOLS_BIN"]), Path(dirs["NVIDIA_BIN"]), Path(dirs["MOCKNVML_LIB"]),
                      Path(dirs["CONTAINERD2_BIN"])))
    return _BINS[0]


# ---------------------------------------------------------------- processes

def pid_of(name: str) -> int | None:
    try:
        pid = int((RUN / f"{name}.pid").read_text())
        os.kill(pid, 0)
        # a recycled pid is not ours: check it still runs the binary we started
        if name.split("@")[0] not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
            return None
        return pid
    except (FileNotFoundError, ValueError, ProcessLookupError, PermissionError):
        return None


def start(name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
    if pid_of(name):
        say(f"{name} already running (pid {pid_of(name)})")
        return
    RUN.mkdir(parents=True, exist_ok=True)
    LOGS.mkdir(parents=True, exist_ok=True)
    log = open(LOGS / f"{name}.log", "ab")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, env={**os.environ, **(env or {})})
    (RUN / f"{name}.pid").write_text(str(proc.pid))
    say(f"started {name} (pid {proc.pid}, log {LOGS / (name + '.log')})")


def stop(name: str, grace: float = 10) -> bool:
    pid = pid_of(name)
    (RUN / f"{name}.pid").unlink(missing_ok=True)
    if not pid:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    os.kill(pid, signal.SIGKILL)
    return True


def tail(name: str, lines: int = 25) -> str:
    try:
        return "\n".join((LOGS / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def wait_for(what: str, check: Callable[[], bool], timeout: float, component: str | None = None) -> None:
    """Polls `check` until true; prints progress every 10 s; on timeout names the component and its log."""
    t = time.monotonic()
    nxt = t + 10
    last_err = ""
    while True:
        try:
            if check():
                return
        except Exception as e:  # noqa: BLE001 - a failing probe is "not yet"; shown if we time out
            last_err = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        if component and not pid_of(component):
            raise BedError(f"{component} exited while waiting for {what}; last log lines:\n{tail(component)}")
        now = time.monotonic()
        if now - t > timeout:
            hint = f"\n--- last lines of {LOGS / (component + '.log')}:\n{tail(component)}" if component else ""
            raise BedError(f"timed out after {timeout:.0f}s waiting for {what}"
                           + (f" (last error: {last_err})" if last_err else "") + hint)
        if now >= nxt:
            say(f"  still waiting for {what} ({now - t:.0f}s)")
            nxt = now + 10
        time.sleep(0.5)


def sh(*argv: str, check: bool = True, input: str | None = None, quiet: bool = False) -> subprocess.CompletedProcess:
    out = subprocess.run(list(argv), capture_output=True, text=True, input=input)
    if check and out.returncode:
        raise BedError(f"{' '.join(argv[:4])} ... failed: {(out.stderr or out.stdout).strip()[-500:]}")
    return out


class Kubectl:
    def __init__(self, bins: Bins):
        self.bin = bins["kubectl"]

    def __call__(self, *args: str, check: bool = True, input: str | None = None) -> str:
        return sh(self.bin, f"--kubeconfig={KUBECONFIG}", "--request-timeout=20s", *args,
                  check=check, input=input).stdout

    def apply(self, *objs: dict) -> None:
        if not objs:
            return
        self("apply", "--server-side", "--force-conflicts", "-f", "-",
             input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objs)}))

    def json(self, *args: str) -> dict:
        return json.loads(self(*args, "-o", "json"))


# ---------------------------------------------------------------- PKI

def openssl(*args: str) -> None:
    sh("openssl", *args)


def make_pki(ip: str) -> None:
    if (PKI / "done").exists():
        return
    PKI.mkdir(parents=True, exist_ok=True)
    say("generating certificates")
    ca = PKI / "ca"
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", "/CN=gpuconform-local-ca",
            "-keyout", f"{ca}.key", "-out", f"{ca}.crt")
    openssl("genrsa", "-out", str(PKI / "sa.key"), "2048")
    openssl("rsa", "-in", str(PKI / "sa.key"), "-pubout", "-out", str(PKI / "sa.pub"))
    certs = {
        # name: (subject, SANs or None for a client cert)
        "apiserver": ("/CN=kube-apiserver", f"DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,"
                      f"DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:10.0.0.1,IP:{ip}"),
        "kubelet-serving": (f"/CN={NODE_NAME}", f"DNS:{NODE_NAME},DNS:localhost,IP:127.0.0.1,IP:{ip}"),
        "kwok-serving": ("/CN=kwok", "DNS:localhost,IP:127.0.0.1"),
        "admin": ("/O=system:masters/CN=gpuconform-admin", None),
        "apiserver-kubelet-client": ("/CN=kube-apiserver-kubelet-client", None),
        "controller-manager": ("/CN=system:kube-controller-manager", None),
        "scheduler": ("/CN=system:kube-scheduler", None),
        "kubelet": (f"/O=system:nodes/CN=system:node:{NODE_NAME}", None),
        "kwok": ("/O=system:masters/CN=kwok-controller", None),
    }
    for name, (subj, sans) in certs.items():
        issue_cert(name, subj, sans)
    for name in ("admin", "controller-manager", "scheduler", "kubelet", "kwok"):
        write_kubeconfig(PKI / f"{name}.kubeconfig", name, f"https://{ip}:{PORTS['kube-apiserver']}")
    shutil.copy(PKI / "admin.kubeconfig", KUBECONFIG)
    (PKI / "done").touch()


def issue_cert(name: str, subj: str, sans: str | None) -> None:
    """PKI/<name>.{key,crt} signed by the bed's CA: a serving cert for `sans`, or a client cert when None."""
    ca = PKI / "ca"
    key, csr, crt = (PKI / f"{name}.{x}" for x in ("key", "csr", "crt"))
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subj, "-keyout", str(key), "-out", str(csr))
    ext = PKI / f"{name}.ext"
    ext.write_text(f"subjectAltName={sans}\nextendedKeyUsage=serverAuth\n" if sans else "extendedKeyUsage=clientAuth\n")
    openssl("x509", "-req", "-in", str(csr), "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
            "-days", "3650", "-extfile", str(ext), "-out", str(crt))


def write_kubeconfig(path: Path, user: str, server: str) -> None:
    b64 = lambda p: base64.b64encode((PKI / p).read_bytes()).decode()  # noqa: E731
    cfg = {
        "apiVersion": "v1", "kind": "Config", "current-context": "gpuconform-local",
        "clusters": [{"name": "gpuconform-local", "cluster": {"server": server,
                                                               "certificate-authority-data": b64("ca.crt")}}],
        "users": [{"name": user, "user": {"client-certificate-data": b64(f"{user}.crt"),
                                          "client-key-data": b64(f"{user}.key")}}],
        "contexts": [{"name": "gpuconform-local", "context": {"cluster": "gpuconform-local", "user": user}}],
    }
    path.write_text(json.dumps(cfg, indent=1))
    path.chmod(0o600)


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


def remove_cgroups(name: str) -> int:
    """Removes the cgroup `name` (a top-level directory in each hierarchy) and everything below it that no process
    holds, deepest first; returns how many directories went."""
    removed = 0
    for hier in Path("/sys/fs/cgroup").iterdir():
        base = hier / name
        if base.is_dir():
            for d in sorted((p for p in base.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [base]:
                try:
                    d.rmdir()
                    removed += 1
                except OSError:
                    pass
    return removed


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


# ---------------------------------------------------------------- components

def start_control_plane(bins: Bins, ip: str, kubectl: Kubectl) -> None:
    start("etcd", [bins["etcd"], "--name=gpuconform", f"--data-dir={STATE / 'etcd'}",
                   f"--listen-client-urls=http://127.0.0.1:{PORTS['etcd']}",
                   f"--advertise-client-urls=http://127.0.0.1:{PORTS['etcd']}",
                   f"--listen-peer-urls=http://127.0.0.1:{PORTS['etcd-peer']}",
                   f"--initial-advertise-peer-urls=http://127.0.0.1:{PORTS['etcd-peer']}",
                   f"--initial-cluster=gpuconform=http://127.0.0.1:{PORTS['etcd-peer']}",
                   "--quota-backend-bytes=2147483648", "--log-level=warn"])
    p = str(PKI)
    start("kube-apiserver", [
        bins["kube-apiserver"], f"--etcd-servers=http://127.0.0.1:{PORTS['etcd']}",
        f"--secure-port={PORTS['kube-apiserver']}", f"--advertise-address={ip}",
        f"--tls-cert-file={p}/apiserver.crt", f"--tls-private-key-file={p}/apiserver.key",
        f"--client-ca-file={p}/ca.crt",
        "--authorization-mode=Node,RBAC", "--anonymous-auth=false",
        "--enable-admission-plugins=NodeRestriction,PodSecurity",
        f"--service-account-key-file={p}/sa.pub", f"--service-account-signing-key-file={p}/sa.key",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
        # The apiserver reaches kubelets (logs, exec, metrics, configz) with a client cert and verifies them.
        f"--kubelet-client-certificate={p}/apiserver-kubelet-client.crt",
        f"--kubelet-client-key={p}/apiserver-kubelet-client.key",
        f"--kubelet-certificate-authority={p}/ca.crt",
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        "--profiling=false", "--v=1"])
    wait_for("kube-apiserver /readyz", lambda: kubectl("get", "--raw", "/readyz").strip() == "ok", 120,
             "kube-apiserver")
    # What kubeadm does: the apiserver's kubelet-client identity gets the kubelet API, nothing more.
    kubectl.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "gpuconform:apiserver-kubelet-client"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": "system:kubelet-api-admin"},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                 "name": "kube-apiserver-kubelet-client"}]})
    start_controller_manager(bins)
    start_scheduler(bins)


def start_scheduler(bins: Bins, gates: str = "") -> None:
    """kube-scheduler, with the feature gates in `gates` ("A=false,B=false": a fault, `dra fault taint-ignored` runs
    it without DRADeviceTaints)."""
    p = str(PKI)
    start("kube-scheduler", [
        bins["kube-scheduler"], f"--kubeconfig={p}/scheduler.kubeconfig",
        f"--authentication-kubeconfig={p}/scheduler.kubeconfig",
        f"--authorization-kubeconfig={p}/scheduler.kubeconfig",
        "--leader-elect=false", "--bind-address=127.0.0.1", "--profiling=false", "--v=1",
        *([f"--feature-gates={gates}"] if gates else [])])


def start_controller_manager(bins: Bins, off: tuple[str, ...] = ()) -> None:
    """kube-controller-manager with every controller but nodeipam (the bed has no pod CIDRs) and those in `off`
    (a fault: `dra fault claim-controller-off` runs it without resourceclaim-controller)."""
    p = str(PKI)
    start("kube-controller-manager", [
        bins["kube-controller-manager"], f"--kubeconfig={p}/controller-manager.kubeconfig",
        f"--authentication-kubeconfig={p}/controller-manager.kubeconfig",
        f"--authorization-kubeconfig={p}/controller-manager.kubeconfig",
        "--leader-elect=false", "--bind-address=127.0.0.1", "--use-service-account-credentials=true",
        f"--service-account-private-key-file={p}/sa.key", f"--root-ca-file={p}/ca.crt",
        f"--cluster-signing-cert-file={p}/ca.crt", f"--cluster-signing-key-file={p}/ca.key",
        "--controllers=" + ",".join(("*", "-nodeipam", *(f"-{c}" for c in off))), "--profiling=false", "--v=1"])


def containerd_config() -> Path:
    d = STATE / "containerd"
    (d / "net.d").mkdir(parents=True, exist_ok=True)
    (d / "net.d" / "10-gpuconform.conflist").write_text(json.dumps({
        "cniVersion": "0.4.0", "name": "gpuconform",
        "plugins": [
            {"type": "bridge", "bridge": CNI_BRIDGE, "isGateway": True, "ipMasq": False, "hairpinMode": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_CIDR}]], "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ]}, indent=1))
    cfg = d / "config.toml"
    cfg.write_text(f"""# containerd 1.6 (Debian bookworm) for the gpuconform test bed; see localcluster/README.md
version = 2
root = "{CTRD_ROOT}"
state = "{CTRD_STATE}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{CTRD_SOCK}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{IMAGES['pause']}"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        {runc_binary()}
    # What `nvidia-ctk runtime configure --runtime=containerd` adds (NVIDIA/nvidia-container-toolkit
    # pkg/config/engine/containerd/config.go AddRuntimeWithOptions: runc's options copied, runtime_type
    # io.containerd.runc.v2, options.BinaryName = the runtime's path); not the default runtime, as with
    # `nvidia-ctk runtime configure` (--set-as-default is off there; the operator's toolkit installer turns it on).
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{NVIDIA_RUNTIME}]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.{NVIDIA_RUNTIME}.options]
        SystemdCgroup = false
        BinaryName = "{RUNTIME_SIM}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{d / 'net.d'}"
""")
    return cfg


def oom_clamp_needed() -> bool:
    """True where this host denies negative oom_score_adj (README.md, "OOM score clamp")."""
    return subprocess.run(["sh", "-c", "echo -1 > /proc/self/oom_score_adj"], capture_output=True).returncode != 0


def runc_binary() -> str:
    """The OCI runtime line: runc itself, or the oom-score clamp wrapper where this host forbids negative scores.
    The nvidia runtime's wrapper makes the same decision from <GPU_SIM>/oom-clamp, which this writes."""
    GPU_SIM.mkdir(parents=True, exist_ok=True)
    marker = GPU_SIM / "oom-clamp"
    if not oom_clamp_needed():
        marker.unlink(missing_ok=True)
        return ""
    marker.write_text("host denies negative oom_score_adj: clamp to 0 (localcluster/nvidia-runtime-sim)\n")
    return f'BinaryName = "{HERE / "runc-oom-clamp.sh"}"  # host denies negative oom_score_adj'


def runtime_class(handler: str = NVIDIA_RUNTIME) -> dict:
    """The RuntimeClass the GPU operator creates (NVIDIA/gpu-operator assets/pre-requisites/0200_runtime_class.yaml,
    name and handler set by controllers/object_controls.go transformRuntimeClass to DefaultRuntimeClass "nvidia");
    fault runtime-handler-missing names another handler."""
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "handler": handler,
            "metadata": {"name": NVIDIA_RUNTIME, "labels": {"app.kubernetes.io/component": "gpu-operator"}}}


def build_images(bins: Bins) -> list[Path]:
    out = STATE / "images"
    b = bins.images
    busybox = Path(shutil.which("busybox") or "/bin/busybox")
    label = IMAGE_LABEL
    imgs = [
        imagebuild.Image(IMAGES["pause"], ["/pause"], files=[("pause", b / "pause")], labels=label),
        imagebuild.Image(IMAGES["plugin"], ["/usr/bin/nvidia-device-plugin"],
                         files=[("usr/bin/nvidia-device-plugin", b / "gpu-device-plugin")], labels=label),
        imagebuild.Image(IMAGES["probe"], ["/bin/sh"], files=imagebuild.busybox_files(busybox)
                         + [("usr/bin/nvidia-smi", b / "nvidia-smi")], labels=label),
        # Like NVIDIA's cuda-sample image: the default command runs the sample, as a non-root user.
        imagebuild.Image(IMAGES["vectoradd"], [], cmd=["/cuda-samples/vectorAdd"],
                         files=[("cuda-samples/vectorAdd", b / "vectoradd")], labels=label, user="1000:1000"),
    ]
    import nvidia

    imgs += nvidia.images(bins)
    archives = [imagebuild.write_archive(i, out / (i.name.rsplit("/", 1)[-1].replace(":", "_") + ".tar")) for i in imgs]
    return archives + [build_suite_image()]


def build_suite_image() -> Path:
    """The suite image, the local equivalent of manifests/Dockerfile: host Python 3.11, the venv's dependencies
    and the working tree's suite (imagebuild.suite_image); cheap when nothing changed. Also used by
    testing/e2e/test_incluster.py, so the Job it runs tests the current tree."""
    busybox = Path(shutil.which("busybox") or "/bin/busybox")
    try:
        img = imagebuild.suite_image(IMAGES["suite"], HERE.parent, busybox, labels=IMAGE_LABEL)
    except RuntimeError as e:
        raise BedError(f"building {IMAGES['suite']}: {e}") from None
    return imagebuild.write_archive(img, STATE / "images" / (img.name.rsplit("/", 1)[-1].replace(":", "_") + ".tar"))


def ctr(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return sh("ctr", "--address", str(CTRD_SOCK), "--namespace", "k8s.io", *args, check=check)


def import_images(archives: list[Path]) -> None:
    for a in archives:
        ctr("images", "import", str(a))
    say(f"imported {len(archives)} images into containerd: {', '.join(IMAGES.values())}")


def write_hardware(numa: int = 0, profile: str | None = None, off_bus: tuple[int, ...] = (), root: Path = GPU_SIM,
                   node: str = NODE_NAME, count: int = GPUS) -> dict:
    """The simulated GPUs: what NVML would enumerate on this host (device nodes + a description) and the PCI tree
    the kernel shows (write_pci_tree). `numa` is the NUMA node the GPUs physically sit on (what sysfs/nvidia-smi in
    a pod show); the mig-mixed profile partitions every GPU into MIG devices (what the MIG manager leaves behind);
    `off_bus` lists GPU indexes missing from the PCI tree only (fallen off the bus; hardware.json keeps them). `root`,
    `node`, `count`: another node's simulated hardware (the DRA node's, dranode.py). Returns the description."""
    import shapes

    profile, node_name = profile or shapes.current()[0], node
    (root / "dev").mkdir(parents=True, exist_ok=True)
    (root / "run").mkdir(parents=True, exist_ok=True)
    # The per-device info files derive from this hardware: drop the old ones. The simulated plugin writes them again
    # when it starts, the runtime stand-in from hardware.json when missing; NVIDIA's plugin writes none, so a file
    # left from an earlier shape (a fault's NUMA node) would otherwise outlive the change.
    for old in (root / "run").glob("*.json"):
        old.unlink(missing_ok=True)
    gpus = []
    for i in range(count):
        node = root / "dev" / f"nvidia{i}"
        if node.exists() and node.stat().st_rdev != os.makedev(NVIDIA_MAJOR, i):
            node.unlink()  # left by an older bed with other numbers
        if not node.exists():
            # NVIDIA's character major (NVIDIA/open-gpu-kernel-modules kernel-open/common/inc/nv-chardev-numbers.h,
            # NV_MAJOR_DEVICE_NUMBER 195), minor = the GPU's: no driver answers it here (open gives ENXIO), but
            # the devices cgroup rules apply to it as to a real GPU's.
            os.mknod(node, 0o666 | 0o020000, os.makedev(NVIDIA_MAJOR, i))
        gpus.append({"index": i, "minor": i, "uuid": f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node}/gpu{i}')}",
                     "name": GPU_PRODUCT, "pciBusId": f"00000000:{0x07 + i * 8:02X}:00.0", "numaNode": numa,
                     "memoryTotalMiB": 40960})
        if profile == "mig-mixed":
            gpus[-1]["migDevices"] = shapes.mig_devices(i, node_name)
    hardware = {"driverVersion": DRIVER, "cudaVersion": CUDA, "gpus": gpus}
    (root / "hardware.json").write_text(json.dumps(hardware, indent=1))
    write_pci_tree(root / "sys", gpus, off_bus)
    import nvidia

    if root == GPU_SIM:
        nvidia.install_driver(build(quiet=True).mocknvml / "libnvidia-ml.so.1", hardware)  # what NVML enumerates
    return hardware


# ---------------------------------------------------------------- the PCI tree (sysfs)

PCI_NVIDIA, PCI_INTEL = "0x10de", "0x8086"
PCI_A100_SXM4_40GB = "0x20b0"  # GA100 [A100 SXM4 40GB] (pci.ids)
PCI_CLASS_3D, PCI_CLASS_BRIDGE_OTHER, PCI_CLASS_ETHERNET = "0x030200", "0x068000", "0x020000"
VM_GPU_BDF = "0000:87:00.0"  # an A100 bound to vfio-pci for VM passthrough
PCI_ROOT = "pci0000:00"  # one host bridge holds every function (a real host has one per root complex)


def pci_bdf(bus_id: str) -> str:
    """NVML's pciBusId "00000000:07:00.0" -> sysfs' "0000:07:00.0" (4-digit domain, lower-case hex)."""
    domain, rest = bus_id.split(":", 1)
    return f"{int(domain, 16) & 0xFFFF:04x}:{rest.lower()}"


def write_pci_tree(sys_root: Path, gpus: list[dict], off_bus: tuple[int, ...] = ()) -> list[str]:
    """Writes the PCI functions of this host under `sys_root` as sysfs shows them and returns their BDFs: each
    function a directory devices/<PCI_ROOT>/<bdf>/ with vendor, device, class and numa_node ("0x10de\\n"...) and
    a `driver` link to bus/pci/drivers/<name> where one is bound, listed in bus/pci/devices/<bdf> by a relative
    symlink, as in /sys. Besides the GPUs (minus `off_bus`, bound to nvidia), the functions a real A100 HGX host
    has that are not GPUs for containers: an NVSwitch (bridge class), an Intel NIC, an SR-IOV virtual function of
    GPU 0 (vGPU hosts; same vendor and class as a GPU, with physfn -> GPU 0 and GPU 0's virtfn0 -> it), and one
    more A100 bound to vfio-pci, set aside for a VM as the GPU operator's vm-passthrough does (NVML, GFD and the
    plugin do not see it). A100 has no HDMI audio function. The tree is rewritten from scratch; `sys_root` itself
    is kept, so a hostPath mount of it sees the new tree."""
    sys_root.mkdir(parents=True, exist_ok=True)
    for child in sys_root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    devices, listing = sys_root / "devices" / PCI_ROOT, sys_root / "bus" / "pci" / "devices"
    devices.mkdir(parents=True)
    listing.mkdir(parents=True)

    def function(bdf: str, vendor: str, device: str, cls: str, numa: int, driver: str | None = None) -> Path:
        d = devices / bdf
        d.mkdir()
        for name, value in {"vendor": vendor, "device": device, "class": cls, "numa_node": str(numa)}.items():
            (d / name).write_text(f"{value}\n")
        if driver:
            (sys_root / "bus" / "pci" / "drivers" / driver).mkdir(parents=True, exist_ok=True)
            (d / "driver").symlink_to(Path("..", "..", "..", "bus", "pci", "drivers", driver))
        (listing / bdf).symlink_to(Path("..", "..", "..", "devices", PCI_ROOT, bdf))
        return d

    bdfs = []
    for g in gpus:
        if g["index"] in off_bus:
            continue
        bdf = pci_bdf(g["pciBusId"])
        d = function(bdf, PCI_NVIDIA, PCI_A100_SXM4_40GB, PCI_CLASS_3D, g["numaNode"], "nvidia")
        bdfs.append(bdf)
        if g["index"] == 0:
            vf = f"{bdf[:-1]}4"  # A100's VFs follow the physical function on its bus: 07:00.4, 07:00.5, ...
            (d / "sriov_totalvfs").write_text("16\n")
            (d / "sriov_numvfs").write_text("1\n")
            v = function(vf, PCI_NVIDIA, PCI_A100_SXM4_40GB, PCI_CLASS_3D, g["numaNode"])
            (v / "physfn").symlink_to(Path("..", bdf))
            (d / "virtfn0").symlink_to(Path("..", vf))
            bdfs.append(vf)
    function(VM_GPU_BDF, PCI_NVIDIA, PCI_A100_SXM4_40GB, PCI_CLASS_3D, 1, "vfio-pci")  # a VM's GPU
    function("0000:c1:00.0", PCI_NVIDIA, "0x1af1", PCI_CLASS_BRIDGE_OTHER, 0, "nvidia-nvswitch")  # NVSwitch (GA100)
    function("0000:41:00.0", PCI_INTEL, "0x1593", PCI_CLASS_ETHERNET, 0, "ice")  # Ethernet Controller E810-C
    return bdfs + [VM_GPU_BDF, "0000:c1:00.0", "0000:41:00.0"]


SERVICE_VIP = "10.0.0.1"  # the `kubernetes` Service's ClusterIP: the first address of --service-cluster-ip-range
VIP_RULE = ["-t", "nat", "PREROUTING", "-d", f"{SERVICE_VIP}/32", "-p", "tcp", "--dport", "443",
            "-m", "comment", "--comment", "gpuconform-kubernetes-service", "-j", "DNAT"]


def service_vip(ip: str, on: bool = True) -> None:
    """What kube-proxy does for the `kubernetes` Service, which in-cluster clients (client-go's InClusterConfig:
    KUBERNETES_SERVICE_HOST/PORT, set by the kubelet) dial: a DNAT of <VIP>:443 to the API server, for traffic
    from pods (routed through the host from the CNI bridge). The bed runs no kube-proxy; GFD and NFD's master,
    unmodified, need this."""
    # Any earlier rule of ours goes first (the node's address may have changed since), then this one is added.
    for line in sh("iptables", "-t", "nat", "-S", "PREROUTING", check=False).stdout.splitlines():
        if "gpuconform-kubernetes-service" in line and line.startswith("-A "):
            sh("iptables", "-t", "nat", "-D", *shlex.split(line)[1:], check=False)
    if on:
        sh("iptables", "-t", "nat", "-A", *VIP_RULE[2:], "--to-destination", f"{ip}:{PORTS['kube-apiserver']}")


def start_node(bins: Bins, ip: str, kubectl: Kubectl, policy: str = "single-numa-node") -> list[Path]:
    """Starts the device-plugin node's containerd and kubelet; returns the image archives it imported."""
    service_vip(ip)
    start("containerd", ["containerd", "--config", str(containerd_config())])
    wait_for("containerd socket", lambda: ctr("version", check=False).returncode == 0, 30, "containerd")
    archives = build_images(bins)
    import_images(archives)
    write_hardware()
    start_kubelet(bins, ip, kubectl, policy)
    return archives


def start_kubelet(bins: Bins, ip: str, kubectl: Kubectl, policy: str) -> None:
    write_kubelet_config(ip, policy)
    start("kubelet", [bins["kubelet"], f"--config={STATE / 'kubelet.yaml'}",
                      f"--kubeconfig={PKI / 'kubelet.kubeconfig'}", f"--hostname-override={NODE_NAME}",
                      f"--node-ip={ip}", f"--root-dir={KUBELET_ROOT}", "--v=1"])
    wait_for(f"node {NODE_NAME} Ready", lambda: node_ready(kubectl, NODE_NAME), 120, "kubelet")


def write_kubelet_config(ip: str, policy: str) -> None:
    (STATE / "kubelet.yaml").write_text(json.dumps(kubelet_config(ip, policy), indent=1))


def kubelet_config(ip: str, policy: str) -> dict:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(PKI / "ca.crt")}},
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(PKI / "kubelet-serving.crt"), "tlsPrivateKeyFile": str(PKI / "kubelet-serving.key"),
        "containerRuntimeEndpoint": f"unix://{CTRD_SOCK}",
        "cgroupDriver": "cgroupfs",
        # This host is cgroup v1; kubelet 1.35+ refuses it unless told otherwise (KEP-4569, kubernetes #134298).
        "failCgroupV1": False,
        "cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
        "topologyManagerPolicy": policy, "topologyManagerScope": "container",
        "failSwapOn": False, "clusterDomain": "cluster.local", "serializeImagePulls": False,
        # Images exist only locally: never garbage-collect them.
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "nodeStatusUpdateFrequency": "5s",
    }


def node_ready(kubectl: Kubectl, name: str) -> bool:
    out = kubectl("get", "node", name, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}", check=False)
    return out.strip() == "True"


def gfd_labels(count: int, product: str = GPU_PRODUCT) -> dict[str, str]:
    """GPU Feature Discovery's labels for whole, unshared GPUs; shapes.gfd_labels adds those of a pool shape. No
    nvidia.com/mig.strategy: GFD writes none under the plugin's default strategy `none` (NVIDIA/k8s-device-plugin
    v0.19.3 internal/lm/strategy.go migStrategyLabeler)."""
    return {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": str(count),
            "nvidia.com/gpu.product": product.replace(" ", "-"), "nvidia.com/gpu.replicas": "1",
            "nvidia.com/gpu.sharing-strategy": "none",
            "nvidia.com/gpu.memory": "40960", "nvidia.com/gpu.family": "ampere",
            "nvidia.com/cuda.driver-version.full": DRIVER, "nvidia.com/cuda.runtime-version.full": CUDA}


DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"


OPERATOR_NS, VALIDATOR = "gpu-operator", "nvidia-operator-validator"


def operator_objects(failing: str = "") -> list[dict]:
    """The GPU operator's validator DaemonSet, as far as the suite sees it: init containers that validate the
    stack, then a Ready pod. `failing` makes the driver validation fail with that message (F16,
    ERROR-OPERATOR-NOT-READY)."""
    labels = {"app": VALIDATOR, "app.kubernetes.io/part-of": "gpuconform-localcluster"}
    restricted = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    validate = f"echo '{failing}' | tee /dev/termination-log; exit 1" if failing else "echo driver validation passed"
    return [
        # The operator's namespace admits its privileged DaemonSets (device plugin, toolkit, driver).
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NS, "labels": {
            "pod-security.kubernetes.io/enforce": "privileged"}}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": VALIDATOR, "namespace": OPERATOR_NS,
                                                                    "labels": labels},
         "spec": {"selector": {"matchLabels": {"app": VALIDATOR}},
                  "template": {"metadata": {"labels": labels}, "spec": {
                      "securityContext": {"runAsNonRoot": True, "runAsUser": 65534,
                                          "seccompProfile": {"type": "RuntimeDefault"}},
                      "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                      "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                          "nodeSelectorTerms": [{"matchExpressions": [{"key": k, "operator": "In", "values": ["true"]}]}
                                                for k in ("nvidia.com/gpu.present",
                                                          "feature.node.kubernetes.io/pci-10de.present")]}}},
                      "terminationGracePeriodSeconds": 1,
                      "initContainers": [{"name": "driver-validation", "image": IMAGES["probe"],
                                          "imagePullPolicy": "IfNotPresent", "command": ["sh", "-c", validate],
                                          "securityContext": restricted}],
                      "containers": [{"name": "nvidia-operator-validator", "image": IMAGES["probe"],
                                      "imagePullPolicy": "IfNotPresent",
                                      "command": ["sh", "-c", "echo all validations are successful; exec sleep 2147483647"],
                                      "securityContext": restricted}]}}}},
    ]


def validator_state(kubectl: Kubectl) -> str:
    """'ready', 'failing' (init container failed at least once) or '' for the validator pod on the GPU node."""
    pods = kubectl.json("get", "pods", "-n", OPERATOR_NS, "-l", f"app={VALIDATOR}",
                        "--field-selector", f"spec.nodeName={NODE_NAME}")["items"]
    for p in pods:
        if p["metadata"].get("deletionTimestamp"):
            continue
        st = p.get("status", {})
        if any(c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions", [])):
            return "ready"
        if any(cs.get("restartCount", 0) > 0 or (cs.get("state") or {}).get("terminated", {}).get("exitCode")
               for cs in st.get("initContainerStatuses") or []):
            return "failing"
    return ""


def deploy_operator(kubectl: Kubectl, failing: str = "") -> None:
    kubectl.apply(*operator_objects(failing))
    want = "failing" if failing else "ready"
    wait_for(f"the GPU operator validator on {NODE_NAME} to be {want}", lambda: validator_state(kubectl) == want,
             90, "kubelet")


def deploy_plugin(kubectl: Kubectl, config: dict | None = None, host_dir: str = DEVICE_PLUGIN_DIR) -> None:
    """Labels the node and applies the plugin and its companions for the bed's current profile, layout and stack.
    On the nvidia stack GFD writes the GPU labels (through NFD's master); the bed writes only the labels of the
    parts it stands in for (NFD's worker, the operator), after removing any it wrote for the simulated stack."""
    import nvidia
    import shapes

    profile, layout = shapes.current()
    labels = shapes.gfd_labels(profile, layout)
    if shapes.current_stack() == "nvidia":
        nvidia.apply_nfd(kubectl)
        own = {k: v for k, v in labels.items() if k in (shapes.NFD_NVIDIA, shapes.OPERATOR_PRESENT)}
        managed = nvidia.nfd_managed_labels(kubectl)
        drop = [k for k in {*labels, *shapes.stale_label_keys({})} if k not in own and k not in managed]
        kubectl("label", "node", NODE_NAME, "--overwrite", *(f"{k}={v}" for k, v in own.items()),
                *(f"{k}-" for k in drop if k != shapes.OPERATOR_PRESENT or layout != "operator"))
    else:
        nvidia.remove_gfd(kubectl)
        kubectl("label", "node", NODE_NAME, "--overwrite", *(f"{k}={v}" for k, v in labels.items()),
                *(f"{k}-" for k in shapes.stale_label_keys(labels)))
    kubectl.apply(*shapes.stack_plugin_objects(layout, config, host_dir))
    kubectl.apply(*shapes.stack_companion_objects(layout))


def advertised(kubectl: Kubectl, node: str = NODE_NAME) -> dict[str, tuple[str, str]]:
    """{resource: (capacity, allocatable)} of the node's nvidia.com/* resources."""
    st = kubectl.json("get", "node", node)["status"]
    return {k: (v, st.get("allocatable", {}).get(k, "")) for k, v in st.get("capacity", {}).items()
            if k.startswith("nvidia.com/")}


def healthy_counts() -> dict[str, tuple[str, str]]:
    import shapes

    return {r: (str(n), str(n)) for r, n in shapes.resources(shapes.current()[0]).items()}


def allocatable(kubectl: Kubectl, node: str) -> tuple[str, str]:
    """(capacity, allocatable) of the profile's first resource (the plain profile: nvidia.com/gpu)."""
    first = next(iter(healthy_counts()))
    return advertised(kubectl, node).get(first, ("", ""))


def registration_metric(kubectl: Kubectl, node: str = NODE_NAME, resource: str = RESOURCE) -> float | None:
    text = kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/metrics", check=False)
    for line in text.splitlines():
        if line.startswith("kubelet_device_plugin_registration_total") and f'resource_name="{resource}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def wait_plugin_registered(kubectl: Kubectl) -> None:
    want = healthy_counts()
    wait_for(f"{NODE_NAME} to advertise {', '.join(f'{r}={n[0]}' for r, n in want.items())} (plugin registered)",
             lambda: {r: v for r, v in advertised(kubectl, NODE_NAME).items() if v[0] not in ("0", "")} == want,
             120, "kubelet")
    wait_for("kubelet_device_plugin_registration_total via the node proxy",
             lambda: all(registration_metric(kubectl, NODE_NAME, r) is not None for r in want), 60, "kubelet")


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
    import shapes  # noqa: PLC0415 - shapes imports this module

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
        import dranode

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
    import faults  # noqa: PLC0415 - faults imports this module

    fault = faults.FAULTS.get(read_state().get("fault") or "")
    if not (fault and fault.delete_runtime_class):  # a bed restarted under runtime-class-missing keeps it missing
        kubectl.apply(runtime_class((fault and fault.runtime_handler) or NVIDIA_RUNTIME))
    import shapes

    if not read_state().get("profile"):  # a fresh bed starts in the shape the environment asks for
        profile, layout = shapes.current()
        stack = shapes.wanted_stack()
        write_state(profile=profile, layout=layout, base_profile=profile, base_layout=layout, base_stack=stack,
                    stack=shapes.stack_for(profile, stack))
    archives = start_node(bins, ip, kubectl, policy=read_state().get("topology_policy", "single-numa-node"))
    if not read_state().get("fault"):
        deploy_plugin(kubectl)
        wait_plugin_registered(kubectl)
        deploy_operator(kubectl)
    import dranode

    if dranode.wanted() and dranode.is_up(kubectl):
        say(f"DRA node {dranode.NODE} already up")
    elif dranode.wanted():
        write_state(dra=True)
        dranode.start(bins, ip, kubectl, archives)
    start_kwok(bins, kubectl)
    mem = cluster_memory_mib()
    say(f"cluster up in {time.monotonic() - T0:.0f}s; processes use {mem} MiB RSS; "
        f"export KUBECONFIG={KUBECONFIG}")


def down() -> None:
    import dranode

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


def read_state() -> dict:
    try:
        return json.loads((STATE / "state.json").read_text())
    except FileNotFoundError:
        return {}


def write_state(**kv) -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    (STATE / "state.json").write_text(json.dumps({**read_state(), **kv}))


def main(argv: list[str]) -> int:
    import faults  # noqa: PLC0415 - faults imports this module

    import shapes  # noqa: PLC0415 - shapes imports this module

    cmds = {"up": up, "down": down, "status": status, "faults": faults.list_faults,
            "fault-clear": faults.clear}
    try:
        if len(argv) == 2 and argv[0] == "fault":
            return faults.apply(argv[1]) or 0
        if argv[:1] == ["dra"] and len(argv) in (2, 3) and argv[1] in ("up", "down", "fault", "shape"):
            import dranode

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
            return shapes.switch(argv[1], argv[2], *argv[3:])
        if argv[:1] == ["restart-kubelet"] and len(argv) <= 3 and argv[2:] in ([], ["--during-run"]):
            return faults.restart_kubelet(float(argv[1]) if len(argv) >= 2 else 0, during_run=argv[2:] != [])
        if argv[:1] == ["cut-access"] and len(argv) == 2:
            return faults.cut_access(float(argv[1]))
        if len(argv) != 1 or argv[0] not in cmds:
            raise BedError(f"usage: cluster.py {{{'|'.join(cmds)}|fault NAME|bed PROFILE LAYOUT|"
                           "restart-kubelet [DELAY_S [--during-run]]|cut-access DELAY_S}}")
        return cmds[argv[0]]() or 0
    except BedError as e:
        print(f"localcluster: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    # Run through the imported module so faults.py (which imports `cluster`) raises the same BedError class.
    import cluster as _self

    sys.exit(_self.main(sys.argv[1:]))
