"""Issue 16 class 9: the install's runtime mode (GPU operator CDI default, legacy runtime, NRI) from recorded
RuntimeClasses and plugin pods, the runtimeClassName mismatch it explains, and the isolation finding that names
the configuration as the cause on a CDI install run with runtimeClassName=nvidia."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from kubernetes.client.rest import ApiException

from gpuconform import runtimemode
from gpuconform.probes import parse_nvidia_smi_l
from gpuconform.verdicts import Seen, isolation_findings

# ---------------------------------------------------------------- recorded objects
# RuntimeClasses as the GPU operator creates them: NVIDIA/gpu-operator v25.10.0 (and head a22dbf6)
# assets/pre-requisites/0200_runtime_class.yaml (name and handler from ClusterPolicy operator.runtimeClass,
# default `nvidia`: controllers/object_controls.go getRuntimeClassName), 0210_runtime_class_legacy.yaml,
# 0220_runtime_class_cdi.yaml; the last two only with CDI on (object_controls.go RuntimeClasses: deleted when CDI is
# off), which is the default since v25.10.0 (deployments/gpu-operator/values.yaml `cdi.enabled: true`).


def rc(name: str, handler: str | None = None) -> dict:
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "handler": handler or name,
            "metadata": {"name": name, "labels": {"app.kubernetes.io/component": "gpu-operator"}}}


OPERATOR_CDI_CLASSES = [rc("nvidia"), rc("nvidia-cdi"), rc("nvidia-legacy")]  # v25.10.0, CDI on (default)
OPERATOR_LEGACY_CLASSES = [rc("nvidia")]  # v25.3.0 default (cdi.enabled: false), or v25.10.0 with CDI off
NRI_CLASSES: list[dict] = []  # head a22dbf6, cdi.nriPluginEnabled: state "pre-requisites" off, no RuntimeClass


def operator_plugin_pod(env: dict[str, str], annotations: dict[str, str] | None = None) -> dict:
    """The operator's device plugin pod: assets/state-device-plugin/0500_daemonset.yaml (v25.10.0), container
    `nvidia-device-plugin` running /bin/entrypoint.sh, env DEVICE_LIST_STRATEGY=envvar in the asset, replaced by
    transformDevicePluginCtrForCDI (object_controls.go, v25.10.0 and head) with `cdi-annotations,cdi-cri` when CDI
    is on."""
    return {"metadata": {"name": "nvidia-device-plugin-daemonset-7xk2p", "namespace": "gpu-operator",
                         "labels": {"app": "nvidia-device-plugin-daemonset"}, "annotations": annotations or {}},
            "spec": {"nodeName": "gpu-1", "runtimeClassName": "nvidia", "containers": [
                {"name": "nvidia-device-plugin", "command": ["/bin/sh", "-c"], "args": ["/bin/entrypoint.sh"],
                 "env": [{"name": "PASS_DEVICE_SPECS", "value": "true"},
                         {"name": "FAIL_ON_INIT_ERROR", "value": "true"},
                         *({"name": k, "value": v} for k, v in env.items()),
                         {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]},
                {"name": "config-manager", "command": ["config-manager"], "env": [{"name": "ONESHOT",
                                                                                  "value": "false"}]}]}}


CDI_PLUGIN = operator_plugin_pod({"CDI_ENABLED": "true", "DEVICE_LIST_STRATEGY": "cdi-annotations,cdi-cri",
                                  "CDI_ANNOTATION_PREFIX": "cdi.k8s.io/"})
LEGACY_PLUGIN = operator_plugin_pod({"DEVICE_LIST_STRATEGY": "envvar"})
# v25.3.0 with cdi.enabled: true: object_controls.go sets DEVICE_LIST_STRATEGY=envvar,cdi-annotations and `nvidia`
# stays the default runtime, so the envvar still reaches the NVIDIA runtime.
V25_3_CDI_PLUGIN = operator_plugin_pod({"CDI_ENABLED": "true", "DEVICE_LIST_STRATEGY": "envvar,cdi-annotations"})
# head a22dbf6 with cdi.nriPluginEnabled: setNRIPluginAnnotation puts `nvidia.cdi.k8s.io/container.<name>:
# management.nvidia.com/gpu=all` on the operator's pods.
NRI_PLUGIN = operator_plugin_pod(
    {"CDI_ENABLED": "true", "DEVICE_LIST_STRATEGY": "cdi-annotations,cdi-cri"},
    {"nvidia.cdi.k8s.io/container.nvidia-device-plugin": "management.nvidia.com/gpu=all"})


def helm_plugin_pod(*, env: dict[str, str] | None = None, args: list[str] | None = None) -> dict:
    """The standalone chart: NVIDIA/k8s-device-plugin v0.19.3 deployments/helm/nvidia-device-plugin/templates/
    daemonset-device-plugin.yml, container `nvidia-device-plugin-ctr`, command nvidia-device-plugin, env
    DEVICE_LIST_STRATEGY only when the value deviceListStrategy is set (else the flag's default `envvar`,
    cmd/nvidia-device-plugin/main.go)."""
    return {"metadata": {"name": "nvdp-nvidia-device-plugin-q9w8e", "namespace": "nvidia-device-plugin"},
            "spec": {"containers": [
                {"name": "nvidia-device-plugin-sidecar", "command": ["config-manager"],
                 "image": "nvcr.io/nvidia/k8s-device-plugin:v0.19.3"},
                {"name": "nvidia-device-plugin-ctr", "command": ["nvidia-device-plugin"], "args": args or [],
                 "image": "nvcr.io/nvidia/k8s-device-plugin:v0.19.3",
                 "env": [{"name": k, "value": v} for k, v in (env or {}).items()]}]}}


# ---------------------------------------------------------------- the plugin's device-list-strategy

@pytest.mark.parametrize("pod, want", [
    (CDI_PLUGIN, ["cdi-annotations", "cdi-cri"]),
    (LEGACY_PLUGIN, ["envvar"]),
    (helm_plugin_pod(), ["envvar"]),  # not set: the flag's default
    (helm_plugin_pod(env={"DEVICE_LIST_STRATEGY": "volume-mounts"}), ["volume-mounts"]),
    (helm_plugin_pod(args=["--device-list-strategy=cdi-cri"], env={"DEVICE_LIST_STRATEGY": "envvar"}), ["cdi-cri"]),
    (helm_plugin_pod(args=["--device-list-strategy", "cdi-annotations,cdi-cri"]), ["cdi-annotations", "cdi-cri"]),
    (helm_plugin_pod(env={"CONFIG_FILE": "/config/config.yaml"}), None),  # the file may set it
])
def test_device_list_strategy_from_the_plugin_container(pod, want):
    assert runtimemode.device_list_strategy([pod])[0] == want
    assert set(want or []) <= set(runtimemode.STRATEGIES)


# ---------------------------------------------------------------- the mode of each install

@pytest.mark.parametrize("classes, plugin, mode, operator", [
    (OPERATOR_CDI_CLASSES, CDI_PLUGIN, runtimemode.CDI, True),  # GPU operator >= v25.10.0 default
    (OPERATOR_LEGACY_CLASSES, LEGACY_PLUGIN, runtimemode.LEGACY, False),  # v25.3.0 default, or CDI off
    (OPERATOR_CDI_CLASSES, V25_3_CDI_PLUGIN, runtimemode.LEGACY, True),  # v25.3.0 with CDI on: envvar still listed
    (NRI_CLASSES, NRI_PLUGIN, runtimemode.NRI, False),  # cdi.nriPluginEnabled
    ([], helm_plugin_pod(), runtimemode.LEGACY, False),  # standalone plugin, the toolkit as default runtime
    (None, CDI_PLUGIN, runtimemode.CDI, False),  # RuntimeClasses not readable: the plugin alone says CDI
    (OPERATOR_CDI_CLASSES, helm_plugin_pod(env={"CONFIG_FILE": "/c.yaml"}), runtimemode.UNKNOWN, True),
    (OPERATOR_CDI_CLASSES, {"metadata": {"name": "x"}, "spec": {"containers": []}}, runtimemode.UNKNOWN, True),
])
def test_the_install_mode_is_recognised(classes, plugin, mode, operator):
    m = runtimemode.recognise(classes, [plugin], "" if classes is not None else "RuntimeClasses not readable: 403")
    assert (m.mode, m.operator) == (mode, operator), m.why
    if classes is None:
        assert "RuntimeClasses not readable" in m.why and m.evidence()["runtime classes"].startswith("RuntimeClasses")


def test_a_cdi_install_with_runtime_class_nvidia_is_explained():
    cdi = runtimemode.recognise(OPERATOR_CDI_CLASSES, [CDI_PLUGIN])
    line = runtimemode.mismatch(cdi, "nvidia")
    assert line is not None
    assert "serves workloads through CDI" in line and "NVIDIA_VISIBLE_DEVICES=all" in line
    assert "leave runtimeClassName empty" in line and "v25.10.0" in line
    # the operator's other classes run the same runtime (nvidia-container-runtime.cdi / .legacy) and honour it too
    assert runtimemode.mismatch(cdi, "nvidia-cdi") and runtimemode.mismatch(cdi, "nvidia-legacy")
    assert runtimemode.mismatch(cdi, "") is None  # the right setting
    assert runtimemode.mismatch(cdi, "kata-qemu") is None  # not an NVIDIA runtime: nothing to say
    # a class named otherwise whose handler is the NVIDIA runtime is told apart by its handler
    renamed = runtimemode.recognise([*OPERATOR_CDI_CLASSES, rc("gpu", "nvidia")], [CDI_PLUGIN])
    assert runtimemode.mismatch(renamed, "gpu")


def test_settings_that_fit_the_install_are_not_explained():
    legacy = runtimemode.recognise(OPERATOR_LEGACY_CLASSES, [LEGACY_PLUGIN])
    assert runtimemode.mismatch(legacy, "nvidia") is None  # legacy runtime mode: `nvidia` is what injects GPUs
    unknown = runtimemode.recognise(OPERATOR_CDI_CLASSES, [helm_plugin_pod(env={"CONFIG_FILE": "/c.yaml"})])
    assert runtimemode.mismatch(unknown, "nvidia") is None  # cannot be told: the plugin is blamed as before
    nri = runtimemode.recognise(NRI_CLASSES, [NRI_PLUGIN])
    assert "leave runtimeClassName empty" in (runtimemode.mismatch(nri, "nvidia") or "")


# ---------------------------------------------------------------- the isolation finding

G0, G1 = "GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901", "GPU-8c4f2a1e-0d3b-4e5f-a617-2b8c9d0e1f23"
BOTH = parse_nvidia_smi_l(f"GPU 0: NVIDIA A100-SXM4-40GB (UUID: {G0})\nGPU 1: NVIDIA A100-SXM4-40GB (UUID: {G1})")
# What the probe pods print on such a node: the zero-request pod under the `nvidia` runtime (cdi mode) gets every
# GPU from its NVIDIA_VISIBLE_DEVICES=all (nvidia-container-toolkit v1.20.2 internal/config/image/cuda_image.go
# VisibleDevices); the two-GPU pod gets its two.
ZERO = Seen("iso0-gpu-1", 0, ["/dev/nvidia0", "/dev/nvidia1"], BOTH, "NVIDIA_VISIBLE_DEVICES=all")
TWO = Seen("iso2-gpu-1", 2, ["/dev/nvidia0", "/dev/nvidia1"], BOTH, "NVIDIA_VISIBLE_DEVICES=all")


def test_isolation_on_a_cdi_install_with_runtime_class_nvidia_names_the_configuration():
    mode = runtimemode.recognise(OPERATOR_CDI_CLASSES, [CDI_PLUGIN])
    f = isolation_findings("gpu-1", ZERO, TWO, "gpu", 1, mode, "nvidia")
    assert [x.code for x in f] == ["FAIL-ISOLATION"]  # still a fail: any pod naming `nvidia` sees every GPU
    msg = f[0].message
    assert "requested no GPU" in msg
    assert "caused by the configuration (runtimeClassName=nvidia), not the device plugin" in msg
    assert "leave runtimeClassName empty" in msg and "GPU operator CDI mode" in msg


def test_isolation_elsewhere_still_blames_the_runtime_and_plugin_setup():
    legacy = runtimemode.recognise(OPERATOR_LEGACY_CLASSES, [LEGACY_PLUGIN])
    for mode, rc_name in ((legacy, "nvidia"), (None, "nvidia"), (runtimemode.recognise(OPERATOR_CDI_CLASSES,
                                                                                      [CDI_PLUGIN]), "")):
        f = isolation_findings("gpu-1", ZERO, TWO, "gpu", 1, mode, rc_name)
        assert [x.code for x in f] == ["FAIL-ISOLATION"] and "caused by the configuration" not in f[0].message
    assert isolation_findings("gpu-1", Seen("iso0", 0, [], []), TWO, "gpu", 1,
                              runtimemode.recognise(OPERATOR_CDI_CLASSES, [CDI_PLUGIN]), "nvidia") == []


# ---------------------------------------------------------------- the one optional LIST

def _inventory():
    from gpuconform.pytest_plugin import inventory

    api = SimpleNamespace(sanitize_for_serialization=lambda o: o)
    inv = inventory.Inventory(None, SimpleNamespace(api=api, request_timeout=5.0))
    return inv, inventory


def test_runtime_classes_are_listed_once_and_a_403_is_said_not_raised(monkeypatch):
    calls = []

    def listing(**kw):
        calls.append(kw)
        return SimpleNamespace(items=OPERATOR_CDI_CLASSES)

    inv, mod = _inventory()
    monkeypatch.setattr(mod.k8s, "NodeV1Api", lambda api: SimpleNamespace(list_runtime_class=listing))
    threads = [threading.Thread(target=inv.runtime_classes) for _ in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert inv.runtime_classes() == (OPERATOR_CDI_CLASSES, "") and len(calls) == 1

    def forbidden(**kw):
        raise ApiException(status=403, reason="Forbidden")

    inv, mod = _inventory()
    monkeypatch.setattr(mod.k8s, "NodeV1Api", lambda api: SimpleNamespace(list_runtime_class=forbidden))
    classes, why = inv.runtime_classes()
    assert classes is None and why.startswith("RuntimeClasses not readable") and "403" in why
    mode = runtimemode.recognise(classes, [CDI_PLUGIN], why)
    assert mode.mode == runtimemode.CDI and runtimemode.mismatch(mode, "nvidia")  # the plugin alone tells CDI
