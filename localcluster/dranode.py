"""The bed's DRA node: a second real kubelet (`gpu-node-dra`) whose GPUs a DRA driver serves, beside the device-plugin
node, so one run certifies both allocation paths (issue 17, docs/dra.md).

It is a second host as far as Kubernetes can tell: its own containerd (2.x, built from its Go module: the kubelet
passes DRA devices to the runtime only as CRI CDIDevices, which Debian's containerd 1.6 ignores), its own kubelet
(port 10260, cgroup root /gpuconform-dra, no CPU manager) and its own mount namespace, in which the host paths a
node's pods and drivers use are this node's: /var/lib/kubelet, /var/log/pods, /var/lib/gpu-sim (its simulated GPUs:
hardware.json, device nodes, PCI tree) and /var/run/cdi are bind mounts of DRA_DIRS. Its GPUs are served by the
simulated DRA driver (images/cmd/gpu-dra-driver, a DaemonSet as NVIDIA's DRA driver is installed), published
under gpu.nvidia.com as NVIDIA's driver publishes (images/internal/dra), in one of the shapes SHAPES: by default
the GPU operator v26.7.0's DRA stack as it renders (its node labels, its DeviceClass without extendedResourceName,
its two admin-access operands running on the node). The DRA faults (`dra fault NAME`: the rows of faulttable.py
DRA_FAULTS, made by set_fault) break the driver, kube-controller-manager, kube-scheduler or admission, or add API
objects (a DeviceTaintRule; a second offer of the device-plugin node's GPUs).

Opt-in at start-up with GPUCONFORM_BED_DRA=1 (cluster.py up).
"""
from __future__ import annotations

import json
import os
import shlex
import ssl
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import bed
import controlplane
import gpunode
import imagebuild
from bed import IMAGES, LOGS, PKI, STATE, BedError, Bins, Kubectl, say, sh
from faulttable import (DRA_FAULTS, AdminAccessPolicy, ApiObject, ControllersOff, DraDriver, DraDriverGone,
                        SignalDriverDuringRun,
                        SchedulerGates)

NODE = bed.DRA_NODE
GPUS = 3
BASE = Path("/var/lib/gpuconform-dra")
# host path in the node's mount namespace -> where its content lives on the host
DRA_DIRS = {"/var/lib/kubelet": BASE / "kubelet", "/var/log/pods": BASE / "pods-logs",
            str(bed.GPU_SIM): BASE / "gpu-sim", "/run/cdi": BASE / "cdi"}
CTRD_ROOT, CTRD_STATE = BASE / "containerd", Path("/run/gpuconform/containerd-dra")
CTRD_SOCK = CTRD_STATE / "containerd.sock"
KUBELET_PORT, HEALTHZ_PORT = 10260, 10258
CGROUP_ROOT = "/gpuconform-dra"


@dataclass(frozen=True)
class Install:
    """How the driver's kubelet plugin is installed: its namespace, DaemonSet, ServiceAccount (and ClusterRole of
    that name), the DaemonSet's and its pods' labels and its selector."""
    namespace: str
    daemonset: str
    service_account: str
    labels: dict[str, str]
    selector: dict[str, str]


# The GPU operator v26.7.0's DRA stack (manifests/state-dra-driver/0500_daemonset.yaml: in the operator's namespace,
# serviceAccountName nvidia-dra-driver-kubeletplugin) and the driver's own chart at kubernetes-sigs/
# dra-driver-nvidia-gpu HEAD 95932046 (deployments/helm/dra-driver-nvidia-gpu/templates/kubeletplugin.yaml and
# _helpers.tpl, released as dra-driver-nvidia-gpu into the namespace of that name, as its demo/clusters/kind script
# installs it).
OPERATOR_INSTALL = Install("gpu-operator", "nvidia-dra-driver-kubelet-plugin", "nvidia-dra-driver-kubeletplugin",
                           {"app.kubernetes.io/name": "nvidia-dra-driver",
                            "app.kubernetes.io/component": "nvidia-dra-driver-kubelet-plugin",
                            "app": "nvidia-dra-driver-kubelet-plugin"}, {"app": "nvidia-dra-driver-kubelet-plugin"})
CHART_INSTALL = Install("dra-driver-nvidia-gpu", "dra-driver-nvidia-gpu-kubelet-plugin",
                        "dra-driver-nvidia-gpu-service-account-kubeletplugin",
                        {"app.kubernetes.io/name": "dra-driver-nvidia-gpu", "app.kubernetes.io/instance": "dra-driver-nvidia-gpu",
                         "dra-driver-nvidia-gpu-component": "kubelet-plugin"},
                        {"dra-driver-nvidia-gpu-component": "kubelet-plugin"})
# where an older bed installed it (NVIDIA/k8s-dra-driver-gpu's chart before the move): removed on a shape change
LEGACY_INSTALL = Install("nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-kubelet-plugin",
                         "nvidia-dra-driver-gpu-kubelet-plugin", {}, {})
IMAGES_DRA = {"driver": "localhost/gpuconform/gpu-dra-driver:sim"}
# The GPU operator's labels for a node on its DRA stack (NVIDIA/gpu-operator v26.7.0 controllers/state_manager.go
# l.78-81, l.128-165 gpuClusterStateLabels: gpu.deploy.{driver,dra-driver,dra-validator,dcgm-dra,dcgm-exporter-dra}
# =true; controllers/nodelabeling_controller.go l.262-270 updateGPUStateLabels: the device-plugin stack's own keys,
# gpu.deploy.device-plugin among them, are removed, never written "false"), plus NFD's PCI label and the operator's
# presence label.
LABELS = {"nvidia.com/gpu.present": "true", "feature.node.kubernetes.io/pci-10de.present": "true",
          "nvidia.com/gpu.deploy.driver": "true", "nvidia.com/gpu.deploy.dra-driver": "true",
          "nvidia.com/gpu.deploy.dra-validator": "true", "nvidia.com/gpu.deploy.dcgm-dra": "true",
          "nvidia.com/gpu.deploy.dcgm-exporter-dra": "true"}
