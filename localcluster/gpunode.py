"""The device-plugin node (gpu-node-0 by default): the real kubelet over Debian's containerd with the nvidia runtime
stand-in, its simulated GPUs (hardware.json, device nodes, the PCI tree), the plugin of its shape and stack with
its companions, the GPU operator's validator, and what it advertises. `switch` turns a running node into another
shape (shapes.py has the shapes; `cluster.py bed PROFILE LAYOUT [STACK]`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import imagebuild
import nvidia
import shapes
from bed import (CTRD_ROOT, CTRD_SOCK, CTRD_STATE, CNI_BRIDGE, CUDA, DEVICE_PLUGIN_DIR, DRIVER, GPU_PRODUCT, GPU_SIM,
                 GPUS, HERE, IMAGE_LABEL, IMAGES, KUBELET_ROOT, NODE_NAME, NVIDIA_MAJOR, NVIDIA_RUNTIME, PKI, POD_CIDR,
                 RESOURCE, RUNTIME_SIM, STATE, BedError, Bins, Kubectl, build, node_ip, node_ready, pid_of, pod_ready,
                 read_state, say, sh, start, stop, venv_ready, wait_for, write_state)
from controlplane import service_vip


# ---------------------------------------------------------------- containerd, the nvidia runtime, images

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
    imgs += nvidia.images(bins)
    archives = [imagebuild.write_archive(i, out / (i.name.rsplit("/", 1)[-1].replace(":", "_") + ".tar")) for i in imgs]
    return archives + [build_suite_image()]


def build_suite_image() -> Path:
    """The suite image, the local equivalent of manifests/Dockerfile: host Python 3.11, the venv's dependencies
    and the working tree's suite (imagebuild.suite_image); cheap when nothing changed. Also used by
    testing/e2e/test_incluster.py, so the Job it runs tests the current tree."""
    venv_ready()  # cluster.py up installs it beside the build (bed.start_venv)
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
    tag_by_digest(ctr, IMAGES["suite"])
    say(f"imported {len(archives)} images into containerd: {', '.join(IMAGES.values())}")


def tag_by_digest(ctr_fn, image: str) -> str:
    """Names the imported `image` also `<repo>@<its manifest digest>` in the containerd `ctr_fn` talks to, so a pod
    may name it by digest, as the admission policy's rootImages asks of the node probe (an import records only the
    name the archive gives, and the CRI resolves a digest reference only by that name; the OCI-layout archives give
    every node's containerd the same digest: imagebuild.py); returns that reference."""
    ref = image_by_digest(ctr_fn, image)
    ctr_fn("images", "tag", "--force", image, ref)
    return ref


def image_by_digest(ctr_fn=ctr, image: str = IMAGES["suite"]) -> str:
    """`<repo>@sha256:<hex>` of the imported `image` (its manifest digest as containerd holds it)."""
    out = ctr_fn("images", "ls", f"name=={image}").stdout.splitlines()[1:]
    if not out:
        raise BedError(f"image {image} is not in containerd: run `make cluster-up`")
    digest = next(f for f in out[0].split() if f.startswith("sha256:"))
    return image.rsplit(":", 1)[0] + "@" + digest


# ---------------------------------------------------------------- the simulated GPUs

def write_hardware(numa: int = 0, profile: str | None = None, off_bus: tuple[int, ...] = (), root: Path = GPU_SIM,
                   node: str = NODE_NAME, count: int = GPUS) -> dict:
    """The simulated GPUs: what NVML would enumerate on this host (device nodes + a description) and the PCI tree
    the kernel shows (write_pci_tree). `numa` is the NUMA node the GPUs physically sit on (what sysfs/nvidia-smi in
    a pod show); the mig-mixed profile partitions every GPU into MIG devices (what the MIG manager leaves behind);
    `off_bus` lists GPU indexes missing from the PCI tree only (fallen off the bus; hardware.json keeps them). `root`,
    `node`, `count`: another node's simulated hardware (the DRA node's, dranode.py). Returns the description."""
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


# ---------------------------------------------------------------- the node

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


# ---------------------------------------------------------------- operator validator, plugin, advertised counts

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
        if pod_ready(p):
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
    kubectl.apply(*stack_plugin_objects(layout, config, host_dir))
    kubectl.apply(*stack_companion_objects(layout))


def advertised(kubectl: Kubectl, node: str = NODE_NAME) -> dict[str, tuple[str, str]]:
    """{resource: (capacity, allocatable)} of the node's nvidia.com/* resources."""
    st = kubectl.json("get", "node", node)["status"]
    return {k: (v, st.get("allocatable", {}).get(k, "")) for k, v in st.get("capacity", {}).items()
            if k.startswith("nvidia.com/")}


def healthy_counts() -> dict[str, tuple[str, str]]:
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



# ---------------------------------------------------------------- the stack's plugin; switching the shape

