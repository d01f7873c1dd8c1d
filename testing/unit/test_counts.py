"""counts: expected GPU counts from GFD labels/config and the verdicts for what a node advertises."""

from __future__ import annotations

import copy

import pytest

from gpuconform import config as gconfig
from gpuconform.counts import Expectation, expectation, free_gpus, pod_request, unhealthy_from_log
from gpuconform.verdicts.counts import check_counts, stale_resources

UUID_A = "GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"
UUID_B = "GPU-8c4f2a1e-0d3b-4e5f-a617-2b8c9d0e1f23"


def cfg(**nodes) -> dict:
    d = copy.deepcopy(gconfig.DEFAULTS)
    d["nodes"].update(nodes)
    return d


def node(name="gpu-a", labels=None, capacity=None, allocatable=None) -> dict:
    """Shaped like `kubectl get node -o json` (quantities are strings)."""
    base = {"cpu": "32", "memory": "263921616Ki", "pods": "110", "ephemeral-storage": "100Gi",
            "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                              **(labels or {})}},
        "spec": {},
        "status": {"capacity": {**base, **(capacity or {})},
                   "allocatable": {**base, **(allocatable if allocatable is not None else capacity or {})}},
    }


GFD4 = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "4",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}  # GFD writes no mig.strategy under none
TS4 = {**GFD4, "nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4",
       "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-SHARED"}


# ---------------------------------------------------------------- expectation()

def test_expectation_from_gfd_count():
    e = expectation(node(labels=GFD4), cfg())
    assert (e.resource, e.physical, e.replicas, e.advertised) == ("nvidia.com/gpu", 4, 1, 4)
    assert "nvidia.com/gpu.count=4" in e.source
    assert e.mig_strategy == "none"


def test_expectation_time_slicing_multiplies_replicas():
    e = expectation(node(labels=TS4), cfg())
    assert (e.physical, e.replicas, e.advertised) == (4, 4, 16)
    assert e.resource == "nvidia.com/gpu"


def test_expectation_sharing_none_ignores_replicas_label():
    labels = {**GFD4, "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/gpu.replicas": "4"}
    assert expectation(node(labels=labels), cfg()).advertised == 4


def test_expectation_configured_replicas_override_labels():
    c = cfg()
    c["sharing"].update({"strategy": "time-slicing", "replicas": 2})
    e = expectation(node(labels=GFD4), c)
    assert (e.replicas, e.advertised) == (2, 8)


def test_expectation_renamed_shared_resource():
    c = cfg()
    c["sharing"]["renamed"] = True
    assert expectation(node(labels=TS4), c).resource == "nvidia.com/gpu.shared"
    # renamed only applies when sharing is on
    assert expectation(node(labels=GFD4), c).resource == "nvidia.com/gpu"


def test_expectation_without_count_label_is_unknown():
    e = expectation(node(name="bare", labels={"nvidia.com/gpu.present": "true"}), cfg())
    assert e.physical is None and e.advertised is None
    assert "bare" in e.source and "nodes.expectedGpus" in e.source


def test_expectation_expected_gpus_int_beats_labels():
    e = expectation(node(labels=GFD4), cfg(expectedGpus=8))
    assert e.physical == 8 and "nodes.expectedGpus=8" in e.source


def test_expectation_expected_gpus_per_pool():
    c = cfg(expectedGpus={"a100": 8, "l4": 1}, poolLabel="pool")
    assert expectation(node(labels={**GFD4, "pool": "l4"}), c).physical == 1
    assert expectation(node(labels={**GFD4, "pool": "a100"}), c).physical == 8
    e = expectation(node(labels={**GFD4, "pool": "h100"}), c)
    assert e.physical is None
    assert "'h100'" in e.source and "pool" in e.source


# ---------------------------------------------------------------- check_counts()

def codes(findings):
    return [f.code for f in findings]


def test_healthy_node_has_no_findings():
    n = node(labels=GFD4, capacity={"nvidia.com/gpu": "4"})
    assert check_counts(n, expectation(n, cfg())) == []


def test_resource_absent_is_not_registered():
    n = node(name="gpu-b", labels=GFD4, capacity={"example.com/fpga": "1"})
    f = check_counts(n, expectation(n, cfg()))
    assert codes(f) == ["FAIL-F01-NOT-REGISTERED"]
    msg = f[0].message
    assert msg.startswith("gpu-b:") and "nvidia.com/gpu is absent" in msg
    assert "example.com/fpga" in msg and "hugepages" not in msg
    assert "gpu.count=4" in msg