# The driver's own chart beside the GPU operator's ClusterPolicy stack, whose device plugin is switched off on the
# node by its deploy label (the ClusterPolicy way: nvidia.com/gpu.deploy.device-plugin=false).
HELM_LABELS = {"nvidia.com/gpu.present": "true", "feature.node.kubernetes.io/pci-10de.present": "true",
               "nvidia.com/gpu.deploy.device-plugin": "false"}
# How the driver is installed (`dra shape NAME`; state key dra_shape):
# - operator (default): the GPU operator v26.7.0's DRA stack (GPUCluster) as it renders: LABELS, the driver's
#   DaemonSet selecting nvidia.com/gpu.deploy.dra-driver, its DeviceClass gpu.nvidia.com WITHOUT
#   extendedResourceName (NVIDIA/gpu-operator v26.7.0 manifests/state-dra-driver/0400_deviceclass-gpu.yaml), so the
#   suite names the node plain dra, and its two admin-access operands on the node (operator_objects): the DRA
#   validator (one GPU) and dcgm-exporter (all GPUs), whose claims the scheduler does not count as allocated, so
#   every GPU stays free for tenants;
# - chart-override: the driver's own chart (kubernetes-sigs/dra-driver-nvidia-gpu deployments/helm/
#   dra-driver-nvidia-gpu) rendered with resources.gpus.enabled and gpuResourcesEnabledOverride=true (the chart
#   refuses the GPU class beside a device plugin otherwise: templates/validation.yaml l.33-42), whose DeviceClass
#   (templates/deviceclass-gpu.yaml) on resource.k8s.io/v1 puts gpu.nvidia.com behind `extendedResourceName:
#   nvidia.com/gpu`: the suite names the node dra-extended-resource. Installed as helm-plain is (HELM_LABELS, the
#   chart's kubelet plugin pinned to the node). Until issue 28 this was the `operator` shape;
# - helm-plain: the same chart install with a DeviceClass without extendedResourceName (as the chart renders it
#   for resource.k8s.io/v1beta1 and v1beta2, and as drivers without the bridge publish): plain dra;
# - static-mig: the operator's DRA stack (as `operator`: labels, class without extendedResourceName, the two
#   operands) on a node whose GPUs are in MIG mode with their MIG devices made (the mig-mixed hardware: 3g.20gb +
#   2 x 1g.5gb per GPU): the driver publishes the MIG devices only, so no GPU is left for gpu.nvidia.com and the
#   suite's checks claim mig.nvidia.com. The operator's two operands ask gpu.nvidia.com, which offers nothing
#   here, so they stay Pending, as v26.7.0's would (its templates have no MIG variant, and its DRA stack runs no
#   MIG manager: the mig-manager deploy key is among those it removes).
SHAPES = ("operator", "chart-override", "helm-plain", "static-mig")
OPERATOR_SHAPES = ("operator", "static-mig")
EXTENDED_SHAPES = ("chart-override",)  # DeviceClass gpu.nvidia.com with extendedResourceName nvidia.com/gpu
# The GPU operator's namespace (the Helm chart's default; the bed's validator lives there too, gpunode.OPERATOR_NS)
# and its two admin-access operands on a DRA node (operator_objects).
OPERATOR_NS = gpunode.OPERATOR_NS
VALIDATOR_DS, VALIDATOR_TEMPLATE = "nvidia-dra-validator", "nvidia-dra-validator-gpu"
DCGM_DS, DCGM_TEMPLATE = "nvidia-dcgm-exporter-dra", "nvidia-dcgm-exporter-admin"
ADMIN_LABEL = "resource.kubernetes.io/admin-access"


def shape() -> str:
    return bed.read_state().get("dra_shape") or SHAPES[0]


def node_labels() -> dict[str, str]:
    """The DRA node's labels in its shape; the ones of the other shape are removed (`key-`)."""
    return LABELS if shape() in OPERATOR_SHAPES else HELM_LABELS


def wanted() -> bool:
    return os.environ.get("GPUCONFORM_BED_DRA", "") == "1" or bool(bed.read_state().get("dra"))


def ctr(*args: str, check: bool = True):
    return sh("ctr", "--address", str(CTRD_SOCK), "--namespace", "k8s.io", *args, check=check)


def containerd_config(bins: Bins) -> Path:
    """containerd 2.x config (version 3): CRI with CDI from /var/run/cdi (the node's own, see DRA_DIRS), runc and
    the `nvidia` handler (plain runc: on a DRA node the toolkit injects through CDI), the bed's CNI network."""
    d = STATE / "containerd-dra"
    d.mkdir(parents=True, exist_ok=True)
    cfg = d / "config.toml"
    runc = gpunode.runc_binary()
    cfg.write_text(f"""# containerd 2.x for the gpuconform bed's DRA node; see localcluster/dranode.py
version = 3
root = "{CTRD_ROOT}"
state = "{CTRD_STATE}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.erofs",
                    "io.containerd.internal.v1.tracing", "io.containerd.nri.v1.nri"]
[grpc]
  address = "{CTRD_SOCK}"
[debug]
  address = "{CTRD_STATE}/debug.sock"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{IMAGES['pause']}"
[plugins."io.containerd.cri.v1.runtime"]
  enable_cdi = true
  cdi_spec_dirs = ["/var/run/cdi"]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        {runc}
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.{bed.NVIDIA_RUNTIME}]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.{bed.NVIDIA_RUNTIME}.options]
        SystemdCgroup = false
        {runc}
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "{STATE / 'containerd' / 'net.d'}"
""")
    return cfg


def namespace_script(bins: Bins, cfg: Path) -> str:
    """sh run by `unshare --mount`: this node's directories over the host paths, then containerd 2.x (whose shim
    must be found first on PATH)."""
    lines = ["set -e", "mount --make-rprivate /"]
    for target, source in DRA_DIRS.items():
        lines += [f"mkdir -p {shlex.quote(str(source))} {shlex.quote(target)}",
                  f"mount --bind {shlex.quote(str(source))} {shlex.quote(target)}"]
    lines.append(f"export PATH={shlex.quote(str(bins.containerd2))}:$PATH")
    lines.append(f"exec {shlex.quote(str(bins.containerd2 / 'containerd'))} --config {shlex.quote(str(cfg))}")
    return "\n".join(lines)


