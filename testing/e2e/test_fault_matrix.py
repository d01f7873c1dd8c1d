"""End-to-end: the conformance suite against the local test bed, healthy and broken on purpose.

For the healthy cluster every check must pass. For each fault the bed can inject (localcluster/faults.py),
the intended check must report the intended reason code, and every other check must either pass or report
one of the codes that fault legitimately causes elsewhere (listed per fault below) - nothing else. The
matrix is printed (fault -> check -> reason -> detected) and written to reports/fault-matrix.txt.

Needs the local cluster (`make cluster-up`); skipped with a reason when it is not running.
"""

from __future__ import annotations

import json
from xml.etree import ElementTree

import pytest
from bedtools import KUBECONFIG, MATRIX_OUT, bed, run_suite

from gpuconform import catalog
from gpuconform.reasons import REASONS


pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not KUBECONFIG.exists(),
                                                  reason="local cluster not running (make cluster-up)")]

BUSY = "SKIP-F07-BUSY"
# fault -> ({check: expected code}, codes other checks may report because of the same fault)
MATRIX: dict[str, tuple[dict[str, str], set[str]]] = {
    "not-registered": ({"test_gpu_resource_is_in_node_capacity": "FAIL-F01-NOT-REGISTERED",
                        "test_advertised_gpus_match_the_hardware": "FAIL-F01-NOT-REGISTERED",
                        "test_kubelet_counts_the_plugin_registration": "FAIL-F01-NOT-REGISTERED"}, {BUSY}),
    "wrong-socket-dir": ({"test_plugin_socket_exists_in_device_plugins_dir": "FAIL-F01-NOT-REGISTERED",
                          "test_gpu_resource_is_in_node_capacity": "FAIL-F01-NOT-REGISTERED"},
                         {BUSY, "FAIL-F01-NOT-REGISTERED"}),
    # every pod gets GPU 0: a 2-GPU pod sees one device too
    # (the kubelet record check sees it too, unless the kubelet happened to assign GPU 0 to its pod)
    "shared-device": ({"test_burst_allocates_every_free_gpu_once_and_one_more_waits": "FAIL-DOUBLE-ALLOCATION"},
                      {"FAIL-F12-DEVICE-NOT-INJECTED", "FAIL-KUBELET-RECORD-MISMATCH"}),
    "capacity-zero": ({"test_gpu_resource_is_in_node_capacity": "FAIL-F02-CAPACITY-ZERO",
                       "test_advertised_gpus_match_the_hardware": "FAIL-F02-CAPACITY-ZERO"},
                      {BUSY, "FAIL-F01-NOT-REGISTERED"}),
    # skips, not failures: the checks that need a free GPU say so, and the run certifies nothing (exit 6)
    "gpus-busy": ({"test_vector_add_succeeds_through_the_plugin": BUSY, "test_pods_see_exactly_the_gpus_they_request": BUSY,
                   "test_burst_allocates_every_free_gpu_once_and_one_more_waits": BUSY,
                   "test_gpu_pod_start_latency_is_under_thresholds": BUSY,
                   "test_guaranteed_gpu_pod_gets_cpus_and_gpu_on_one_numa_node": BUSY,
                   "test_kubelet_assigned_devices_match_what_the_pod_sees": BUSY,
                   "test_gpu_access_held_through_the_run_survives_to_its_end": BUSY}, set()),
    # the kubelet's own allocatable list counts the Unhealthy GPU too (capacity 4, 3 healthy devices listed)
    "unhealthy-device": ({"test_advertised_gpus_match_the_hardware": "FAIL-F03-UNHEALTHY-DEVICES",
                          "test_advertised_gpus_match_the_pci_hardware": "FAIL-F03-UNHEALTHY-DEVICES"}, set()),
    "over-advertised": ({"test_advertised_gpus_match_the_hardware": "FAIL-F04-OVERADVERTISED"},
                        {"FAIL-F12-DEVICE-NOT-INJECTED", "FAIL-KUBELET-RECORD-MISMATCH"}),
    "admission-error": ({"test_vector_add_succeeds_through_the_plugin": "FAIL-F05-UNEXPECTED-ADMISSION"},
                        {"FAIL-F05-UNEXPECTED-ADMISSION"}),
    # the plugin says NUMA 1, the PCI tree NUMA 0: the kubelet's allocatable list shows the misreport directly
    "wrong-numa": ({"test_guaranteed_gpu_pod_gets_cpus_and_gpu_on_one_numa_node": "FAIL-F06-TOPOLOGY-AFFINITY",
                    "test_advertised_gpus_match_the_pci_hardware": "FAIL-NUMA-MISREPORTED"},
                   {"FAIL-F06-TOPOLOGY-AFFINITY"}),
    "crashloop": ({"test_plugin_pod_is_ready_and_not_crash_looping": "FAIL-F08-PLUGIN-CRASHLOOP"},
                  # a crashed plugin also leaves no socket and no allocatable GPUs behind
                  {BUSY, "FAIL-F01-NOT-REGISTERED", "FAIL-F02-CAPACITY-ZERO", "FAIL-F03-UNHEALTHY-DEVICES",
                   "FAIL-F05-UNEXPECTED-ADMISSION", "FAIL-F07-NOT-SCHEDULABLE", "FAIL-F11-REGISTRATION-UNSTABLE"}),
    "sharing-not-applied": ({"test_advertised_gpus_match_the_hardware": "FAIL-F10-SHARING-MISMATCH"}, set()),
    "not-injected": ({"test_vector_add_succeeds_through_the_plugin": "FAIL-F12-DEVICE-NOT-INJECTED",
                      "test_pods_see_exactly_the_gpus_they_request": "FAIL-F12-DEVICE-NOT-INJECTED"},
                     {"FAIL-F12-DEVICE-NOT-INJECTED", "SKIP-NUMA-NA", "FAIL-KUBELET-RECORD-MISMATCH"}),
    "old-driver": ({"test_vector_add_succeeds_through_the_plugin": "FAIL-F13-CUDA-FAILURE"}, set()),
    "image-missing": ({"test_vector_add_succeeds_through_the_plugin": "ERROR-F14-IMAGE-PULL"}, set()),
    "untolerated-taint": ({"test_vector_add_succeeds_through_the_plugin": "ERROR-F15-UNTOLERATED-TAINT"},
                          {"ERROR-F15-UNTOLERATED-TAINT"}),
    "slow-allocate": ({"test_gpu_pod_start_latency_is_under_thresholds": "FAIL-LATENCY-THRESHOLD"}, set()),
    "topology-policy-none": ({"test_kubelet_topology_and_cpu_manager_policies_are_as_expected":
                              "FAIL-TOPOLOGY-POLICY"}, set()),
    "numa-misreported": ({"test_guaranteed_gpu_pod_gets_cpus_and_gpu_on_one_numa_node": "FAIL-NUMA-MISALIGNED",
                          "test_advertised_gpus_match_the_pci_hardware": "FAIL-NUMA-MISREPORTED"}, set()),
    # The restart lands while allocation tests run: pods in flight may see the registration gap.
    # The restart lands while pods run (2 s after the first): checks then may see 0 free GPUs, an admission
    # error (UnexpectedAdmissionError, or TopologyAffinityError for a pod admitted before the plugin has
    # re-registered: the device manager has no devices to give hints for), or a log read through the kubelet
    # failing while it is down (ERROR-API); the registration check, run last on the node, names the cause.
    "kubelet-restart": ({"test_kubelet_counts_the_plugin_registration": "FAIL-F11-REGISTRATION-UNSTABLE"},
                        {BUSY, "FAIL-F02-CAPACITY-ZERO", "FAIL-F03-UNHEALTHY-DEVICES", "FAIL-F05-UNEXPECTED-ADMISSION",
                         "FAIL-F07-NOT-SCHEDULABLE",
                         "FAIL-F06-TOPOLOGY-AFFINITY", "ERROR-TIMEOUT", "ERROR-API"}),
    # time-slicing: replicas of one GPU share its UUID; more pods on GPU 0 than it has replicas is a double allocation
    "ts-shared-device": ({"test_burst_allocates_every_free_gpu_once_and_one_more_waits": "FAIL-DOUBLE-ALLOCATION"},
                         {"FAIL-KUBELET-RECORD-MISMATCH"}),
    "mig-not-injected": ({"test_vector_add_succeeds_through_the_plugin": "FAIL-F12-DEVICE-NOT-INJECTED",
                          "test_pods_see_exactly_the_gpus_they_request": "FAIL-F12-DEVICE-NOT-INJECTED"},
                         {"FAIL-F12-DEVICE-NOT-INJECTED", "SKIP-NUMA-NA", "FAIL-KUBELET-RECORD-MISMATCH"}),
    # a crash-looping companion (GPU Feature Discovery, with the chart's labels) is not the plugin: all pass
    "companion-crashloop": ({"test_plugin_pod_is_ready_and_not_crash_looping": None}, set()),
    # a tenant's crash-looping pod with the chart's labels (no DaemonSet owner, no device-plugins mount) is not
    # the plugin: all pass, and the plugin check names it among the look-alikes set aside (NAMED)
    "spoofed-plugin-pod": ({"test_plugin_pod_is_ready_and_not_crash_looping": None}, set()),
    "operator-not-ready": ({"test_gpu_operator_validation_passed_on_the_node": "ERROR-OPERATOR-NOT-READY"}, set()),
    # issue 9: the kubelet's own evidence, the hardware, the runtime
    "gpu-off-bus": ({"test_advertised_gpus_match_the_pci_hardware": "FAIL-F04-LABEL-HARDWARE-MISMATCH"}, set()),
    "env-exposure": ({"test_pods_see_exactly_the_gpus_they_request": "FAIL-ISOLATION"}, set()),
    # every pod naming the missing RuntimeClass is refused at create
    "runtime-class-missing": ({"test_vector_add_succeeds_through_the_plugin": "FAIL-F12-INJECTION-FAILED",
                               "test_pods_see_exactly_the_gpus_they_request": "FAIL-F12-INJECTION-FAILED"},
                              {"FAIL-F12-INJECTION-FAILED"}),
    # every pod naming the class is created, and its sandbox fails on the node (the kubelet's events say why)
    "runtime-handler-missing": ({"test_vector_add_succeeds_through_the_plugin": "FAIL-F12-INJECTION-FAILED",
                                 "test_pods_see_exactly_the_gpus_they_request": "FAIL-F12-INJECTION-FAILED"},
                                {"FAIL-F12-INJECTION-FAILED"}),
    # two tenant pods hold GPUs (others' pods: the all-GPU checks run on what is left)
    "double-assigned": ({"test_kubelet_assigned_devices_match_what_the_pod_sees": "FAIL-DOUBLE-ALLOCATION"},
                        {BUSY, "SKIP-F06-FRAGMENTED"}),
    "access-lost": ({"test_gpu_access_held_through_the_run_survives_to_its_end": "FAIL-F12-ACCESS-LOST"}, set()),
    # issue 15: NVIDIA's own plugin (v0.19.3) reacting to what NVML reports through the mock
    "xid-unhealthy": ({"test_advertised_gpus_match_the_hardware": "FAIL-F03-UNHEALTHY-DEVICES",
                       "test_advertised_gpus_match_the_pci_hardware": "FAIL-F03-UNHEALTHY-DEVICES"}, set()),
    # a lost GPU makes the plugin mark every device Unhealthy: no GPU is free for the workload checks
    "gpu-lost": ({"test_advertised_gpus_match_the_hardware": "FAIL-F03-UNHEALTHY-DEVICES",
                  "test_gpu_resource_is_in_node_capacity": "FAIL-F03-UNHEALTHY-DEVICES",
                  "test_advertised_gpus_match_the_pci_hardware": "FAIL-F03-UNHEALTHY-DEVICES"}, {BUSY}),
    "gpu-fell-off-bus": ({"test_advertised_gpus_match_the_hardware": "FAIL-F03-UNHEALTHY-DEVICES",
                          "test_advertised_gpus_match_the_pci_hardware": "FAIL-F04-LABEL-HARDWARE-MISMATCH"}, set()),
}