def test_capacity_zero():
    n = node(name="gpu-c", labels=GFD4, capacity={"nvidia.com/gpu": "0"})
    f = check_counts(n, expectation(n, cfg()))
    assert codes(f) == ["FAIL-F02-CAPACITY-ZERO"]
    assert "gpu-c" in f[0].message and "capacity=0" in f[0].message and "expected 4" in f[0].message


def test_allocatable_zero_with_capacity_is_every_device_unhealthy_not_a_lost_registration():
    """Capacity counts every registered device, allocatable the healthy ones: 4/0 is a registered plugin whose
    devices are all Unhealthy (NVIDIA's plugin marks all of them on a lost GPU), which F02's 'lost
    registration' would misname (seen on the bed's fault gpu-lost with NVIDIA's own plugin)."""
    n = node(labels=GFD4, capacity={"nvidia.com/gpu": "4"}, allocatable={"nvidia.com/gpu": "0"})
    f = check_counts(n, expectation(n, cfg()))
    assert codes(f) == ["FAIL-F03-UNHEALTHY-DEVICES"]
    assert "all 4 nvidia.com/gpu devices are Unhealthy (capacity=4, allocatable=0" in f[0].message
    assert "lost GPU" in f[0].message and "endpoint stopped" in f[0].message


def test_zero_expected_zero_advertised_is_fine():
    n = node(labels=GFD4, capacity={"nvidia.com/gpu": "0"})
    assert check_counts(n, expectation(n, cfg(expectedGpus=0))) == []


def test_unhealthy_devices_with_ids():
    n = node(name="gpu-d", labels=GFD4, capacity={"nvidia.com/gpu": "4"}, allocatable={"nvidia.com/gpu": "3"})
    f = check_counts(n, expectation(n, cfg()), [UUID_A])
    assert codes(f) == ["FAIL-F03-UNHEALTHY-DEVICES"]
    m = f[0].message
    assert "gpu-d" in m and "1 of 4" in m and "capacity=4, allocatable=3" in m and UUID_A in m


def test_unhealthy_devices_without_ids_says_so():
    n = node(labels=GFD4, capacity={"nvidia.com/gpu": "4"}, allocatable={"nvidia.com/gpu": "2"})
    f = check_counts(n, expectation(n, cfg()))
    assert codes(f) == ["FAIL-F03-UNHEALTHY-DEVICES"]
    assert "2 of 4" in f[0].message and "not found in the plugin log" in f[0].message


def test_overadvertised():
    n = node(name="gpu-e", labels=GFD4, capacity={"nvidia.com/gpu": "6"})
    f = check_counts(n, expectation(n, cfg()))
    assert codes(f) == ["FAIL-F04-OVERADVERTISED"]
    m = f[0].message
    assert "gpu-e" in m and "capacity nvidia.com/gpu=6" in m and "supports 4" in m and "(4 GPUs; " in m


def test_time_slicing_not_applied_is_sharing_mismatch():
    n = node(name="gpu-f", labels=TS4, capacity={"nvidia.com/gpu": "4"})
    f = check_counts(n, expectation(n, cfg()))
    assert codes(f) == ["FAIL-F10-SHARING-MISMATCH"]
    m = f[0].message
    assert "gpu-f" in m and "capacity nvidia.com/gpu=4" in m and "x 4 replicas = 16" in m


def test_time_slicing_applied_is_fine():
    n = node(labels=TS4, capacity={"nvidia.com/gpu": "16"})
    assert check_counts(n, expectation(n, cfg())) == []


def test_underadvertised():
    n = node(name="gpu-g", labels=GFD4, capacity={"nvidia.com/gpu": "3"}, allocatable={"nvidia.com/gpu": "3"})
    f = check_counts(n, expectation(n, cfg()))
    assert codes(f) == ["FAIL-F04-UNDERADVERTISED"]
    assert "gpu-g" in f[0].message and "capacity nvidia.com/gpu=3" in f[0].message and "expected 4" in f[0].message