def kubelet_config(ip: str) -> Path:
    """The DRA node's kubelet. syncFrequency 2s (default 1m): when a pod's claims cannot be prepared the kubelet
    emits FailedPrepareDynamicResources and returns from SyncPod without an error (kubernetes v1.37.2
    pkg/kubelet/kuberuntime/kuberuntime_manager.go:1720-1728), so it tries again only at the next periodic sync.
    On this 2-core bed the node authorizer often does not know a just-scheduled pod and its claim yet when the
    kubelet first fetches the claim ("no relationship found between node"), and the pod then started 60-80 s late
    (the latency check failed a healthy run with startP99 79 s). On a real cluster the same race costs the same
    minute, and the latency check reports it; docs/dra.md says so. With 5 s a pod that hit the race started 7 s
    after its creation, and two of three such pods failed a healthy run's startP50 (5 s) right after a driver
    re-install (seen at the chart-override shape); 2 s keeps a raced pod within it."""
    cfg = gpunode.kubelet_config(ip, "none")
    cfg.update({"syncFrequency": "2s", "containerRuntimeEndpoint": f"unix://{CTRD_SOCK}", "port": KUBELET_PORT, "healthzPort": HEALTHZ_PORT,
                "cgroupRoot": CGROUP_ROOT, "cpuManagerPolicy": "none", "tlsCertFile": str(PKI / "kubelet-dra-serving.crt"),
                "tlsPrivateKeyFile": str(PKI / "kubelet-dra-serving.key")})
    cfg.pop("reservedSystemCPUs", None)
    path = STATE / "kubelet-dra.yaml"
    path.write_text(json.dumps(cfg, indent=1))
    return path


def install(name: str = "") -> Install:
    """The driver's install in shape `name` (default: the current shape)."""
    return OPERATOR_INSTALL if (name or shape()) in OPERATOR_SHAPES else CHART_INSTALL


# How the driver's DaemonSet rolls out (issue 30's rollout rehearsal; images/internal/dra/upgrade.go says what
# the driver does). Healthy, it upgrades seamlessly (kubernetes PR #129832, kubelet support since 1.33): the driver
# starts its kubelet plugin with kubeletplugin.RollingUpdate(its pod's UID, POD_UID from the downward API), so its
# sockets are the pod's own, and the DaemonSet starts the new pod beside the old one before deleting it (maxSurge 1,
# maxUnavailable 0, as k8s.io/dynamic-resource-allocation v0.37.2 kubeletplugin/draplugin.go RollingUpdate asks):
# the kubelet hands over between two registered instances and the node's slices stay. The driver's startupProbe
# (`gpu-dra-driver -probe`) keeps the new pod un-Ready until the kubelet has registered it, so the old pod is deleted
# only then (without it, seen on the bed: the old pod went 0.4 s before the kubelet had the new one; the slices
# stayed, by the kubelet's 30 s grace below, but a prepare in that moment had no driver). Under the driver's knob
# NO_SEAMLESS it is a driver without that support: one fixed socket, the old pod deleted before the new one starts
# (maxUnavailable 1, no surge), and on SIGTERM it deletes the node's slices, so the node has none until the new pod
# publishes. NVIDIA's own driver (kubernetes-sigs/dra-driver-nvidia-gpu HEAD 95932046) has no seamless-upgrade
# support: no RollingUpdate, its chart's kubeletPlugin.updateStrategy maxUnavailable 100% without surge
# (deployments/helm/dra-driver-nvidia-gpu/values.yaml), its Shutdown stops the helper without deleting slices (the
# kubelet wipes them 30 s after the last instance is gone unless a new one registers first). So the bed's healthy
# driver is the seamless one a driver can be, ahead of NVIDIA's; the knob is closer to NVIDIA's but for the delete.
NO_SEAMLESS = "no-seamless-upgrade"
SEAMLESS_UPDATE = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
REPLACE_UPDATE = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}


def update_strategy(knobs: str) -> dict:
    """The driver DaemonSet's updateStrategy for its knobs (GPU_SIM_DRA_FAULTS, comma-separated)."""
    return REPLACE_UPDATE if NO_SEAMLESS in {k.strip() for k in knobs.split(",")} else SEAMLESS_UPDATE


def driver_objects(inst: Install | None = None) -> list[dict]:
    """NVIDIA's DRA driver as the shape installs its kubelet plugin (install(): a DaemonSet, privileged, with the
    kubelet's plugin directories and the CDI directory from the host; on the operator's DRA-stack nodes by their
    deploy label, else pinned to the node), its RBAC, and the DeviceClasses gpu.nvidia.com and mig.nvidia.com
    (NVIDIA/gpu-operator v26.7.0 manifests/state-dra-driver/0400_deviceclass-gpu.yaml, 0410_deviceclass-mig.yaml;
    the chart's templates/deviceclass-gpu.yaml, deviceclass-mig.yaml; docs/vendors.md)."""
    inst = inst or install()
    labels = inst.labels
    knobs = bed.read_state().get("dra_faults", "")
    host = {"plugins-registry": "/var/lib/kubelet/plugins_registry",
            "plugins": "/var/lib/kubelet/plugins", "cdi": "/var/run/cdi", "gpu-sim": str(bed.GPU_SIM)}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": inst.namespace, "labels": {
            "pod-security.kubernetes.io/enforce": "privileged"}}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": inst.service_account,
                                                                    "namespace": inst.namespace}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": inst.daemonset},
         "rules": [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
                    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]},
                   {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get", "list", "watch"]},
                   {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": inst.daemonset},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": inst.daemonset},
         "subjects": [{"kind": "ServiceAccount", "name": inst.service_account, "namespace": inst.namespace}]},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
         "spec": {"selectors": [{"cel": {"expression":
                  "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}],
                  **({"extendedResourceName": "nvidia.com/gpu"} if shape() in EXTENDED_SHAPES else {})}},
        # MIG devices are asked for by their own class (the chart's mig.nvidia.com; the driver's type attribute)
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "mig.nvidia.com"},
         "spec": {"selectors": [{"cel": {"expression":
                  "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"}}]}},
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": inst.daemonset, "namespace": inst.namespace,
                                                                    "labels": labels},
         "spec": {"selector": {"matchLabels": inst.selector}, "updateStrategy": update_strategy(knobs),
                  "template": {"metadata": {"labels": labels}, "spec": {
             "serviceAccountName": inst.service_account, "priorityClassName": "system-node-critical",
             "nodeSelector": ({"nvidia.com/gpu.deploy.dra-driver": "true"} if shape() in OPERATOR_SHAPES
                              else {"kubernetes.io/hostname": NODE}),
             "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
             "terminationGracePeriodSeconds": 5,
             "containers": [{"name": "gpus", "image": IMAGES_DRA["driver"], "imagePullPolicy": "IfNotPresent",
                             "command": ["/usr/bin/gpu-dra-driver"],
                             "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                                     # the pod's UID for kubeletplugin.RollingUpdate (SEAMLESS_UPDATE)
                                     {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                                     {"name": "GPU_SIM_DRA_FAULTS", "value": knobs}],
                             # Ready once the kubelet registered it (SEAMLESS_UPDATE), as NVIDIA's chart's
                             # startupProbe (grpc, 1 s, 600 tries) gates its pod on its sockets answering
                             "startupProbe": {"exec": {"command": ["/usr/bin/gpu-dra-driver", "-probe"]},
                                              "periodSeconds": 1, "failureThreshold": 120},
                             "securityContext": {"privileged": True},
                             "volumeMounts": [{"name": n, "mountPath": p} for n, p in host.items()]}],
             "volumes": [{"name": n, "hostPath": {"path": p, "type": "DirectoryOrCreate"}} for n, p in host.items()],
         }}}},
    ]