# The DRA rows (issue 17): faults of the bed's DRA node (localcluster/dranode.py `dra fault NAME`: its simulated
# driver, kube-controller-manager, kube-scheduler, admission, or API objects beside it), judged on that node's
# checks only (-k dra; DRA_ROW_NODE names another node a row is judged on): fault -> (-k selection,
# {check: expected code}, codes its other checks may report because of the same fault). The DRA node is brought
# up for these rows, in its default shape (the GPU operator's DRA stack: plain dra, its admin-access operands
# running), and removed after them (dra_node below); the rows above run without it.
DRA_NODE = "gpu-node-dra"
PREPARE = "FAIL-DRA-PREPARE-FAILED"
DRA_MATRIX: dict[str, tuple[str, dict[str, str], set[str]]] = {
    # the kubelet cannot call an unregistered driver: every claim's prepare fails; and it wipes the slices of a
    # driver that is not registered (kubernetes v1.37.2 pkg/kubelet/cm/dra/manager.go, 30 s after start), so the
    # checks that come later find no device free, as with driver-gone
    "no-register": ("dra", {"test_plugin_socket_exists_in_device_plugins_dir": "FAIL-DRA-NOT-REGISTERED",
                            "test_kubelet_counts_the_plugin_registration": "FAIL-DRA-NOT-REGISTERED"},
                    {PREPARE, BUSY, "FAIL-DRA-NO-SLICES", "FAIL-DRA-DEVICES-NOT-HARDWARE", "NOTCHECKED-DRA-NO-MIG"}),
    # one device fewer: with the run-long pod's, a check needing two finds one free
    "omit-last-device": ("dra", {"test_advertised_gpus_match_the_pci_hardware": "FAIL-DRA-DEVICES-NOT-HARDWARE"},
                         {BUSY}),
    # the scheduler may allocate the phantom device, which the driver then cannot prepare
    "extra-device": ("dra", {"test_advertised_gpus_match_the_pci_hardware": "FAIL-DRA-DEVICES-NOT-HARDWARE"},
                     {PREPARE}),
    # no driver pod, no slice, no socket: nothing to allocate from
    "driver-gone": ("dra", {"test_gpu_resource_is_in_node_capacity": "FAIL-DRA-NO-SLICES",
                            "test_plugin_socket_exists_in_device_plugins_dir": "FAIL-DRA-NOT-REGISTERED",
                            "test_kubelet_counts_the_plugin_registration": "FAIL-DRA-NOT-REGISTERED"},
                    {BUSY, "FAIL-F08-PLUGIN-NOT-READY", "FAIL-DRA-DEVICES-NOT-HARDWARE", "NOTCHECKED-DRA-NO-MIG"}),
    # the scheduler allocates from complete pools only: no device is free for the workload checks
    "pool-incomplete": ("dra", {"test_gpu_resource_is_in_node_capacity": "FAIL-DRA-POOL-INCOMPLETE"}, {BUSY}),
    "prepare-fails": ("dra", {"test_vector_add_succeeds_through_the_plugin": PREPARE}, {PREPARE}),
    "wrong-device": ("dra", {"test_kubelet_assigned_devices_match_what_the_pod_sees": "FAIL-DRA-WRONG-DEVICE"},
                     {"FAIL-DRA-WRONG-DEVICE"}),
    # GPU 0 for every claim: a 2-device claim sees one, a claim given GPU 1 sees GPU 0
    "double-inject": ("dra", {"test_burst_allocates_every_free_gpu_once_and_one_more_waits": "FAIL-DRA-DOUBLE-INJECTION"},
                      {"FAIL-DRA-WRONG-DEVICE", "FAIL-F12-DEVICE-NOT-INJECTED"}),
    # without the controller no claim is made from a template either: only the shared-claim check (its own claim)
    "claim-controller-off": ("shared_claim and dra", {
        "test_a_shared_claim_gives_its_pods_one_device_and_is_released_after_them": "FAIL-DRA-CLAIM-NOT-DEALLOCATED"},
        set()),
    # the last GPU tainted NoSchedule: out of service, so a check needing both devices finds one free
    "device-tainted": ("dra", {"test_advertised_gpus_match_the_hardware": "FAIL-F03-UNHEALTHY-DEVICES"}, {BUSY}),
    # ... and kube-scheduler without DRADeviceTaints: the burst's pods (the extra one at the latest) get it
    "taint-ignored": ("dra", {"test_advertised_gpus_match_the_hardware": "FAIL-F03-UNHEALTHY-DEVICES",
                              "test_burst_allocates_every_free_gpu_once_and_one_more_waits":
                                  "FAIL-DRA-TAINTED-DEVICE-ALLOCATED"}, {BUSY}),
    # the last GPU reported Unhealthy to the kubelet but left in service: a burst pod (the run-long one holds the
    # first GPU) is allocated it
    "unhealthy-untainted": ("dra", {"test_burst_allocates_every_free_gpu_once_and_one_more_waits":
                                    "FAIL-DRA-UNHEALTHY-DEVICE-IN-SERVICE"}, set()),
    # the GPUs and their MIG devices published without shared counters: a GPU is allocated beside its MIG device
    "mig-no-counters": ("mig_device and dra", {
        "test_a_mig_device_and_its_parent_gpu_are_never_both_allocated": "FAIL-DRA-MIG-AND-PARENT-ALLOCATED"}, set()),
    # a MutatingAdmissionPolicy labels every new namespace (the run's too) resource.kubernetes.io/admin-access=true
    "admin-access-label": ("admin_access and dra", {
        "test_an_admin_access_claim_is_refused_in_a_namespace_without_the_label": "FAIL-DRA-ADMIN-ACCESS-GRANTED"},
        set()),
    # an admin's DeviceTaintRule (resource.k8s.io/v1) withholds the last GPU, NoSchedule; the slice is unchanged:
    # out of service as with device-tainted, so a check needing every device finds one fewer free
    "taint-rule": ("dra", {"test_advertised_gpus_match_the_hardware": "FAIL-F03-UNHEALTHY-DEVICES"}, {BUSY}),
    # a gpu.nvidia.com ResourceSlice for gpu-node-0 offering its GPUs (same uuids) beside its device plugin: judged
    # on gpu-node-0, which stays a device-plugin node (DRA_ROW_NODE)
    "offered-twice": ("gpu-node-0 and capacity", {"test_gpu_resource_is_in_node_capacity": "FAIL-GPU-OFFERED-TWICE"},
                      set()),
}
# The node a DRA row's checks are judged on, where it is not the DRA node
DRA_ROW_NODE = {"offered-twice": "gpu-node-0"}
# A DRA-node result that is no finding: a check not made on that path yet
DRA_NOT_MADE = "NOTCHECKED-DRA-PATH"