def test_unhealthy_and_overadvertised_are_both_reported():
    n = node(labels=GFD4, capacity={"nvidia.com/gpu": "8"}, allocatable={"nvidia.com/gpu": "7"})
    assert codes(check_counts(n, expectation(n, cfg()))) == ["FAIL-F03-UNHEALTHY-DEVICES", "FAIL-F04-OVERADVERTISED"]


def test_unknown_expectation_only_checks_health():
    n = node(labels={"nvidia.com/gpu.present": "true"}, capacity={"nvidia.com/gpu": "2"})
    assert check_counts(n, expectation(n, cfg())) == []


# ---------------------------------------------------------------- MIG mixed and stale keys

MIXED = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "1", "nvidia.com/mig.strategy": "mixed",
         "nvidia.com/mig-1g.5gb.count": "7", "nvidia.com/mig-1g.5gb.memory": "4864",
         "nvidia.com/mig-1g.5gb.engines.copy": "1", "nvidia.com/mig-3g.20gb.count": "0"}


def test_mig_mixed_profiles_from_labels():
    e = expectation(node(labels=MIXED), cfg())
    assert e.mig_strategy == "mixed"
    assert e.mig_profiles == {"nvidia.com/mig-1g.5gb": 7}


def test_mig_mixed_profiles_from_config():
    c = cfg()
    c["mig"] = {"strategy": "mixed", "profiles": {"mig-2g.10gb": 3}}
    assert expectation(node(labels=GFD4), c).mig_profiles == {"nvidia.com/mig-2g.10gb": 3}


def test_mig_mixed_match_and_mismatch():
    good = node(labels=MIXED, capacity={"nvidia.com/mig-1g.5gb": "7"})
    assert check_counts(good, expectation(good, cfg())) == []
    bad = node(name="mig-n", labels=MIXED, capacity={"nvidia.com/mig-1g.5gb": "7"},
               allocatable={"nvidia.com/mig-1g.5gb": "5"})
    f = check_counts(bad, expectation(bad, cfg()))
    assert codes(f) == ["FAIL-F09-MIG-MISMATCH"]
    assert "mig-n" in f[0].message and "allocatable is 5" in f[0].message and "expected 7" in f[0].message
    absent = node(labels=MIXED, capacity={"nvidia.com/gpu": "1"})
    f = check_counts(absent, expectation(absent, cfg()))
    assert codes(f) == ["FAIL-F09-MIG-MISMATCH"] and "absent" in f[0].message


def test_mig_mixed_without_profiles():
    labels = {"nvidia.com/gpu.count": "1", "nvidia.com/mig.strategy": "mixed"}
    n = node(labels=labels, capacity={"nvidia.com/gpu": "1"})
    # The operator labels every node with the cluster's strategy: a node without MIG devices has whole GPUs.
    assert check_counts(n, expectation(n, cfg())) == []
    pinned = cfg()
    pinned["mig"]["strategy"] = "mixed"  # a config that requires MIG devices on every node
    f = check_counts(n, expectation(n, pinned))
    assert codes(f) == ["FAIL-F09-MIG-MISMATCH"] and "no nvidia.com/mig-*.count labels" in f[0].message


def test_mig_mixed_with_whole_gpus_beside_mig_devices():
    labels = {"nvidia.com/gpu.count": "2", "nvidia.com/mig.strategy": "mixed", "nvidia.com/mig-1g.10gb.count": "3",
              "nvidia.com/mig-4g.40gb.count": "1"}
    mig = {"nvidia.com/mig-1g.10gb": "3", "nvidia.com/mig-4g.40gb": "1"}
    n = node(labels=labels, capacity={**mig, "nvidia.com/gpu": "1"})
    exp = expectation(n, cfg())
    assert check_counts(n, exp) == [] and exp.resources == ["nvidia.com/mig-1g.10gb", "nvidia.com/mig-4g.40gb",
                                                            "nvidia.com/gpu"]
    over = node(labels=labels, capacity={**mig, "nvidia.com/gpu": "2"})
    assert codes(check_counts(over, expectation(over, cfg()))) == ["FAIL-F04-OVERADVERTISED"]
    only_mig = node(labels=labels, capacity=mig)
    assert expectation(only_mig, cfg()).resources == ["nvidia.com/mig-1g.10gb", "nvidia.com/mig-4g.40gb"]


