"""Allocation through the plugin: a CUDA workload runs, pods see exactly the GPUs they asked for, bursts
allocate every free GPU once and no more."""

import time

import pytest

from gpuconform.pytest_plugin.checks import hand_over, node_probe_report, require_free_gpus, require_nvidia_tooling
from gpuconform import pods, probes, runtimemode, timing, verdicts
from gpuconform.reasons import EnvironmentProblem


def _probe_log(run, ns, name, deadline_s=timing.LOG_READ_TIMEOUT_S, until=lambda text: "== end ==" in text,
               tail=None):
    """A Running probe prints then sleeps: read its log (its last `tail` lines) until the end marker (or `until`
    holds; bounded)."""
    end = time.monotonic() + deadline_s
    while True:
        text = run.pod_log(ns, name, tail=tail)
        if until(text) or time.monotonic() > end:
            return text
        time.sleep(timing.LOG_READ_EVERY_S)


@pytest.mark.gpus(1)
def test_vector_add_succeeds_through_the_plugin(run, cfg, gpu_node, pod_runner, evidence):
    """MUST: a pod requesting one device of the node's GPU resource (a whole GPU, a time-sliced replica or a MIG
    device) runs the CUDA vector-add sample to 'Test PASSED' with exit code 0."""
    require_nvidia_tooling(cfg, "the CUDA vector-add sample")
    require_free_gpus(run, gpu_node, 1)
    ns = run.ensure_namespace()
    res = run.node(gpu_node).resource
    name = pod_runner.create(pods.vector_add_pod(pods.pod_name("vectoradd", gpu_node), ns, run.run_id, gpu_node, cfg,
                                                 cfg.seconds("timeouts.podComplete"), res))
    state = pod_runner.wait([name], "done", "timeouts.podComplete", gpu_node)[name]
    hand_over(verdicts.vector_add_findings(gpu_node, name, res, run.pod_log(ns, name), pods.exit_code(state)))


@pytest.mark.gpus(2)
def test_pods_see_exactly_the_gpus_they_request(run, cfg, gpu_node, pod_runner, evidence):
    """MUST: a pod requesting no GPU sees none; a pod requesting N devices sees exactly those N (whole GPUs:
    device nodes and nvidia-smi agree; MIG: N MIG devices; time-slicing: one replica, so one GPU). Both set
    NVIDIA_VISIBLE_DEVICES=all, as CUDA base images do: the runtime must not let a pod's own variable widen what
    it was allocated (accept-nvidia-visible-devices-envvar-when-unprivileged=false, or the volume-mounts/CDI
    device list strategies)."""
    require_nvidia_tooling(cfg, "device visibility from nvidia-smi and /dev/nvidiaN")
    free = require_free_gpus(run, gpu_node, 1)
    exp = run.expectation(gpu_node)
    n = verdicts.isolation_request(exp, free, cfg.get("limits.maxGpusPerNode"))
    ns = run.ensure_namespace()
    deadline = cfg.seconds("timeouts.podComplete")
    res = run.node(gpu_node).resource
    env = {"NVIDIA_VISIBLE_DEVICES": "all"}  # what CUDA base images set (their Dockerfiles' ENV)
    zero = pod_runner.create(pods.probe_pod(pods.pod_name("iso0", gpu_node), ns, run.run_id, "isolation", gpu_node,
                                            cfg, 0, deadline=deadline, env=env))
    some = pod_runner.create(pods.probe_pod(pods.pod_name(f"iso{n}", gpu_node), ns, run.run_id, "isolation", gpu_node,
                                            cfg, n, deadline=deadline, resource=res, env=env))
    pod_runner.wait([zero, some], "done", "timeouts.podComplete", gpu_node)
    s0, sn = (verdicts.Seen.from_log(p, k, run.pod_log(ns, p)) for p, k in ((zero, 0), (some, n)))
    evidence.note("visible", {"no-request": s0.evidence(), f"{n} x {res}": sn.evidence(), "unit": exp.unit,
                              "pod env": env})
    rc, mode = cfg.get("runtimeClassName"), None
    if rc and (s0.dev or s0.gpus):  # does the configured RuntimeClass fit the install? (one LIST per run, optional)
        classes, why_not = run.inventory.runtime_classes()
        found = run.plugins.get(gpu_node)
        mode = runtimemode.recognise(classes, found.pods if found else [], why_not)
        evidence.note("runtime mode", mode.evidence())
    hand_over(verdicts.isolation_findings(gpu_node, s0, sn, exp.unit, exp.per_device, mode, rc))