# Exit codes other than 1 (a check failed): skips alone certify nothing.
EXIT = {"gpus-busy": 6, "companion-crashloop": 0, "spoofed-plugin-pod": 0}
# fault -> (JUnit property, text it must contain): what a passing check must still say about the fault
NAMED: dict[str, tuple[str, str]] = {"spoofed-plugin-pod": ("plugin_look_alikes", "tenant-spoof/my-job (no DaemonSet "
                                                                                  "owner, no device-plugins hostPath mount)")}


def test_healthy_cluster_passes_every_check_and_leaves_nothing_behind(tmp_path):
    bed("fault-clear")
    rc, s = run_suite(tmp_path)
    bad = [r for r in s["results"] if r["outcome"] != "passed"]
    assert not bad, json.dumps(bad, indent=1)
    assert rc == 0 and s["exit_status"] == 0
    assert s["certified_nodes"] == s["gpu_nodes"] and s["gpu_nodes"]
    assert_nothing_left_behind()


def assert_nothing_left_behind() -> None:
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(str(KUBECONFIG)))
    left = [ns.metadata.name for ns in api.list_namespace(label_selector="app.kubernetes.io/part-of=gpuconform").items
            if ns.status.phase != "Terminating"]
    assert not left, f"namespaces left behind: {left}"