def test_stale_resources():
    n = node(name="gpu-h", labels=GFD4, capacity={"nvidia.com/gpu": "4", "nvidia.com/mig-1g.5gb": "7",
                                                  "nvidia.com/gpu.shared": "0", "amd.com/gpu": "1"})
    f = stale_resources(n, expectation(n, cfg()))
    assert codes(f) == ["FAIL-F04-STALE-RESOURCE"]
    assert "gpu-h" in f[0].message and "nvidia.com/mig-1g.5gb=7" in f[0].message
    clean = node(labels=GFD4, capacity={"nvidia.com/gpu": "4"})
    assert stale_resources(clean, expectation(clean, cfg())) == []


def test_stale_resources_mig_mixed_keys_are_expected():
    n = node(labels=MIXED, capacity={"nvidia.com/mig-1g.5gb": "7", "nvidia.com/gpu": "0"})
    assert stale_resources(n, expectation(n, cfg())) == []


# ---------------------------------------------------------------- free_gpus / pod_request

def pod(name, node_name, phase="Running", gpus=(1,), init=(), resource="nvidia.com/gpu", use_requests=False):
    def ctr(i, n):
        key = "requests" if use_requests else "limits"
        return {"name": f"c{i}", "image": "busybox:1.36", "resources": {key: {resource: str(n)}} if n else {}}
    spec = {"nodeName": node_name, "containers": [ctr(i, n) for i, n in enumerate(gpus)]}
    if init:
        spec["initContainers"] = [ctr(100 + i, n) for i, n in enumerate(init)]
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec, "status": {"phase": phase}}


def test_pod_request_sum_and_init_max():
    assert pod_request(pod("p", "n", gpus=(1, 2)), "nvidia.com/gpu") == 3
    assert pod_request(pod("p", "n", gpus=(1,), init=(2, 4)), "nvidia.com/gpu") == 4
    assert pod_request(pod("p", "n", gpus=(3,), init=(2,)), "nvidia.com/gpu") == 3
    assert pod_request(pod("p", "n", gpus=(0,)), "nvidia.com/gpu") == 0
    assert pod_request(pod("p", "n", gpus=(2,), use_requests=True), "nvidia.com/gpu") == 2
    assert pod_request({"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c"}]}}, "nvidia.com/gpu") == 0


def test_free_gpus_counts_non_terminal_pods_on_the_node():
    n = node(name="gpu-a", labels=GFD4, capacity={"nvidia.com/gpu": "4"})
    pods = [pod("run", "gpu-a", "Running", (1,)),
            pod("pend", "gpu-a", "Pending", (1,), init=(2,)),
            pod("done", "gpu-a", "Succeeded", (2,)),
            pod("failed", "gpu-a", "Failed", (2,)),
            pod("other", "gpu-b", "Running", (4,))]
    assert free_gpus(n, "nvidia.com/gpu", pods) == 1
    assert free_gpus(n, "nvidia.com/gpu", []) == 4
    assert free_gpus(n, "nvidia.com/gpu", pods + [pod("big", "gpu-a", gpus=(8,))]) == 0
    assert free_gpus(node(labels=GFD4), "nvidia.com/gpu", []) == 0


def test_unhealthy_from_log():
    log = "\n".join([
        "I0501 10:00:00.000000       1 main.go:256] Starting NVIDIA Device Plugin",
        "I0501 10:00:01.000000       1 server.go:165] Registered device plugin for 'nvidia.com/gpu' with Kubelet",
        f"I0501 10:05:00.000000       1 health.go:159] XidCriticalError: Xid=79 on Device={UUID_A}; marking device as unhealthy.",
        f"I0501 10:05:00.000100       1 server.go:271] 'nvidia.com/gpu' device marked unhealthy: {UUID_A}",
        f"I0501 10:06:00.000000       1 server.go:271] 'nvidia.com/gpu' device marked unhealthy: {UUID_B}",
        f"I0501 10:06:00.000000       1 server.go:100] device {UUID_B.replace('8c4f', '9999')} is healthy again",
    ])
    assert unhealthy_from_log(log) == [UUID_A, UUID_B]
    assert unhealthy_from_log("all good\n") == []


def test_expectation_is_frozen():
    e = Expectation("nvidia.com/gpu", 4, 1, "x")
    with pytest.raises(Exception):
        e.physical = 5  # type: ignore[misc]