def stack_plugin_objects(layout: str, config: dict | None = None, host_dir: str = DEVICE_PLUGIN_DIR) -> list[dict]:
    """The current stack's plugin objects for the current profile (`config` replaces the healthy one)."""
    profile = shapes.current()[0]
    if shapes.current_stack() == "nvidia":
        return nvidia.plugin_objects(layout, config if config is not None else shapes.nvidia_config(profile), host_dir,
                                     image=nvidia.plugin_image_name(nvidia.plugin_version(read_state())))
    return shapes.plugin_objects(layout, config or shapes.plugin_config(profile), host_dir)


def stack_companion_objects(layout: str, crashing: bool = False) -> list[dict]:
    """NVIDIA's GFD on the nvidia stack; the stand-in companions on the simulated one."""
    if shapes.current_stack() == "nvidia" and not crashing:
        return nvidia.gfd_objects(layout, shapes.nvidia_config(shapes.current()[0]))
    return shapes.companion_objects(layout, crashing)


def restart_plugin(kubectl: Kubectl, config: dict | None = None, host_dir: str = DEVICE_PLUGIN_DIR) -> None:
    """Applies the plugin (new config or host directory) and replaces its pod, waiting until the new one runs."""
    layout = shapes.current()[1]
    lay = shapes.LAYOUT_OBJECTS[layout]
    kubectl.apply(*stack_plugin_objects(layout, config, host_dir))
    kubectl("delete", "pod", "-n", lay.namespace, "-l", shapes.selector(layout), "--wait=true", "--grace-period=5")

    def started() -> bool:
        for p in shapes.plugin_pods(kubectl, layout):
            for cs in p.get("status", {}).get("containerStatuses", []):
                if cs.get("state", {}).get("running") or cs.get("restartCount", 0) > 0:
                    return True
        return False

    wait_for("the plugin pod to start with its new config", started, 90, "kubelet")


def _drop_gpu_resources(kubectl: Kubectl) -> None:
    """Removes every nvidia.com/* resource from node status: what a node that never had this plugin config shows.
    With the device checkpoint wiped and no plugin registered, the kubelet never writes them back."""
    st = kubectl.json("get", "node", NODE_NAME)["status"]
    patch = [{"op": "remove", "path": f"/status/{k}/{r.replace('/', '~1')}"}
             for k in ("capacity", "allocatable") for r in st.get(k, {}) if r.startswith("nvidia.com/")]
    if patch:
        kubectl("patch", "node", NODE_NAME, "--subresource=status", "--type=json", "-p", json.dumps(patch))


def switch(profile: str, layout: str, stack: str | None = None) -> int:
    """Turns the running bed's real node into `profile` with the plugin installed as `layout`, on `stack` (default:
    the stack the bed was started with; mig-mixed: sim)."""
    shapes.check(profile, layout)
    if stack is not None and stack not in shapes.STACKS:
        raise BedError(f"unknown plugin stack {stack!r} (STACK=): one of {', '.join(shapes.STACKS)}")
    if not pid_of("kube-apiserver") or not pid_of("kubelet"):
        raise BedError("the local cluster is not running; run `make cluster-up` first")
    bins = build(quiet=True)
    kubectl, ip = Kubectl(bins), node_ip()
    old_profile, old_layout = shapes.current()
    old_stack, new_stack = shapes.current_stack(), shapes.stack_for(profile, stack)
    for kind, ns, name in shapes.other_layout_objects(layout):
        kubectl("delete", kind, "-n", ns, name, "--ignore-not-found", "--cascade=foreground", "--wait=true")
    if new_stack != old_stack:  # the other stack's plugin must be gone before this one registers the resource
        lay = shapes.LAYOUT_OBJECTS[layout]
        for name in (lay.daemonset, *(n for n, _ in lay.companions)):
            kubectl("delete", "daemonset", "-n", lay.namespace, name, "--ignore-not-found", "--cascade=foreground",
                    "--wait=true")
        write_state(stack=new_stack)
    if profile != old_profile:
        # A different resource set: stop the plugin, restart the kubelet with no device checkpoint and clear the
        # old resources from node status, so no stale key of the previous shape is left (as on a re-imaged node).
        lay = shapes.LAYOUT_OBJECTS[layout]
        kubectl("delete", "daemonset", "-n", lay.namespace, lay.daemonset, "--ignore-not-found",
                "--cascade=foreground", "--wait=true")
        stop("kubelet")
        (KUBELET_ROOT / "device-plugins" / "kubelet_internal_checkpoint").unlink(missing_ok=True)
        write_hardware(profile=profile)
        _drop_gpu_resources(kubectl)
        write_state(profile=profile, layout=layout)
        start_kubelet(bins, ip, kubectl, read_state().get("topology_policy", "single-numa-node"))
    write_state(profile=profile, layout=layout)
    write_hardware(profile=profile)
    deploy_plugin(kubectl)
    restart_plugin(kubectl)
    wait_plugin_registered(kubectl)
    deploy_operator(kubectl)  # the validator follows the node's GPU labels, which differ per layout
    say(f"bed is now profile {profile}, layout {layout}, {new_stack} plugin (was {old_profile}, {old_layout}, "
        f"{old_stack}): plugin {shapes.LAYOUT_OBJECTS[layout].daemonset} in {shapes.LAYOUT_OBJECTS[layout].namespace}, "
        "advertising " + ", ".join(f"{r}={n}" for r, n in shapes.resources(profile).items()))
    return 0