def operator_objects() -> list[dict]:
    """The GPU operator v26.7.0's two admin-access operands on a node of its DRA stack, as its GPUCluster renders
    them (NVIDIA/gpu-operator v26.7.0; the golden renderings internal/state/testdata/golden/gpucluster-dra-
    validation.yaml and gpucluster-dcgm-exporter-embedded.yaml), with the bed's probe-tools image for theirs:
    - the DRA validator (manifests/state-dra-validation/0400_resourceclaimtemplate.yaml, 0500_daemonset.yaml): claim
      template nvidia-dra-validator-gpu asking ExactCount 1 of gpu.nvidia.com with adminAccess; its pods carry
      app=nvidia-operator-validator (the label the operator's upgrade gate selects, and the suite's
      operator.validatorSelector); the init container runs `nvidia-smi -L` through the claim;
    - dcgm-exporter (manifests/state-dcgm-exporter/0400_resourceclaimtemplate.yaml, 0700_daemonset.yaml): claim
      template nvidia-dcgm-exporter-admin asking allocationMode All of gpu.nvidia.com with adminAccess; here it
      only lists its GPUs and sleeps (no DCGM, no metrics port, so no probes).
    The API server accepts adminAccess only in a namespace labelled resource.kubernetes.io/admin-access=true
    (kubernetes v1.37.2 pkg/registry/resource/utils.go AuthorizedForAdmin), which the operator's GPUCluster
    controller sets on its namespace (controllers/gpucluster_controller.go l.177-188; set_operands). The scheduler
    does not count admin-access results as allocated (pkg/scheduler/framework/plugins/dynamicresources/
    allocateddevices.go), so tenants still get every GPU."""
    probe = IMAGES["probe"]
    toleration = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]  # the chart's daemonsets

    def template(name: str, request: str, exactly: dict) -> dict:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": OPERATOR_NS},
                "spec": {"spec": {"devices": {"requests": [{"name": request, "exactly": {
                    "deviceClassName": "gpu.nvidia.com", **exactly, "adminAccess": True}}]}}}}

    val = {"app.kubernetes.io/name": VALIDATOR_DS, "app.kubernetes.io/component": VALIDATOR_DS}
    dcgm = {"app": DCGM_DS}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": VALIDATOR_DS, "namespace": OPERATOR_NS,
                                                                    "labels": val}},
        template(VALIDATOR_TEMPLATE, "validation-gpu", {"allocationMode": "ExactCount", "count": 1}),
        {"apiVersion": "apps/v1", "kind": "DaemonSet",
         "metadata": {"name": VALIDATOR_DS, "namespace": OPERATOR_NS, "labels": {**val, "app": VALIDATOR_DS}},
         "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": VALIDATOR_DS}},
                  "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
                  "template": {"metadata": {"labels": {**val, "app": gpunode.VALIDATOR}}, "spec": {
                      "priorityClassName": "system-node-critical", "serviceAccountName": VALIDATOR_DS,
                      "nodeSelector": {"nvidia.com/gpu.deploy.dra-validator": "true"},
                      "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                          "nodeSelectorTerms": [{"matchExpressions": [
                              {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]}]}}},
                      "tolerations": toleration,
                      "terminationGracePeriodSeconds": 1,  # not upstream's (default 30 s): sh ignores SIGTERM
                      "resourceClaims": [{"name": "validation-gpu", "resourceClaimTemplateName": VALIDATOR_TEMPLATE}],
                      "initContainers": [{"name": "gpu-validation", "image": probe, "imagePullPolicy": "IfNotPresent",
                                          "command": ["sh", "-c", "nvidia-smi -L"],
                                          "resources": {"claims": [{"name": "validation-gpu"}]}}],
                      "containers": [{"name": VALIDATOR_DS, "image": probe, "imagePullPolicy": "IfNotPresent",
                                      "command": ["sh", "-c", "echo all validations are successful; "
                                                  "while true; do sleep 86400; done"]}]}}}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DCGM_DS, "namespace": OPERATOR_NS}},
        template(DCGM_TEMPLATE, "admin-gpus", {"allocationMode": "All"}),
        {"apiVersion": "apps/v1", "kind": "DaemonSet",
         "metadata": {"name": DCGM_DS, "namespace": OPERATOR_NS, "labels": dcgm},
         "spec": {"selector": {"matchLabels": dcgm}, "updateStrategy": {"type": "RollingUpdate"},
                  "template": {"metadata": {"labels": dcgm}, "spec": {
                      "priorityClassName": "system-node-critical", "serviceAccountName": DCGM_DS,
                      "automountServiceAccountToken": True,
                      "nodeSelector": {"nvidia.com/gpu.deploy.dcgm-exporter-dra": "true"},
                      "tolerations": toleration, "terminationGracePeriodSeconds": 1,
                      "resourceClaims": [{"name": "admin-gpus", "resourceClaimTemplateName": DCGM_TEMPLATE}],
                      "containers": [{"name": DCGM_DS, "image": probe, "imagePullPolicy": "IfNotPresent",
                                      "command": ["sh", "-c", "nvidia-smi -L; while true; do sleep 86400; done"],
                                      "env": [{"name": "DCGM_EXPORTER_LISTEN", "value": ":9400"},
                                              {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
                                              {"name": "NODE_NAME", "valueFrom": {"fieldRef": {
                                                  "fieldPath": "spec.nodeName"}}},
                                              {"name": "KUBERNETES_ENABLE_DRA", "value": "true"}],
                                      "securityContext": {"privileged": True},
                                      "resources": {"claims": [{"name": "admin-gpus"}]},
                                      "volumeMounts": [{"name": "pod-gpu-resources", "readOnly": True,
                                                        "mountPath": "/var/lib/kubelet/pod-resources"}]}],
                      "volumes": [{"name": "pod-gpu-resources",
                                   "hostPath": {"path": "/var/lib/kubelet/pod-resources"}}]}}}},
    ]