def test_mig_mixed_node_checked_as_plain_is_a_mig_mismatch_not_unregistered():
    node = {"metadata": {"name": "n1", "labels": {"nvidia.com/gpu.count": "4", "nvidia.com/mig.strategy": "mixed"}},
            "status": {"capacity": {"nvidia.com/mig-3g.20gb": "4", "nvidia.com/mig-1g.5gb": "8"},
                       "allocatable": {"nvidia.com/mig-3g.20gb": "4", "nvidia.com/mig-1g.5gb": "8"}}}
    cfg = {"resourceName": "nvidia.com/gpu", "nodes": {"expectedGpus": "auto", "poolLabel": ""},
           "sharing": {"strategy": "none", "replicas": "auto", "renamed": False},
           "mig": {"strategy": "none", "profiles": {}}}
    findings = check_counts(node, expectation(node, cfg))
    assert [f.code for f in findings] == ["FAIL-F09-MIG-MISMATCH"]
    assert "nvidia.com/mig-3g.20gb" in findings[0].message and "expected MIG strategy is none" in findings[0].message


# ---------------------------------------------------------------- one config, every pool shape (preset nvidia)

def nvidia_auto() -> dict:
    return gconfig.load(None, {"preset": "nvidia"}, environ={}).data


MIXED4 = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "4", "nvidia.com/mig.strategy": "mixed",
         "nvidia.com/mig-3g.20gb.count": "4", "nvidia.com/mig-1g.5gb.count": "8"}