# ---------------------------------------------------------------- NVIDIA's plugin release (rollout rehearsal)

PLUGIN_REGISTERED = "Registered device plugin for"  # internal/plugin/server.go (v0.18.2 and v0.19.3), after Register
# The kubelet's answer to a registration at a socket it still has an endpoint for (kubernetes v1.37.2
# pkg/kubelet/cm/devicemanager/manager.go PluginConnected), which the plugin logs and retries every 30 s. Seen when
# a registration failed while the old plugin was still connected: the failed client's cleanup (plugin/v1beta1
# handler.go connectClient -> deregisterClient, by socket path) also drops the old client, so its end never
# removes its endpoint, and every later plugin at that path is refused until the kubelet restarts.
PLUGIN_REFUSED = "device plugin already connected"


def plugin_version(version: str) -> int:
    """Rolls the NVIDIA plugin DaemonSet of the running bed to NVIDIA's release `version` (nvidia.PLUGIN_TAGS) as a
    `helm upgrade` of its chart to that release does: the pod template's image changes (image.tag; the chart's
    DaemonSet template is the same at both releases for the bed's values) and the DaemonSet controller replaces the
    pod (RollingUpdate). The release's binary is built first when missing (`build.sh nvidia-prev`) and its image
    imported into the node's containerd, so the new pod starts from it (imagePullPolicy IfNotPresent, no registry).
    The release is kept in the state: later applies of the plugin (faults, `bed`, `up` in place) keep it. GFD stays
    at nvidia.TAG. Waits until the new pod runs, has registered with the kubelet and the node advertises its GPUs."""
    nvidia.check_tag(version)
    if not pid_of("kube-apiserver") or not pid_of("kubelet"):
        raise BedError("the local cluster is not running; run `make cluster-up` first")
    if shapes.current_stack() != "nvidia":
        profile, layout = shapes.current()
        raise BedError(f"the node runs the simulated plugin (profile {profile}, layout {layout}), not NVIDIA's: switch "
                       f"it first (`make bed PROFILE=plain LAYOUT={layout} STACK=nvidia`; mig-mixed always runs the "
                       "simulated one)")
    bins = build(quiet=True)
    kubectl = Kubectl(bins)
    layout = shapes.current()[1]
    lay = shapes.LAYOUT_OBJECTS[layout]
    image = nvidia.plugin_image_name(version)
    was = kubectl("get", "daemonset", "-n", lay.namespace, lay.daemonset, "-o",
                  "jsonpath={.spec.template.spec.containers[0].image}", check=False).strip() or "none"
    img = nvidia.plugin_image(version, nvidia.release_bins(version))
    archive = imagebuild.write_archive(img, STATE / "images" / (img.name.rsplit("/", 1)[-1].replace(":", "_") + ".tar"))
    ctr("images", "import", str(archive))
    say(f"imported {image} into {NODE_NAME}'s containerd")
    write_state(plugin_version=version)
    kubectl.apply(*stack_plugin_objects(layout))
    kubectl("rollout", "status", "daemonset", "-n", lay.namespace, lay.daemonset, "--timeout=180s")

    def new_pod() -> dict | None:
        for p in shapes.plugin_pods(kubectl, layout):
            if p["spec"]["containers"][0]["image"] == image and p.get("status", {}).get("phase") == "Running":
                return p
        return None

    log = {"text": ""}

    def registered_or_refused() -> bool:
        p = new_pod()
        if p is None:
            return False
        log["text"] = kubectl("logs", "-n", lay.namespace, p["metadata"]["name"], check=False)
        return PLUGIN_REGISTERED in log["text"] or log["text"].count(PLUGIN_REFUSED) >= 2

    wait_for(f"NVIDIA's plugin {version} to register with the kubelet", registered_or_refused, 120, "kubelet")
    if PLUGIN_REGISTERED not in log["text"]:
        raise BedError(f"the kubelet refuses NVIDIA's plugin {version} at every try ('{PLUGIN_REFUSED}'): it still "
                       "holds the endpoint of an earlier plugin at that socket, which it keeps until it restarts "
                       "(`python3 localcluster/cluster.py restart-kubelet`, then plugin-version again); the "
                       f"DaemonSet runs {image}")
    wait_plugin_registered(kubectl)
    pod = new_pod() or {"metadata": {"name": "?"}}
    say(f"NVIDIA device plugin is now {version} (was {was}): DaemonSet {lay.namespace}/{lay.daemonset} rolled to "
        f"{image}, pod {pod['metadata']['name']} registered, {NODE_NAME} advertising "
        + ", ".join(f"{r}={n[0]}" for r, n in advertised(kubectl, NODE_NAME).items()))
    return 0