def operand_pods(kubectl: Kubectl) -> list[dict]:
    """The two operands' pods (any node, any phase; not being deleted)."""
    out = []
    for sel in (f"app.kubernetes.io/name={VALIDATOR_DS}", f"app={DCGM_DS}"):
        out += [p for p in kubectl.json("get", "pods", "-n", OPERATOR_NS, "-l", sel)["items"]
                if not p["metadata"].get("deletionTimestamp")]
    return out


def operands_running(kubectl: Kubectl) -> bool:
    """Both operands Running (the validator Ready) on the node, each with its admin-access claim allocated."""
    pods = [p for p in operand_pods(kubectl) if p["spec"].get("nodeName") == NODE]
    if len(pods) != 2 or any((p.get("status") or {}).get("phase") != "Running" for p in pods):
        return False
    names = {s.get("resourceClaimName") for p in pods for s in (p.get("status") or {}).get("resourceClaimStatuses") or []}
    claims = {c["metadata"]["name"]: c for c in kubectl.json("get", "resourceclaims", "-n", OPERATOR_NS)["items"]}
    return len(names - {None}) == 2 and all(
        (claims.get(n) or {}).get("status", {}).get("allocation") and all(
            r.get("adminAccess") for r in claims[n]["status"]["allocation"]["devices"]["results"]) for n in names)


def set_operands(kubectl: Kubectl, on: bool, restart: bool = False) -> None:
    """The GPU operator's admin-access operands on the node (on; `restart`: their pods made again, so that their
    claims are allocated from what the driver publishes now) or gone, with the namespace's admin-access label.
    On the operator shape, waits until both run with their claims allocated; on static-mig they stay Pending
    (operator_objects)."""
    if not on:
        for obj in reversed(operator_objects()):
            kubectl("delete", obj["kind"].lower(), "-n", OPERATOR_NS, obj["metadata"]["name"], "--ignore-not-found",
                    "--wait=false", check=False)
        kubectl("label", "namespace", OPERATOR_NS, f"{ADMIN_LABEL}-", check=False)
        return
    kubectl.apply(gpunode.operator_objects()[0])  # the operator's namespace (the bed's validator's)
    # a label, not an apply: gpunode.deploy_operator re-applies the namespace (gpunode.operator_objects) without it
    kubectl("label", "namespace", OPERATOR_NS, "--overwrite", f"{ADMIN_LABEL}=true")
    if restart:
        for sel in (f"app.kubernetes.io/name={VALIDATOR_DS}", f"app={DCGM_DS}"):
            kubectl("delete", "pods", "-n", OPERATOR_NS, "-l", sel, "--ignore-not-found", "--wait=true")
    kubectl.apply(*operator_objects())
    if shape() != "operator":
        say(f"GPU operator DRA operands applied on {NODE}: they ask gpu.nvidia.com, which offers nothing in shape "
            f"{shape()}, so they stay Pending")
        return
    bed.wait_for(f"the GPU operator's {VALIDATOR_DS} and {DCGM_DS} Running on {NODE} with admin-access claims",
                 lambda: operands_running(kubectl), 120, "kubelet-dra")
    say(f"GPU operator DRA operands on {NODE}: {VALIDATOR_DS} (1 GPU) and {DCGM_DS} (all GPUs), admin access")


def images(bins: Bins) -> list[Path]:
    img = imagebuild.Image(IMAGES_DRA["driver"], ["/usr/bin/gpu-dra-driver"],
                           files=[("usr/bin/gpu-dra-driver", bins.images / "gpu-dra-driver")], labels=bed.IMAGE_LABEL)
    return [imagebuild.write_archive(img, STATE / "images" / "gpu-dra-driver_sim.tar")]


def cgroup_root() -> None:
    """The kubelet's cgroupRoot must exist in every hierarchy (cgroup v1 here); a new cpuset cgroup starts with no
    CPUs or memory nodes, so it gets the root's."""
    base = Path("/sys/fs/cgroup")
    for hier in base.iterdir():
        if hier.is_symlink() or not hier.is_dir():
            continue
        d = hier / CGROUP_ROOT.strip("/")
        d.mkdir(exist_ok=True)
        for f in ("cpuset.cpus", "cpuset.mems"):
            if (hier / f).exists() and not (d / f).read_text().strip():
                (d / f).write_text((hier / f).read_text())


def write_hardware() -> None:
    """The DRA node's simulated GPUs: whole, or in MIG mode with their MIG devices made (shape static-mig)."""
    gpunode.write_hardware(root=DRA_DIRS[str(bed.GPU_SIM)], node=NODE, count=GPUS,
                           profile="mig-mixed" if shape() == "static-mig" else "plain")


