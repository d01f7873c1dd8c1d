"""The test bed's shared primitives: where things live (paths, ports, images, the node's name and GPU count), the
bed's state file, its binaries (build.sh), processes it starts by pid, `sh` and `kubectl`, waiting, and its PKI.

Every other module of the bed imports this one and nothing here imports them (localcluster/README.md, "Modules").
Importing it reads only the environment: no process is started and the cluster is not contacted.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
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

class Bins:
    """Where build.sh put each group of the bed's binaries, by attribute (`bins.k8s`, `bins.containerd2`, ...; the
    directories below) and by Kubernetes or kwok binary name (`bins["kubelet"]`).

    build.sh says each group as soon as it is ready (at once when cached). So on a cold build asking for a group
    that is still compiling waits for it: cluster.py up starts the control plane as soon as the Kubernetes binaries are
    built, the device-plugin node once its images' binaries are, and the DRA node once containerd 2 is, rather than
    waiting minutes for the last of them. A group the build failed to make raises BedError."""

    GROUPS = {
        "k8s": "K8S_BIN",
        "kwok": "KWOK_BIN",
        "images": "IMAGES_BIN",  # the simulated plugin and DRA driver, nvidia-smi, vector-add, pause (images/)
        "tools": "K8S_TOOLS_BIN",  # the bed's own Go tools (tools/k8s/cmd)
        "nvidia": "NVIDIA_BIN",  # NVIDIA's plugin and GFD (nvidia.py)
        "mocknvml": "MOCKNVML_LIB",  # the mock libnvidia-ml.so.1 (mocknvml/)
        "containerd2": "CONTAINERD2_BIN",  # containerd 2.x and its runc shim for the DRA node (dranode.py)
        "nfd": "NFD_BIN",  # node-feature-discovery's master and CRDs (nvidia.py)
    }

    def __init__(self, dirs: dict[str, Path] | None = None, proc: subprocess.Popen | None = None,
                 on_ready: Callable[[str, Path], None] | None = None):
        # on_ready(group, dir): called once per group, in the caller's thread, when it is first asked for
        self._dirs = {k: Path(v) for k, v in (dirs or {}).items()}
        self._proc, self._rc, self._on_ready = proc, None if proc else 0, on_ready
        self._cond = threading.Condition()
        self._seen: set[str] = set()
        if proc:
            threading.Thread(target=self._read, name="build.sh", daemon=True).start()

    @classmethod
    def at(cls, **dirs: Path) -> "Bins":
        """Bins already built, by attribute name (tests)."""
        return cls({cls.GROUPS[k]: v for k, v in dirs.items()})

    def _read(self) -> None:
        assert self._proc and self._proc.stdout
        for line in self._proc.stdout:
            name, _, d = line.strip().partition("=")
            if d:
                with self._cond:
                    self._dirs[name] = Path(d)
                    self._cond.notify_all()
        rc = self._proc.wait()
        with self._cond:
            self._rc = rc
            self._cond.notify_all()

    def group(self, name: str) -> Path:
        """The directory of build.sh group `name` (K8S_BIN, ...), waiting while the build still makes it."""
        with self._cond:
            if name not in self._dirs and self._rc is None:
                say(f"waiting for build.sh's {name} (its [build] lines say what it is compiling)")
            self._cond.wait_for(lambda: name in self._dirs or self._rc is not None)
            if name not in self._dirs:
                raise BedError(f"building the test-bed binaries failed: no {name} (see the [build] lines above)")
            d = self._dirs[name]
        if self._on_ready and name not in self._seen:
            self._seen.add(name)
            self._on_ready(name, d)
        return d

    def __getattr__(self, attr: str) -> Path:
        if attr.startswith("_") or attr not in Bins.GROUPS:
            raise AttributeError(attr)
        return self.group(Bins.GROUPS[attr])

    def __getitem__(self, name: str) -> str:
        return str((self.kwok if name == "kwok" else self.k8s) / name)

    def finish(self) -> None:
        """Waits for build.sh to end; raises BedError when any of its steps failed (cluster.py up, at its end)."""
        with self._cond:
            self._cond.wait_for(lambda: self._rc is not None)
            if self._rc:
                raise BedError("building the test-bed binaries failed (see the [build] lines above)")

    def stop(self) -> None:
        """Stops a build still running (build.sh stops its jobs on TERM): at exit, so that a failed `up` leaves no
        compiler behind. What was built stays cached."""
        if self._proc and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(30)
            except subprocess.TimeoutExpired:
                self._proc.kill()


_BINS: list[Bins] = []


def build(quiet: bool = False) -> Bins:
    """Starts build.sh (a no-op when cached) and returns where the binaries are, each group as it becomes ready
    (Bins); `quiet` hides its progress. Once per process."""
    if _BINS:
        return _BINS[0]
    # A bed keeps the Kubernetes release it was started with (state k8s_version), whatever K8S_VERSION says later:
    # a fault that restarts the kubelet must not bring another release's kubelet.
    env = dict(os.environ)
    if read_state().get("k8s_version"):
        env["K8S_VERSION"] = read_state()["k8s_version"]
    proc = subprocess.Popen([str(HERE / "build.sh")], stdout=subprocess.PIPE, text=True, env=env,
                            stderr=subprocess.DEVNULL if quiet else None)

    def record_release(name: str, d: Path) -> None:
        if name == "K8S_BIN" and not read_state().get("k8s_version") and STATE.exists():
            write_state(k8s_version=d.name.split("-", 1)[0])

    _BINS.append(Bins(proc=proc, on_ready=record_release))
    atexit.register(_BINS[0].stop)
    return _BINS[0]


# ---------------------------------------------------------------- the suite's virtualenv

_VENV: list[tuple[threading.Thread, dict]] = []


def start_venv() -> None:
    """Installs the suite's virtualenv when it is missing or stale (`make .venv/.installed`, the Makefile's recipe)
    beside the bed's Go build: nothing before the suite image needs it (gpunode.build_suite_image waits for it,
    venv_ready). cluster.py up starts it first, which takes the install's 15-30 s off a fresh checkout's `make demo`."""
    if _VENV:
        return
    make = ["make", "--no-print-directory", "-s", "-C", str(HERE.parent)]
    try:
        if subprocess.run([*make, "-q", ".venv/.installed"], stdout=subprocess.DEVNULL).returncode == 0:
            return  # up to date
    except FileNotFoundError:
        raise BedError("make is not installed; the bed installs the suite's virtualenv with `make .venv/.installed`")
    say("installing the suite's virtualenv (.venv) beside the build")
    result: dict = {}

    def run() -> None:
        result["rc"] = subprocess.run([*make, ".venv/.installed"]).returncode

    t = threading.Thread(target=run, name="venv", daemon=True)
    t.start()
    _VENV.append((t, result))
    atexit.register(t.join)  # never leave a half-installed virtualenv behind a failed `up`


def venv_ready() -> None:
    """Waits for the virtualenv install start_venv began, if any; raises BedError when it failed."""
    if not _VENV:
        return
    t, result = _VENV[0]
    if t.is_alive():
        say("waiting for the suite's virtualenv install to finish")
        t.join()
    if result.get("rc", 1):
        raise BedError("installing the suite's virtualenv failed (`make .venv/.installed`; its output is above)")


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


def pod_ready(pod: dict) -> bool:
    """Whether a pod (its API object) has its Ready condition True."""
    return [c.get("status") for c in (pod.get("status") or {}).get("conditions") or []
            if c.get("type") == "Ready"] == ["True"]


def unready_stack_pods(kubectl: Kubectl, nodes: list[str]) -> list[str]:
    """Pods of the bed's GPU stack (every pod not of a suite run) on the real `nodes` that are not Ready: after a
    restart of the bed their containers start again, and a run begun before they are Ready judges a bed still
    coming up."""
    pods = kubectl.json("get", "pods", "-A", "-l", f"!{SUITE_POD_LABEL}").get("items", [])
    out = []
    for p in pods:
        if (p.get("spec") or {}).get("nodeName") not in nodes or (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if not pod_ready(p):
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