@pytest.mark.parametrize("labels,capacity,resource,workload,unit,per_device", [
    (GFD4, {"nvidia.com/gpu": "4"}, "nvidia.com/gpu", "nvidia.com/gpu", "gpu", 1),
    (TS4, {"nvidia.com/gpu": "16"}, "nvidia.com/gpu", "nvidia.com/gpu", "replica", 4),
    ({**TS4, "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}, {"nvidia.com/gpu.shared": "16"},
     "nvidia.com/gpu.shared", "nvidia.com/gpu.shared", "replica", 4),
    (MIXED4, {"nvidia.com/mig-3g.20gb": "4", "nvidia.com/mig-1g.5gb": "8"}, "nvidia.com/gpu",
     "nvidia.com/mig-1g.5gb", "mig", 1),
], ids=["plain", "time-slicing", "time-slicing-renamed", "mig-mixed"])
def test_preset_nvidia_reads_each_pool_shape_from_the_nodes_own_labels(labels, capacity, resource, workload, unit,
                                                                      per_device):
    n = node(labels=labels, capacity=capacity)
    exp = expectation(n, nvidia_auto())
    assert (exp.resource, exp.workload_resource, exp.unit, exp.per_device) == (resource, workload, unit, per_device)
    assert check_counts(n, exp) == [] and stale_resources(n, exp) == []


def test_mig_mixed_node_registers_one_resource_and_socket_per_profile():
    exp = expectation(node(labels=MIXED4), nvidia_auto())
    assert exp.resources == ["nvidia.com/mig-1g.5gb", "nvidia.com/mig-3g.20gb"]
    # NVIDIA/k8s-device-plugin internal/plugin/server.go: nvidia- + name after nvidia.com/ + .sock
    assert exp.sockets() == ["nvidia-mig-1g.5gb.sock", "nvidia-mig-3g.20gb.sock"]
    assert exp.sockets("custom.sock") == ["custom.sock"]
    assert "MIG mixed" in exp.describe() and "nvidia.com/mig-1g.5gb=8" in exp.describe()


def test_mig_profile_names_with_dots_and_compute_instances_are_counted():
    # go-nvlib's profile String(): "+me" becomes ".me", a negative attribute keeps its "-" (docs/vendors.md)
    labels = {"nvidia.com/gpu.count": "1", "nvidia.com/mig.strategy": "mixed", "nvidia.com/mig-1g.10gb.me.count": "1",
              "nvidia.com/mig-1g.10gb-me.count": "2", "nvidia.com/mig-1g.10gb.me.memory": "9856",
              "nvidia.com/mig-2g.20gb.gfx.count": "1"}
    exp = expectation(node(labels=labels), nvidia_auto())
    assert exp.mig_profiles == {"nvidia.com/mig-1g.10gb.me": 1, "nvidia.com/mig-1g.10gb-me": 2,
                                "nvidia.com/mig-2g.20gb.gfx": 1}


def test_renamed_auto_follows_the_advertised_name_and_pinned_renamed_does_not():
    n = node(labels=TS4, capacity={"nvidia.com/gpu": "16"})
    pinned = gconfig.load(None, {"preset": "nvidia-time-slicing-renamed"}, environ={}).data
    exp = expectation(n, pinned)
    assert exp.resource == "nvidia.com/gpu.shared"
    assert [f.code for f in check_counts(n, exp)] == ["FAIL-F01-NOT-REGISTERED"]


def test_plain_preset_pins_whole_gpus_so_a_sliced_node_is_a_finding():
    n = node(labels=TS4, capacity={"nvidia.com/gpu": "16"})
    exp = expectation(n, gconfig.load(None, {"preset": "nvidia-plain"}, environ={}).data)
    assert [f.code for f in check_counts(n, exp)] == ["FAIL-F04-OVERADVERTISED"]


def intel(**over) -> dict:
    return gconfig.load(None, {"preset": "intel-i915", **over}, environ={}).data


INTEL_NODE = {"intel.feature.node.kubernetes.io/gpu": "true", "gpu.intel.com/device.count": "2"}


def intel_plugin(*args: str) -> dict:
    return {"metadata": {"name": "intel-gpu-plugin-x"}, "spec": {"containers": [
        {"name": "intel-gpu-plugin", "args": list(args)}]}}


def test_intel_counts_from_nfd_and_shared_dev_num_from_the_plugin_args():
    n = node(labels=INTEL_NODE, capacity={"gpu.intel.com/i915": "20", "gpu.intel.com/i915_monitoring": "1"})
    exp = expectation(n, intel(), [intel_plugin("-shared-dev-num=10", "-enable-monitoring")])
    assert (exp.physical, exp.replicas, exp.advertised) == (2, 10, 20)
    assert check_counts(n, exp) == [] and stale_resources(n, exp) == []  # the monitoring resource is not stale
    exp2 = expectation(n, intel(), [intel_plugin("-shared-dev-num", "5")])
    assert [f.code for f in check_counts(n, exp2)] == ["FAIL-F04-OVERADVERTISED"]
    exp3 = expectation(n, intel(), [])  # plugin not found: no sharing assumed
    assert exp3.replicas == 1 and "gpu.intel.com/device.count=2" in exp3.source


def test_amd_counts_from_the_node_labeller_device_id_labels():
    labels = {"feature.node.kubernetes.io/amd-gpu": "true", "beta.amd.com/gpu.device-id.74a1": "8",
              "amd.com/gpu.device-id.74a1": "8"}
    n = node(labels=labels, capacity={"amd.com/gpu": "8"})
    exp = expectation(n, gconfig.load(None, {"preset": "amd"}, environ={}).data)
    assert exp.physical == 8 and check_counts(n, exp) == []
    assert exp.sockets() == ["amd.com_gpu"]


def test_time_sliced_mig_devices_count_replicas_and_may_be_renamed():
    # GFD keys labels by the original name; the plugin advertises count x replicas, as .shared when renamed
    labels = {"nvidia.com/gpu.count": "1", "nvidia.com/mig.strategy": "mixed", "nvidia.com/mig-1g.10gb.count": "7",
              "nvidia.com/mig-1g.10gb.replicas": "2", "nvidia.com/mig-1g.10gb.sharing-strategy": "time-slicing"}
    plain = node(labels=labels, capacity={"nvidia.com/mig-1g.10gb": "14"})
    exp = expectation(plain, nvidia_auto())
    assert check_counts(plain, exp) == [] and (exp.unit, exp.per_device) == ("mig", 2)
    renamed = node(labels=labels, capacity={"nvidia.com/mig-1g.10gb.shared": "14"})
    exp = expectation(renamed, nvidia_auto())
    assert check_counts(renamed, exp) == [] and exp.workload_resource == "nvidia.com/mig-1g.10gb.shared"
    assert exp.sockets() == ["nvidia-mig-1g.10gb.shared.sock"]


# ---------------------------------------------------------------- quantities and malformed count labels (issue 18)

from gpuconform.counts import parse_qty, qty  # noqa: E402
from gpuconform.verdicts import count_findings  # noqa: E402


@pytest.mark.parametrize("text, n", [("4", 4), ("1k", 1000), ("2e3", 2000), ("2E3", 2000), ("1.5k", 1500),
                                     ("1Ki", 1024), ("+4", 4), ("4.", 4), ("9E", 9 * 10**18), (8, 8)])
def test_a_count_is_parsed_with_the_kubernetes_quantity_rules(text, n):
    """The API server writes 1000 devices as "1k" (apimachinery's canonical form): before, that read as absent."""
    assert parse_qty(text) == n == qty(text)


@pytest.mark.parametrize("text", ["eight", "4_0", "", " 4", "500m", "1.5", "-1", "1e999", "10E", "0x10", True])
def test_a_count_that_is_not_a_whole_quantity_is_malformed_not_absent(text):
    with pytest.raises(ValueError):
        parse_qty(text)
    assert qty(text) is None and qty(None) is None


def test_a_thousand_devices_written_1k_are_counted_not_missing():
    n = node(labels={**GFD4, "nvidia.com/gpu.count": "1000"}, capacity={"nvidia.com/gpu": "1k"})
    assert check_counts(n, expectation(n, cfg())) == []


@pytest.mark.parametrize("vendor, labels, fragment", [
    ("nvidia", {"nvidia.com/gpu.count": "eight"}, "GFD label nvidia.com/gpu.count='eight' (malformed:"),
    ("nvidia", {"nvidia.com/gpu.count": "4_0"}, "nvidia.com/gpu.count='4_0' (malformed:"),
    ("nvidia", {}, "GFD label nvidia.com/gpu.count (missing)"),
    ("intel", {"gpu.intel.com/device.count": "two"}, "gpu.intel.com/device.count='two' (malformed:"),
    ("amd", {"beta.amd.com/gpu.device-id.74a1": "x"}, "beta.amd.com/gpu.device-id.74a1='x' (malformed:"),
    ("amd", {}, "(missing: written only with -device-id)"),
])
def test_an_unknown_gpu_count_says_whether_the_label_is_missing_or_malformed(vendor, labels, fragment):
    """Before: `nvidia.com/gpu.count: eight` read as "no label"; an unknown count is never a pass: a missing label is
    NOTCHECKED-OPTIONAL (no GFD, no nodes.expectedGpus: the operator's choice), a malformed one ERROR-MALFORMED-DATA,
    which costs the node its certification (issue 29: it used to be NOTCHECKED-OPTIONAL, which certified it)."""
    c = cfg()
    c["vendor"] = vendor
    c["resourceName"] = {"nvidia": "nvidia.com/gpu", "intel": "gpu.intel.com/i915", "amd": "amd.com/gpu"}[vendor]
    n = node(labels=labels, capacity={c["resourceName"]: "4"})
    e = expectation(n, c)
    assert e.physical is None and fragment in e.source, e.source
    f = count_findings(n, e)
    want = "ERROR-MALFORMED-DATA" if "(malformed:" in fragment else "NOTCHECKED-OPTIONAL"
    assert [x.code for x in f] == [want] and fragment in f[0].message
    assert bool(e.malformed) == (want == "ERROR-MALFORMED-DATA")


def test_a_malformed_count_label_costs_the_certification_a_missing_one_does_not():
    """Issue 29 (review T4): `nvidia.com/gpu.count: eight` with the node probe off (the default) gave
    NOTCHECKED-OPTIONAL and the node was certified, its count never compared. Whoever can write the label must not
    certify a node by it."""
    from gpuconform import reasons

    n = node(labels={"nvidia.com/gpu.count": "eight"}, capacity={"nvidia.com/gpu": "8"})
    f = count_findings(n, expectation(n, cfg()))
    assert [x.code for x in f] == ["ERROR-MALFORMED-DATA"] and "nvidia.com/gpu.count='eight'" in f[0].message
    assert reasons.lookup(f[0].code).outcome == "error"
    assert not reasons.certified([("passed", None), ("error", f[0].code)])
    missing = node(labels={}, capacity={"nvidia.com/gpu": "8"})
    f = count_findings(missing, expectation(missing, cfg()))
    assert [x.code for x in f] == ["NOTCHECKED-OPTIONAL"]
    assert reasons.certified([("passed", None), ("skipped", f[0].code)])