@pytest.mark.node_probe
@pytest.mark.gpus(1)
def test_kubelet_assigned_devices_match_what_the_pod_sees(run, cfg, gpu_node, pod_runner, evidence):
    """MUST: the device IDs the kubelet assigned to a suite pod's container (its own record: the PodResources
    List, read by the optional node probe) are the devices the container sees (GPU or MIG UUIDs in nvidia-smi; a
    time-sliced replica by its GPU), and no device ID is assigned to two containers at once across every pod on
    the node."""
    require_nvidia_tooling(cfg, "matching the kubelet's device IDs to nvidia-smi UUIDs")
    hand_over(verdicts.not_checked(cfg.get("nodeProbe.enabled"), "nodeProbe.enabled is false: the kubelet's record "
                                                                 "is not checked"))
    require_free_gpus(run, gpu_node, 1)
    ns = run.ensure_namespace()
    res = run.node(gpu_node).resource
    holder = pod_runner.create(pods.probe_pod(pods.pod_name("record", gpu_node), ns, run.run_id, "kubelet-record",
                                              gpu_node, cfg, 1, deadline=cfg.seconds("timeouts.podComplete"),
                                              resource=res, hold_s=timing.POD_HOLD_S))
    pod_runner.wait([holder], "running", "timeouts.podStart", gpu_node)
    seen = verdicts.Seen.from_log(holder, 1, _probe_log(run, ns, holder))
    report = node_probe_report(run, cfg, pod_runner, evidence, gpu_node, "record")
    twice = verdicts.double_assignment_findings(gpu_node, report)
    if twice and twice[0].code == "GPU-DOUBLE-ALLOCATION":  # only pods still running count (kubelets before 1.34)
        active = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in run.pods_on_node(gpu_node)}
        twice = verdicts.double_assignment_findings(gpu_node, report, active)
    hand_over(twice)
    found, ev = verdicts.assignment_findings(gpu_node, report, ns, holder, "probe", res, seen.ids)
    evidence.note("assignment", ev)
    hand_over(found)


