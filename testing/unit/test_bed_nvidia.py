"""The bed's NVIDIA stack (localcluster/nvidia.py): the mock NVML's config agrees with the bed's hardware, and the
plugin and GFD DaemonSets carry what NVIDIA's Helm chart at the pinned tag renders for the chosen values."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "localcluster"))
import nvidia  # noqa: E402
import shapes  # noqa: E402
from faulttable import DEVICE_PLUGIN_FAULTS, NvmlEvents, SimPlugin  # noqa: E402

HW = {"driverVersion": "550.54.15", "cudaVersion": "12.4",
      "gpus": [{"index": i, "minor": i, "uuid": f"GPU-{i:08d}-0000-0000-0000-000000000000", "name": "NVIDIA A100-SXM4-40GB",
                "pciBusId": f"00000000:{0x07 + i * 8:02X}:00.0", "numaNode": 0, "memoryTotalMiB": 40960}
               for i in range(4)]}


def test_the_mock_nvml_config_lists_the_beds_gpus_with_their_uuids_minors_and_bus_ids():
    conf = nvidia.mock_config(HW)
    assert "driver 550.54.15" in conf and "cuda 12040" in conf
    assert conf.count("\ngpu\n") == 4
    for g in HW["gpus"]:
        assert f"uuid {g['uuid']}" in conf and f"bus {g['pciBusId']}" in conf and f"minor {g['minor']}" in conf
    assert "mig_mode 1" not in conf


def _container(objs: list[dict], kind: str = "DaemonSet") -> dict:
    ds = [o for o in objs if o["kind"] == kind]
    assert len(ds) == 1
    return ds[0]["spec"]["template"]["spec"]["containers"][0]


def test_the_plugin_daemonset_is_the_charts_with_the_beds_values():
    objs = nvidia.plugin_objects("helm", None)
    ctr = _container(objs)
    env = {e["name"]: e.get("value") for e in ctr["env"]}
    assert ctr["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.19.3" and ctr["command"] == ["nvidia-device-plugin"]
    assert env["DEVICE_LIST_STRATEGY"] == "volume-mounts" and env["PASS_DEVICE_SPECS"] == "true"
    assert env["NVIDIA_DRIVER_ROOT"] == str(nvidia.DRIVER_ROOT) and "CONFIG_FILE" not in env
    assert "MIG_STRATEGY" not in env  # the chart's default: the plugin's own (none)
    mounts = {m["mountPath"] for m in ctr["volumeMounts"]}
    assert {"/var/lib/kubelet/device-plugins", "/driver-root"} <= mounts
    assert not any(o["kind"] == "ConfigMap" for o in objs)


def test_time_slicing_reaches_the_plugin_and_gfd_through_one_config_file():
    cfg = shapes.nvidia_config("time-slicing-renamed")
    assert cfg["sharing"]["timeSlicing"] == {"renameByDefault": True,
                                             "resources": [{"name": "nvidia.com/gpu", "replicas": shapes.TS_REPLICAS}]}
    for objs in (nvidia.plugin_objects("static", cfg), nvidia.gfd_objects("static", cfg)):
        env = {e["name"]: e.get("value") for e in _container(objs)["env"]}
        assert env["CONFIG_FILE"] == "/config/config.yaml"
    assert shapes.nvidia_config("plain") is None


def test_the_operator_layout_sets_the_operators_mig_strategy_on_plugin_and_gfd():
    for objs in (nvidia.plugin_objects("operator", None), nvidia.gfd_objects("operator", None)):
        env = {e["name"]: e.get("value") for e in _container(objs)["env"]}
        assert env["MIG_STRATEGY"] == "single"


def test_gfd_runs_under_the_layouts_companion_name_and_labels_and_sees_the_beds_pci_tree():
    objs = nvidia.gfd_objects("helm", None)
    ds = [o for o in objs if o["kind"] == "DaemonSet"][0]
    name, labels = shapes.LAYOUT_OBJECTS["helm"].companions[0]
    assert ds["metadata"]["name"] == name and ds["spec"]["selector"]["matchLabels"] == labels
    vols = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    assert vols["host-sys"]["hostPath"]["path"].endswith("/sys")


def test_mig_mixed_runs_on_the_simulated_plugin_whatever_stack_is_asked_for():
    assert shapes.stack_for("mig-mixed", "nvidia") == "sim"
    assert shapes.stack_for("time-slicing", "nvidia") == "nvidia"


def test_faults_of_nvidias_stack_are_made_through_nvml_events():
    nv = {n: f for n, f in DEVICE_PLUGIN_FAULTS.items() if f.stack == "nvidia" and f.row != "rollout"}
    assert set(nv) == {"xid-unhealthy", "gpu-lost", "gpu-fell-off-bus", "xid-during-run"}
    # the rollout rehearsal's rows roll NVIDIA's own plugin (its DaemonSet, its flags)
    assert {n for n, f in DEVICE_PLUGIN_FAULTS.items() if f.row == "rollout"} == {
        "rollout-slow-start", "rollout-crashloop", "rollout-access-lost", "rollout-ids-changed", "rollout-kubelet-restart"}
    assert DEVICE_PLUGIN_FAULTS["xid-during-run"].step(NvmlEvents).after_s == 1  # lands during the run
    assert all(f.step(NvmlEvents) and not f.step(SimPlugin) for f in nv.values())
    assert all(f.stack in ("", *shapes.STACKS) for f in DEVICE_PLUGIN_FAULTS.values())
    assert DEVICE_PLUGIN_FAULTS["shared-device"].stack == "sim" and DEVICE_PLUGIN_FAULTS["kubelet-restart"].stack == ""