def start(bins: Bins, ip: str, kubectl: Kubectl, archives: list[Path]) -> None:
    for source in DRA_DIRS.values():
        source.mkdir(parents=True, exist_ok=True)
    cgroup_root()
    write_hardware()
    if not (PKI / "kubelet-dra.crt").exists():
        bed.issue_cert("kubelet-dra-serving", f"/CN={NODE}", f"DNS:{NODE},DNS:localhost,IP:127.0.0.1,IP:{ip}")
        bed.issue_cert("kubelet-dra", f"/O=system:nodes/CN=system:node:{NODE}", None)
        bed.write_kubeconfig(PKI / "kubelet-dra.kubeconfig", "kubelet-dra",
                             f"https://{ip}:{bed.PORTS['kube-apiserver']}")
    cfg = containerd_config(bins)
    bed.start("containerd-dra", ["unshare", "--mount", "sh", "-c", namespace_script(bins, cfg)])
    bed.wait_for("containerd-dra socket", lambda: ctr("version", check=False).returncode == 0, 30,
                 "containerd-dra")
    for a in archives + images(bins):
        ctr("images", "import", str(a))
    gpunode.tag_by_digest(ctr, IMAGES["suite"])
    pid = bed.pid_of("containerd-dra")
    bed.start("kubelet-dra", ["nsenter", f"--mount=/proc/{pid}/ns/mnt", "--", bins["kubelet"],
                              f"--config={kubelet_config(ip)}", f"--kubeconfig={PKI / 'kubelet-dra.kubeconfig'}",
                              f"--hostname-override={NODE}", f"--node-ip={ip}", "--v=1"])
    bed.wait_for(f"node {NODE} Ready", lambda: bed.node_ready(kubectl, NODE), 120, "kubelet-dra")
    label_node(kubectl)
    kubectl.apply(*driver_objects())
    bed.wait_for(f"the DRA driver's ResourceSlice for {NODE}", lambda: slice_devices(kubectl) > 0, 90,
                 "kubelet-dra")
    say(f"DRA node {NODE} up in shape {shape()}: {slice_devices(kubectl)} GPU(s) published under gpu.nvidia.com")
    set_operands(kubectl, shape() in OPERATOR_SHAPES)


# What the DRA faults (faulttable.py DRA_FAULTS; the comments there say what each breaks and why) make beside the
# driver: the admin-access-label fault's MutatingAdmissionPolicy, and the API objects of ApiObject steps (the
# taint-rule fault's DeviceTaintRule, the offered-twice fault's ResourceSlice), made with kubectl and deleted on clear.
ADMIN_POLICY = "gpuconform-bed-admin-access-everywhere"
TAINT_RULE, OFFERED_TWICE = "gpuconform-bed-withhold-last-gpu", "gpuconform-bed-offered-twice"
API_OBJECTS = ("taint-rule", "offered-twice")  # faulttable.ApiObject names
# What the driver's health knobs (DraDriver steps) do, said when a fault sets one
HEALTH_KNOBS = {"taint-unhealthy": "the driver reports its last GPU Unhealthy and publishes it tainted out of service",
                "report-unhealthy": "the driver reports its last GPU Unhealthy and leaves it in service"}


def _hardware(root: Path) -> dict:
    return json.loads((root / "hardware.json").read_text())


def taint_rule_object() -> dict:
    """The taint-rule fault's DeviceTaintRule: the DRA node's last GPU (gpu-<minor>, in its pool named after the
    node) tainted NoSchedule by an admin."""
    last = _hardware(DRA_DIRS[str(bed.GPU_SIM)])["gpus"][-1]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": TAINT_RULE},
            "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": NODE, "device": f"gpu-{last['minor']}"},
                     "taint": {"key": "example.com/maintenance", "value": "withheld-by-admin",
                               "effect": "NoSchedule"}}}


def offered_twice_object() -> dict:
    """The offered-twice fault's ResourceSlice: gpu-node-0's GPUs as NVIDIA's driver would publish them there
    (images/internal/dra: gpu-<minor>, type gpu, the same uuid, product, versions and PCI bus ID; one slice, no
    counters: its DynamicMIG gate off)."""
    hw = _hardware(bed.GPU_SIM)
    node = bed.NODE_NAME

    def ver(v: str) -> dict:
        return {"version": v if v.count(".") != 1 else v + ".0"}

    devices = [{"name": f"gpu-{g['minor']}",
                "attributes": {"type": {"string": "gpu"}, "uuid": {"string": g["uuid"]},
                               "productName": {"string": g["name"]}, "brand": {"string": "Nvidia"},
                               "architecture": {"string": "Ampere"}, "cudaComputeCapability": ver("8.0"),
                               "driverVersion": ver(hw["driverVersion"]), "cudaDriverVersion": ver(hw["cudaVersion"]),
                               "resource.kubernetes.io/pciBusID": {"string": gpunode.pci_bdf(g["pciBusId"])}},
                "capacity": {"memory": {"value": f"{g['memoryTotalMiB']}Mi"}}} for g in hw["gpus"]]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": OFFERED_TWICE},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def set_api_fault(kubectl: Kubectl, fault: str) -> None:
    """The API objects (API_OBJECTS): the one named `fault` made, the others deleted."""
    for name, kind, make in (("taint-rule", "devicetaintrule", taint_rule_object),
                             ("offered-twice", "resourceslice", offered_twice_object)):
        if name == fault:
            kubectl.apply(make())
        else:
            kubectl("delete", kind, TAINT_RULE if name == "taint-rule" else OFFERED_TWICE, "--ignore-not-found",
                    check=False)


def admin_policy_objects() -> list[dict]:
    """The admin-access-label fault's MutatingAdmissionPolicy and its binding."""
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
         "metadata": {"name": ADMIN_POLICY},
         "spec": {"failurePolicy": "Fail", "reinvocationPolicy": "Never",
                  "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                          "operations": ["CREATE"], "resources": ["namespaces"]}]},
                  "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": (
                      'Object{metadata: Object.metadata{labels: {"resource.kubernetes.io/admin-access": "true"}}}')}}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
         "metadata": {"name": ADMIN_POLICY}, "spec": {"policyName": ADMIN_POLICY}},
    ]


def set_admin_policy(kubectl: Kubectl, on: bool) -> None:
    """The admin-access-label fault's policy in place (on) or gone; on: waits until a new namespace gets the label
    (a policy's binding takes effect within about a second)."""
    if not on:
        for obj in reversed(admin_policy_objects()):
            kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found", check=False)
        return
    kubectl.apply(*admin_policy_objects())

    def labels_new_namespaces() -> bool:
        probe = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpuconform-bed-admin-probe"}}
        out = json.loads(kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(probe)))
        return ((out.get("metadata") or {}).get("labels") or {}).get("resource.kubernetes.io/admin-access") == "true"

    bed.wait_for("the admin-access-label policy to label new namespaces", labels_new_namespaces, 30,
                 "kube-apiserver")