_matrix_rows: list[str] = []
FAULT_W = max(map(len, [*MATRIX, *(f"dra {f}" for f in DRA_MATRIX)]))  # the fault column fits the longest name
CHECK_W = max(len(c.name) for c in catalog.CHECKS)  # and the check column the longest check
CODE_W = max(len(c) for c in REASONS)  # and the code column the longest code


@pytest.mark.faults
@pytest.mark.parametrize("fault", list(MATRIX))
def test_fault_is_detected_by_its_check_with_its_reason_code(fault, tmp_path):
    expected, allowed = MATRIX[fault]
    bed("fault", fault)
    junit = tmp_path / "junit.xml"
    try:
        rc, s = run_suite(tmp_path, "--junitxml", str(junit))
    finally:
        bed("fault-clear")
    by_check = {r["check"]: r for r in s["results"]}
    problems = []
    for check, code in expected.items():  # code None: the check must pass (a fault it must not mistake)
        r = by_check.get(check)
        got = r and r["reason"]
        detected = (got == code and r["outcome"] != "passed") if code else bool(r) and r["outcome"] == "passed"
        _matrix_rows.append(f"{fault:{FAULT_W}} {check:{CHECK_W}} {code or 'passes':{CODE_W}} "
                            f"{('detected' if code else 'passed') if detected else 'MISSED: ' + str(got)}")
        if not detected:
            problems.append(f"{check}: expected {code}, got {r['outcome'] if r else 'not run'} {got} "
                            f"{r['message'] if r else ''}")
    for r in s["results"]:
        if r["check"] in expected or r["outcome"] == "passed":
            continue
        if r["reason"] not in allowed:
            problems.append(f"misfire: {r['check']} {r['outcome']} {r['reason']}: {r['message'][:300]}")
    if fault in NAMED:
        prop, text = NAMED[fault]
        values = [p.get("value", "") for p in ElementTree.parse(junit).iter("property") if p.get("name") == prop]
        if not any(text in v for v in values):
            problems.append(f"no JUnit property {prop} names {text!r} (found {values})")
    assert rc == EXIT.get(fault, 1), f"exit {rc} on a broken cluster (expected {EXIT.get(fault, 1)})"
    assert not problems, "\n".join(problems)


