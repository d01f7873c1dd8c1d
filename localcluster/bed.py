"""The test bed's shared primitives: where things live (paths, ports, images, the node's name and GPU count), the
bed's state file, its binaries (build.sh), processes it starts by pid, `sh` and `kubectl`, waiting, and its PKI.

Every other module of the bed imports this one and nothing here imports them (localcluster/README.md, "Modules").
Importing it reads only the environment: no process is started and the cluster is not contacted.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


HERE = Path(__file__).resolve().parent
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

NODE_NAME = os.environ.get("GPUCONFORM_NODE_NAME", "gpu-node-0")  # the device-plugin node (gpunode.py)
DRA_NODE = "gpu-node-dra"  # the DRA node (dranode.py)
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
DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"


T0 = time.monotonic()


class BedError(Exception):
    """A failure with a one-line message; cluster.py's main() prints it and exits non-zero."""


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
    nvidia: Path  # NVIDIA's plugin and GFD (build.sh NVIDIA_BIN; nvidia.py)
    mocknvml: Path  # the mock libnvidia-ml.so.1 (build.sh MOCKNVML_LIB; mocknvml/)
    containerd2: Path  # containerd 2.x and its runc shim for the DRA node (build.sh CONTAINERD2_BIN; dranode.py)
    nfd: Path  # node-feature-discovery's master and CRDs (build.sh NFD_BIN; nvidia.py)

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
                      Path(dirs["CONTAINERD2_BIN"]), Path(dirs["NFD_BIN"])))
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


# ---------------------------------------------------------------- state (.localcluster/state.json)

def read_state() -> dict:
    try:
        return json.loads((STATE / "state.json").read_text())
    except FileNotFoundError:
        return {}


def write_state(**kv) -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    (STATE / "state.json").write_text(json.dumps({**read_state(), **kv}))


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


# ---------------------------------------------------------------- shared by both nodes

def node_ready(kubectl: Kubectl, name: str) -> bool:
    out = kubectl("get", "node", name, "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}", check=False)
    return out.strip() == "True"


def unready_stack_pods(kubectl: Kubectl, nodes: list[str]) -> list[str]:
    """Pods of the bed's GPU stack (every pod not of a suite run) on the real `nodes` that are not Ready: after a
    restart of the bed their containers start again, and a run begun before they are Ready judges a bed still
    coming up."""
    pods = kubectl.json("get", "pods", "-A", "-l", f"!{SUITE_POD_LABEL}").get("items", [])
    out = []
    for p in pods:
        if (p.get("spec") or {}).get("nodeName") not in nodes or (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        ready = [c.get("status") for c in (p.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
        if ready != ["True"]:
            out.append(f"{p['metadata']['namespace']}/{p['metadata']['name']}")
    return out


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


# The label every suite pod carries (gpuconform/pods.py RUN_LABEL): the bed watches for it, nothing more.
SUITE_POD_LABEL = "gpuconform.dev/run"


def wait_for_suite_pod(kubectl: Kubectl, node: str, timeout: float = 600) -> None:
    """Returns once a pod of a suite run that was not yet on `node` when this was called is there: the start of the
    next run there, however fast the suite is (the faults that land during a run count from it). A run already on
    the node, such as the last row's pods still terminating, does not count: a fault fired into it would land
    before the run it is meant for (and could hit a driver still starting)."""
    label = SUITE_POD_LABEL.replace(".", "\\.")  # jsonpath escapes the dots in a label key

    def runs() -> set[str]:
        return set(kubectl("get", "pods", "-A", "-l", SUITE_POD_LABEL, "--field-selector", f"spec.nodeName={node}",
                           "-o", f"jsonpath={{.items[*].metadata.labels.{label}}}").split())
    before = runs()
    wait_for(f"a new suite run's pod ({SUITE_POD_LABEL}) on {node}", lambda: bool(runs() - before), timeout)
