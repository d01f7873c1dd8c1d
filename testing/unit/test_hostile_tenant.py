"""A tenant steering the verdict (issue 18): pods any tenant can create, labelled like a device plugin, must not
change what the suite concludes about a node. The plugin is the pod that does the plugin's job (a DaemonSet's pod
mounting the device-plugins directory); a look-alike is named as set aside and never judged.

testing/unit/data/hostile/tenant-plugin-spoofs.json holds the recorded spoofs (its "source" says what they are);
they are put next to the healthy recorded layouts of testing/unit/data/layouts.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gpuconform import config as gconfig, discovery, pods
from gpuconform.counts import expectation
from gpuconform.verdicts.counts import check_counts
from gpuconform.verdicts import plugin_findings

DATA = Path(__file__).parent / "data"
SPOOFS = {p["metadata"]["name"]: p for p in json.loads((DATA / "hostile" / "tenant-plugin-spoofs.json").read_text())["pods"]}
HOSTILE = SPOOFS["my-job"]["status"]["containerStatuses"][0]["lastState"]["terminated"]["message"]
SET_ASIDE = "(no DaemonSet owner, no device-plugins hostPath mount)"


def layout(name: str) -> dict:
    return json.loads((DATA / "layouts" / name).read_text())


def on_node(data: dict, node: str) -> list[dict]:
    return [p for p in data["pods"] if p["spec"].get("nodeName") == node and not pods.is_terminal(p)]


def spoof(name: str, node: str) -> dict:
    p = copy.deepcopy(SPOOFS[name])
    p["spec"]["nodeName"] = node
    return p


def test_a_crash_looping_spoof_beside_the_healthy_plugin_changes_no_verdict():
    real = on_node(layout("nvidia-helm.json"), "gpu-ts-0")
    before = discovery.find_plugin_pods(real, "nvidia")
    after = discovery.find_plugin_pods(real + [spoof("my-job", "gpu-ts-0")], "nvidia")
    assert [p["metadata"]["name"] for p in after.pods] == [p["metadata"]["name"] for p in before.pods]
    assert (after.layout, after.why, after.companions) == (before.layout, before.why, before.companions)
    assert after.look_alikes == [f"tenant-a/my-job {SET_ASIDE}"]
    assert plugin_findings("gpu-ts-0", after, 0) == []  # before the fix: FAIL-F08-PLUGIN-CRASHLOOP


def test_a_spoof_alone_never_passes_for_the_missing_plugin_nor_speaks_in_the_verdict():
    f = plugin_findings("gpu-ts-0", discovery.find_plugin_pods([spoof("my-job", "gpu-ts-0")], "nvidia"), 0)
    assert [x.code for x in f] == ["FAIL-F08-PLUGIN-NOT-READY"]
    assert "no device-plugin pod runs on this GPU node" in f[0].message
    assert f"look-alikes set aside: tenant-a/my-job {SET_ASIDE}" in f[0].message
    assert "::error::" not in f[0].message and "\x1b" not in f[0].message and "revoked" not in f[0].message


def test_a_ready_spoof_does_not_make_the_plugin_check_pass_where_the_plugin_is_missing():
    ready = spoof("my-intel-job", "intel-flex-0")
    assert plugin_findings("intel-flex-0", discovery.find_plugin_pods([ready], "intel"), 0)[0].code == \
        "FAIL-F08-PLUGIN-NOT-READY"  # before the fix: [] (a pass)


def test_a_spoofs_args_do_not_change_intels_expected_count():
    data = layout("intel.json")
    node = next(n for n in data["nodes"] if n["metadata"]["name"] == "intel-flex-0")
    cfg = gconfig.load(None, {"preset": "intel-i915"}, environ={}).data
    real = on_node(data, "intel-flex-0")
    with_spoof = [spoof("my-intel-job", "intel-flex-0")] + real  # first, as a LIST in name order may put it
    exp = expectation(node, cfg, discovery.find_plugin_pods(with_spoof, "intel").pods)
    assert exp == expectation(node, cfg, discovery.find_plugin_pods(real, "intel").pods)
    assert check_counts(node, exp) == []  # before the fix: -shared-dev-num 64 from the spoof, FAIL-F04-UNDERADVERTISED


def test_plugin_namespace_sets_aside_even_a_pod_doing_the_job_elsewhere():
    real = on_node(layout("nvidia-helm.json"), "gpu-ts-0")
    moved = copy.deepcopy(next(p for p in real if discovery.device_plugin_mounts(p)))
    moved["metadata"]["namespace"] = "tenant-a"  # a tenant with a privileged namespace and a DaemonSet of its own
    found = discovery.find_plugin_pods(real + [moved], "nvidia", namespace="nvidia-device-plugin")
    assert [p["metadata"]["namespace"] for p in found.pods] == ["nvidia-device-plugin"]
    assert found.look_alikes == ["tenant-a/nvdp-nvidia-device-plugin-a1b2c (not in plugin.namespace nvidia-device-plugin)"]


def test_the_verdict_on_a_crash_looping_plugin_names_its_namespace():
    real = on_node(layout("nvidia-operator.json"), "gpu-plain-0")
    plugin = next(p for p in real if discovery.device_plugin_mounts(p))
    cs = plugin["status"]["containerStatuses"][0]
    cs["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
    f = plugin_findings("gpu-plain-0", discovery.find_plugin_pods(real, "nvidia"), 0)
    assert f[0].code == "FAIL-F08-PLUGIN-CRASHLOOP" and "plugin pod gpu-operator/nvidia-device-plugin-daemonset-" in f[0].message


def test_the_sandbox_device_plugin_is_not_the_container_plugin():
    data = layout("nvidia-no-plugin.json")
    found = discovery.find_plugin_pods(on_node(data, "gpu-vmpt-0"), "nvidia")
    assert found.pods == [] and found.companions == ["gpu-operator/nvidia-sandbox-device-plugin-daemonset-q8m2x"]


@pytest.mark.parametrize("name", sorted(p.name for p in (DATA / "layouts").glob("*.json")))
def test_every_recorded_plugin_pod_does_the_job_and_no_recorded_pod_is_a_look_alike(name):
    data = layout(name)
    vendor = "amd" if name.startswith("amd") else "intel" if name.startswith("intel") else "nvidia"
    for node in {p["spec"].get("nodeName") for p in data.get("pods", [])}:
        found = discovery.find_plugin_pods(on_node(data, node), vendor)
        assert found.look_alikes == [], (node, found.look_alikes)
        assert all(discovery.does_the_job(p) == "" for p in found.pods)


# ---------------------------------------------------------------- the exact kubelet directory (issue 29, T1)

def _tenant_daemonset_mounting(real_plugin: dict, path: str) -> dict:
    """The recorded plugin pod as a team-x DaemonSet's pod (an unlabelled namespace is PSA privileged by default,
    and `edit` creates DaemonSets) whose device-plugins volume is `path`, crash-looping with a termination message."""
    p = copy.deepcopy(real_plugin)
    p["metadata"].update(namespace="team-x", name="x-agent-q7m2p", labels={"app": "x-agent"})
    p["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "x-agent", "controller": True}]
    for v in p["spec"]["volumes"]:
        if (v.get("hostPath") or {}).get("path", "").endswith("/device-plugins"):
            v["hostPath"]["path"] = path
    p["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
    p["status"]["containerStatuses"][0]["lastState"] = {"terminated": {"message": "team-x says FAIL"}}
    return p


@pytest.mark.parametrize("path", ["/tmp/x/device-plugins", "/var/lib/kubelet/../../tmp/device-plugins",
                                  "/home/kubelet/device-plugins/", "/var/lib/kubelet/pods/u/device-plugins"])
def test_a_daemonset_mounting_a_path_that_merely_ends_in_device_plugins_is_not_the_plugin(path):
    """The review's repro: a team-x DaemonSet mounting /tmp/x/device-plugins gave F08 carrying its termination
    message (and a Ready one hid a missing plugin). Now it is a look-alike and judges nothing."""
    real = on_node(layout("nvidia-helm.json"), "gpu-ts-0")
    plugin = next(p for p in real if discovery.device_plugin_mounts(p))
    tenant = _tenant_daemonset_mounting(plugin, path)
    assert discovery.device_plugin_mounts(tenant) == []
    found = discovery.find_plugin_pods([p for p in real if p is not plugin] + [tenant], "nvidia")
    assert found.pods == []
    f = plugin_findings("gpu-ts-0", found, 0)
    assert [x.code for x in f] == ["FAIL-F08-PLUGIN-NOT-READY"] and "team-x says" not in f[0].message
    beside = discovery.find_plugin_pods(real + [tenant], "nvidia")
    assert [p["metadata"]["name"] for p in beside.pods] == [plugin["metadata"]["name"]]
    assert plugin_findings("gpu-ts-0", beside, 0) == []


def test_the_configured_kubelet_dir_is_the_one_that_counts():
    real = on_node(layout("nvidia-helm.json"), "gpu-ts-0")
    plugin = next(p for p in real if discovery.device_plugin_mounts(p))
    moved = _tenant_daemonset_mounting(plugin, "/data/kubelet/device-plugins")
    moved["status"] = plugin["status"]
    assert discovery.device_plugin_mounts(moved, kubelet_dir="/data/kubelet") == ["/data/kubelet/device-plugins"]
    assert discovery.device_plugin_mounts(moved) == []  # not /var/lib/kubelet's
    assert discovery.device_plugin_mounts(plugin, kubelet_dir="/data/kubelet/") == []
    assert discovery.does_the_job(moved) == ("its hostPath /data/kubelet/device-plugins is not the kubelet's "
                                             "/var/lib/kubelet/device-plugins")


def test_plugin_namespace_takes_several_and_applies_to_a_dra_driver_too():
    from pathlib import Path

    import yaml
    real = on_node(layout("nvidia-helm.json"), "gpu-ts-0")
    found = discovery.find_plugin_pods(real, "nvidia", namespace="gpu-operator, nvidia-device-plugin")
    assert [p["metadata"]["namespace"] for p in found.pods] == ["nvidia-device-plugin"] and not found.look_alikes
    # the GPU operator's DRA driver (recorded shape): found in its namespace, set aside outside the configured ones
    shape = yaml.safe_load((Path(__file__).parent / "data" / "dra" / "operator-v26.7.yaml").read_text())
    pods = shape["pods"]
    ns = {p["metadata"]["namespace"] for p in discovery.find_plugin_pods(pods, "nvidia", dra=True).pods}
    assert discovery.find_plugin_pods(pods, "nvidia", namespace=",".join(ns), dra=True).pods
    elsewhere = discovery.find_plugin_pods(pods, "nvidia", namespace="nvidia-device-plugin", dra=True)
    assert not elsewhere.pods and all("not in plugin.namespace nvidia-device-plugin" in x
                                      for x in elsewhere.look_alikes)  # before: the namespace was not applied on DRA


def test_the_report_warns_when_no_plugin_namespace_is_set():
    from gpuconform import auditpage
    assert auditpage.warnings({"config": {"plugin": {"namespace": ""}}})[0].startswith("plugin.namespace is not set")
    assert auditpage.warnings({"config": {"plugin": {"namespace": "gpu-operator"}}}) == []
    html = auditpage.verdict_html({"exit_status": 0, "config": {"plugin": {"namespace": ""}}}, "ok")
    assert 'class="gc-warning">Warning: plugin.namespace is not set' in html