def set_controllers(bins: Bins, off: tuple[str, ...]) -> None:
    """kube-controller-manager with the controllers in `off` disabled (restarted only when that changes)."""
    if tuple(bed.read_state().get("kcm_off") or ()) == off:
        return
    bed.stop("kube-controller-manager")
    controlplane.start_controller_manager(bins, off)
    bed.write_state(kcm_off=list(off))
    bed.wait_for("kube-controller-manager /healthz", lambda: _healthy("kube-controller-manager"), 60,
                 "kube-controller-manager")


def set_scheduler_gates(bins: Bins, gates: str) -> None:
    """kube-scheduler with the feature gates `gates` ("" = its defaults; restarted only when that changes)."""
    if (bed.read_state().get("sched_gates") or "") == gates:
        return
    bed.stop("kube-scheduler")
    controlplane.start_scheduler(bins, gates)
    bed.write_state(sched_gates=gates)
    bed.wait_for("kube-scheduler /healthz", lambda: _healthy("kube-scheduler"), 60, "kube-scheduler")


def _healthy(component: str) -> bool:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # its serving cert is self-signed
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{bed.PORTS[component]}/healthz",
                                    context=ctx, timeout=2) as r:
            return r.read().strip() == b"ok"
    except OSError:
        return False


def set_fault(bins: Bins, kubectl: Kubectl, fault: str) -> None:
    """Makes the DRA fault `fault` (faulttable.py DRA_FAULTS; "" = healthy): kube-controller-manager, kube-scheduler
    and admission as its row needs them (each restarted only when that changes), then the driver restarted with the
    row's knob, or gone, waiting until its slice shows it, then the row's API object."""
    if fault and fault not in DRA_FAULTS:
        raise BedError(f"unknown DRA fault {fault!r} (known: {', '.join(DRA_FAULTS)})")
    row = DRA_FAULTS.get(fault)
    sh("pkill", "-f", "cluster.py dra-signal", check=False)  # a signal still waiting for a run must not hit this one
    off, gates = row and row.step(ControllersOff), row and row.step(SchedulerGates)
    driver, api = row and row.step(DraDriver), row and row.step(ApiObject)
    set_controllers(bins, off.controllers if off else ())
    set_scheduler_gates(bins, gates.gates if gates else "")
    set_admin_policy(kubectl, bool(row and row.step(AdminAccessPolicy)))
    set_api_fault(kubectl, "")
    if gates:
        say(f"DRA fault {fault}: kube-scheduler runs with --feature-gates={gates.gates}")
    if driver and driver.knob in HEALTH_KNOBS:
        say(f"DRA fault {fault}: {HEALTH_KNOBS[driver.knob]}")
    if driver and driver.knob == NO_SEAMLESS:
        say(f"DRA fault {fault}: the driver has no seamless upgrade: its DaemonSet replaces its pod without overlap "
            "(maxUnavailable 1, no surge) and on SIGTERM it deletes the node's ResourceSlices")
    if off:
        say(f"DRA fault {fault}: kube-controller-manager runs without {', '.join(off.controllers)}")
    if row and row.step(AdminAccessPolicy):
        say(f"DRA fault {fault}: every namespace made from now on is labelled resource.kubernetes.io/admin-access=true "
            f"(MutatingAdmissionPolicy {ADMIN_POLICY})")
    knob = driver.knob if driver else ""
    bed.write_state(dra_faults=knob)
    inst = install()
    kubectl("delete", "daemonset", "-n", inst.namespace, inst.daemonset, "--ignore-not-found", "--wait=true")
    kubectl("delete", "resourceslices", "--field-selector", f"spec.nodeName={NODE}", "--ignore-not-found")
    selector = ",".join(f"{k}={v}" for k, v in inst.selector.items())
    bed.wait_for("the DRA driver's pods to be gone", lambda: not kubectl.json(
        "get", "pods", "-n", inst.namespace, "-l", selector)["items"], 60, "kubelet-dra")
    if row and row.step(DraDriverGone):
        say(f"DRA fault {fault}: no driver and no ResourceSlice on {NODE}")
        return
    kubectl.apply(*driver_objects())
    want = GPUS + (driver.devices if driver else 0)
    bed.wait_for(f"the DRA driver's slice with {want} device(s)", lambda: slice_devices(kubectl) == want, 90,
                 "kubelet-dra")

    def driver_ready() -> bool:
        pods = kubectl.json("get", "pods", "-n", inst.namespace, "-l", selector)["items"]
        return bool(pods) and all(bed.pod_ready(p) for p in pods)
    # The slice is published before the kubelet registers the driver, and its pod is Ready only then (its -probe;
    # under every knob, at once under no-register): a run begun in between judged a driver still starting (the
    # pool-incomplete row saw FAIL-F08-PLUGIN-NOT-READY once, 2026-12-07).
    bed.wait_for("the DRA driver's pod Ready", driver_ready, 90, "kubelet-dra")
    say(f"DRA driver on {NODE} {'with fault ' + knob if knob else 'healthy'}")
    if signal := row and row.step(SignalDriverDuringRun):
        log = (LOGS / "dra-signal.log").open("a")
        subprocess.Popen([sys.executable, str(bed.HERE / "cluster.py"), "dra-signal", str(signal.after_s)],
                         stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        say(f"DRA fault {fault}: the driver gets SIGUSR1 {signal.after_s:g}s after the suite's first pod on {NODE}")
    if api:
        set_api_fault(kubectl, api.name)
        say(f"DRA fault {api.name}: " + (
            f"DeviceTaintRule {TAINT_RULE} withholds {taint_rule_object()['spec']['deviceSelector']['device']} of "
            f"{NODE} (NoSchedule)" if api.name == "taint-rule" else
            f"ResourceSlice {OFFERED_TWICE} offers {bed.NODE_NAME}'s GPUs under gpu.nvidia.com beside its device "
            "plugin"))
    if bed.read_state().get("kcm_off"):
        say(f"(kube-controller-manager without {', '.join(bed.read_state()['kcm_off'])})")
    if bed.read_state().get("sched_gates"):
        say(f"(kube-scheduler with --feature-gates={bed.read_state()['sched_gates']})")


def signal_driver_during_run(kubectl: Kubectl, after: float) -> int:
    """Sends the DRA driver SIGUSR1 `after` seconds after the suite's first pod on the DRA node (its process is the
    host's: the bed's containers share the host's PID namespace view from here): with its knob taint-on-signal it
    taints its last GPU out of service, a GPU failing while the suite runs (fault taint-during-run)."""
    bed.wait_for_suite_pod(kubectl, NODE)
    time.sleep(after)
    sh("pkill", "-USR1", "-f", "^/usr/bin/gpu-dra-driver")
    say(f"sent the DRA driver SIGUSR1 {after:g}s into the run")
    return 0


def label_node(kubectl: Kubectl) -> None:
    own = node_labels()
    gone = [f"{k}-" for k in {**LABELS, **HELM_LABELS} if k not in own]
    kubectl("label", "node", NODE, "--overwrite", *(f"{k}={v}" for k, v in own.items()), *gone)


def set_shape(bins: Bins, kubectl: Kubectl, name: str) -> None:
    """Re-installs the driver in shape `name` (SHAPES; "" = the default): the node's labels, the DeviceClass and
    the DaemonSet's selector, then the healthy driver (set_fault ""), then the GPU operator's admin-access operands
    (operator shapes; made again, so that their claims name the devices published now) or none."""
    name = name or SHAPES[0]
    if name not in SHAPES:
        raise BedError(f"unknown DRA shape {name!r} (known: {', '.join(SHAPES)})")
    for other in (OPERATOR_INSTALL, CHART_INSTALL, LEGACY_INSTALL):
        if other != install(name):
            remove_install(kubectl, other)
    bed.write_state(dra_shape=name)
    write_hardware()  # the driver reads it when set_fault restarts it
    label_node(kubectl)
    kubectl("delete", "deviceclass", "gpu.nvidia.com", "--ignore-not-found")  # apply would keep a dropped field
    set_fault(bins, kubectl, "")
    set_operands(kubectl, name in OPERATOR_SHAPES, restart=True)
    say(f"DRA node {NODE} in shape {name}")


def remove_install(kubectl: Kubectl, inst: Install, wait: bool = True) -> None:
    """The driver's kubelet plugin as `inst` installed it gone (its DaemonSet, ServiceAccount and RBAC; the
    namespace stays, but a legacy install's own)."""
    kubectl("delete", "daemonset", "-n", inst.namespace, inst.daemonset, "--ignore-not-found",
            f"--wait={str(wait).lower()}", check=False)
    kubectl("delete", "serviceaccount", "-n", inst.namespace, inst.service_account, "--ignore-not-found", check=False)
    kubectl("delete", "clusterrolebinding,clusterrole", inst.daemonset, "--ignore-not-found", check=False)
    if inst == LEGACY_INSTALL:
        kubectl("delete", "namespace", inst.namespace, "--ignore-not-found", "--wait=false", check=False)


def is_up(kubectl: Kubectl) -> bool:
    """The DRA node runs (its kubelet and containerd) and its driver publishes: `up` leaves it as it is."""
    return bool(bed.read_state().get("dra") and bed.pid_of("kubelet-dra") and bed.pid_of("containerd-dra")
                and slice_devices(kubectl))


def up(bins: Bins, kubectl: Kubectl) -> None:
    if is_up(kubectl):
        say(f"DRA node {NODE} already up")
        return
    bed.write_state(dra=True)
    start(bins, bed.node_ip(), kubectl, gpunode.build_images(bins))


def down(bins: Bins, kubectl: Kubectl) -> None:
    """Removes the DRA node: its driver's objects, the Node, then its kubelet and containerd and their state (and
    the faults outside the driver)."""
    set_controllers(bins, ())
    set_scheduler_gates(bins, "")
    set_admin_policy(kubectl, False)
    set_api_fault(kubectl, "")
    set_operands(kubectl, False)
    for inst in (OPERATOR_INSTALL, CHART_INSTALL, LEGACY_INSTALL):
        remove_install(kubectl, inst, wait=False)
    kubectl("delete", "deviceclass", "gpu.nvidia.com", "mig.nvidia.com", "--ignore-not-found", check=False)
    kubectl("delete", "resourceslices", "--field-selector", f"spec.nodeName={NODE}", "--ignore-not-found", check=False)
    stopped = stop_all()
    kubectl("delete", "node", NODE, "--ignore-not-found", check=False)
    cleaned = clean_host_state()
    bed.write_state(dra=False, dra_faults="", dra_shape="")
    say(f"DRA node {NODE} removed (stopped {', '.join(stopped) or 'nothing'}; {', '.join(cleaned) or 'no state'})")


def slice_devices(kubectl: Kubectl) -> int:
    """The physical GPUs the driver publishes for the node: whole GPUs (uuid) and GPUs in MIG mode (their MIG
    devices' parentUUID)."""
    out = kubectl.json("get", "resourceslices", "--field-selector", f"spec.nodeName={NODE}")
    attrs = [{k: (v or {}).get("string") for k, v in (d.get("attributes") or {}).items()}
             for s in out.get("items", []) for d in (s.get("spec") or {}).get("devices") or []]
    return len({a.get("parentUUID") if a.get("type") == "mig" else a.get("uuid") for a in attrs})


def clean_host_state() -> list[str]:
    cleaned = []
    for pid in sh("pgrep", "-f", f"containerd-shim.*{CTRD_SOCK}", check=False).stdout.split():
        os.kill(int(pid), 9)
        cleaned.append(f"containerd-dra shim pid {pid}")
    removed = bed.remove_cgroups(CGROUP_ROOT.strip("/"))
    if removed:
        cleaned.append(f"{removed} DRA-node cgroups")
    for d in (BASE, CTRD_STATE):
        if d.exists():
            sh("rm", "-rf", "--one-file-system", str(d), check=False)
            cleaned.append(str(d))
    return cleaned


def stop_all() -> list[str]:
    return [c for c in ("kubelet-dra", "containerd-dra") if bed.stop(c)]


def log_hint() -> str:
    return f"{LOGS / 'kubelet-dra.log'}, {LOGS / 'containerd-dra.log'}"


__all__ = ["NODE", "wanted", "start", "clean_host_state", "stop_all", "BedError"]