@pytest.mark.spans_run
@pytest.mark.gpus(1)
def test_gpu_access_held_through_the_run_survives_to_its_end(run, cfg, gpu_node, pod_runner, evidence,
                                                             record_property):
    """MUST: a pod that holds one device from the start of the run to its end still sees it at the end. The pod
    repeats its device check every few seconds; the last one, printed after every other check on the node is
    done, must see what the first saw (access is lost when the runtime's device cgroup rules are reset, e.g. by
    a systemd daemon-reload). On a node with a single free device it is not checked: holding that device for
    the run would leave the other checks none. Also records how many pods the topology manager rejected on the
    node during the run (kubelet metrics, where nodes/proxy is granted): evidence, not a verdict."""
    require_nvidia_tooling(cfg, "device visibility from nvidia-smi")
    hand_over(verdicts.not_checked(run.node(gpu_node).free != 1, "the node has one free device: holding it through "
                                                                 "the run would leave the other checks none"))
    require_free_gpus(run, gpu_node, 1)
    ns = run.ensure_namespace()
    name = pod_runner.create(pods.run_long_pod(pods.pod_name("access", gpu_node), ns, run.run_id, "access", gpu_node,
                                               cfg, run.node(gpu_node).resource))
    pod_runner.wait([name], "running", "timeouts.podStart", gpu_node)
    run.held_for_run[gpu_node] = 1
    try:
        start = probes.rounds(_probe_log(run, ns, name, until=lambda text: bool(probes.rounds(text))))
        run.wait_for_rest_of_node(gpu_node)
        # the last rounds only (a run-long log grows by a round every RUN_HOLD_EVERY_S): wait for one that began
        # after the node's other checks had ended
        tail = timing.RUN_HOLD_TAIL_LINES
        seen = max((n for n, _ in probes.rounds(run.pod_log(ns, name, tail=tail))), default=0)
        end = probes.rounds(_probe_log(run, ns, name, tail=tail,
                                       until=lambda text: any(n > seen for n, _ in probes.rounds(text))))
    finally:
        run.held_for_run.pop(gpu_node, None)
    first = verdicts.Seen.from_log(name, 1, start[0][1]) if start else None
    last = verdicts.Seen.from_log(name, 1, end[-1][1]) if end and end[-1][0] > seen else None
    done = end[-1][0] if end else len(start)
    evidence.note("device checks", {"rounds": done, "first": first and first.evidence(),
                                    "last": last and last.evidence()})
    # evidence only: an unreadable kubelet, or a malformed /metrics (skipped where it is judged), decides nothing here
    try:
        after = run.kubelet_metrics(gpu_node)
    except (EnvironmentProblem, pytest.skip.Exception):
        after = None
    admission = verdicts.admission_errors_delta(run.kubelet_metrics_before.get(gpu_node), after)
    evidence.note("topology manager", admission)  # evidence only: other workloads' rejections are not a verdict
    record_property("topology_admission_errors_during_run", admission["topology manager admission errors during the run"])
    hand_over(verdicts.access_findings(gpu_node, name, first, last, done))


@pytest.mark.gpus("all")
def test_burst_allocates_every_free_gpu_once_and_one_more_waits(run, cfg, gpu_node, pod_runner, evidence):
    """MUST: N single-device pods created at once (N = free devices of the node's GPU resource) all run, each
    device held by no more pods than it may be (1; a time-sliced GPU: its replicas); pod N+1 stays Pending for
    lack of devices (not an admission failure)."""
    require_nvidia_tooling(cfg, "telling devices apart by nvidia-smi UUID")
    free = require_free_gpus(run, gpu_node, 1)
    exp = run.expectation(gpu_node)
    res = run.node(gpu_node).resource
    n = verdicts.burst_size(free, cfg.get("limits.maxGpusPerNode"))
    ns = run.ensure_namespace()
    deadline = cfg.seconds("timeouts.podComplete")
    names = []
    for i in range(n):
        names.append(pod_runner.create(pods.probe_pod(pods.pod_name(f"burst{i}", gpu_node), ns, run.run_id, "burst",
                                                      gpu_node, cfg, 1, deadline=deadline, resource=res,
                                                      hold_s=timing.POD_HOLD_S)))
    pod_runner.wait(names, "running", "timeouts.podStart", gpu_node)
    extra = None
    if n == free:  # only when the burst took every free device can one more be expected to wait
        m = pods.probe_pod(pods.pod_name("burst-extra", gpu_node), ns, run.run_id, "burst", gpu_node, cfg, 1,
                           deadline=deadline, resource=res)
        extra = pod_runner.create(m)
    seen = [verdicts.Seen.from_log(name, 1, _probe_log(run, ns, name)) for name in names]
    findings, owners = verdicts.burst_findings(gpu_node, seen, exp.per_device)
    evidence.note("device owners", {"resource": res, "per device": exp.per_device, "owners": owners})
    hand_over(findings)
    if extra:
        state = pod_runner.wait([extra], "running", "timeouts.podStart", gpu_node, allow=("GPU-F07-BUSY",))[extra]
        hand_over(verdicts.extra_pod_findings(gpu_node, state, res, n))