@pytest.mark.faults
@pytest.mark.parametrize("fault", list(DRA_MATRIX))
def test_dra_fault_is_detected_on_the_dra_node_with_its_code(fault, dra_node, tmp_path):
    select, expected, allowed = DRA_MATRIX[fault]
    node = DRA_ROW_NODE.get(fault, DRA_NODE)
    bed("dra", "fault", fault)
    try:
        rc, s = run_suite(tmp_path, "-k", select)
    finally:
        bed("dra", "fault")
    got = {r["check"]: r for r in s["results"] if r["node"] == node}
    problems = []
    for check, code in expected.items():
        r = got.get(check)
        detected = bool(r) and r["reason"] == code and r["outcome"] == "failed" and node in r["message"]
        _matrix_rows.append(f"{'dra ' + fault:{FAULT_W}} {check:{CHECK_W}} {code:{CODE_W}} "
                            f"{'detected' if detected else 'MISSED: ' + str(r and r['reason'])}")
        if not detected:
            problems.append(f"{check}: expected {code}, got {r['outcome'] if r else 'not run'} {r and r['reason']} "
                            f"{r['message'] if r else ''}")
    for r in s["results"]:
        if r["check"] in expected or r["outcome"] == "passed" or r["reason"] == DRA_NOT_MADE:
            continue
        if r["node"] != node or r["reason"] not in allowed:
            problems.append(f"misfire: {r['node']} {r['check']} {r['outcome']} {r['reason']}: {r['message'][:300]}")
    assert rc == 1 and node not in s["certified_nodes"], f"exit {rc}, certified {s['certified_nodes']}"
    assert not problems, "\n".join(problems)


def teardown_module(module):
    if _matrix_rows:
        text = f"{'fault':{FAULT_W}} {'check':{CHECK_W}} {'reason code':{CODE_W}} result\n" + "\n".join(_matrix_rows) + "\n"
        MATRIX_OUT.parent.mkdir(exist_ok=True)
        MATRIX_OUT.write_text(text)  # conftest.py prints it in the terminal summary
