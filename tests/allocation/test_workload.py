"""Allocation through the plugin: a CUDA workload runs, pods see exactly the GPUs they asked for, bursts
allocate every free GPU once and no more."""

import time

import pytest

from fixtures.checks import hand_over, require_free_gpus, require_nvidia_tooling
from gpuconform import pods, timing, verdicts


def _probe_log(run, ns, name, deadline_s=timing.LOG_READ_TIMEOUT_S):
    """A Running probe prints then sleeps: read its log until the end marker (bounded)."""
    end = time.monotonic() + deadline_s
    while True:
        text = run.pod_log(ns, name)
        if "== end ==" in text or time.monotonic() > end:
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
    device nodes and nvidia-smi agree; MIG: N MIG devices; time-slicing: one replica, so one GPU)."""
    require_nvidia_tooling(cfg, "device visibility from nvidia-smi and /dev/nvidiaN")
    free = require_free_gpus(run, gpu_node, 1)
    exp = run.expectation(gpu_node)
    n = verdicts.isolation_request(exp, free, cfg.get("limits.maxGpusPerNode"))
    ns = run.ensure_namespace()
    deadline = cfg.seconds("timeouts.podComplete")
    res = run.node(gpu_node).resource
    zero = pod_runner.create(pods.probe_pod(pods.pod_name("iso0", gpu_node), ns, run.run_id, "isolation", gpu_node,
                                            cfg, 0, deadline=deadline))
    some = pod_runner.create(pods.probe_pod(pods.pod_name(f"iso{n}", gpu_node), ns, run.run_id, "isolation", gpu_node,
                                            cfg, n, deadline=deadline, resource=res))
    pod_runner.wait([zero, some], "done", "timeouts.podComplete", gpu_node)
    s0, sn = (verdicts.Seen.from_log(p, k, run.pod_log(ns, p)) for p, k in ((zero, 0), (some, n)))
    evidence.note("visible", {"no-request": s0.evidence(), f"{n} x {res}": sn.evidence(), "unit": exp.unit})
    hand_over(verdicts.isolation_findings(gpu_node, s0, sn, exp.unit, exp.per_device))


@pytest.mark.gpus("all")
def test_burst_allocates_every_free_gpu_once_and_one_more_waits(run, cfg, gpu_node, pod_runner, evidence):
    """MUST: N single-device pods created at once (N = free devices of the node's GPU resource) all run, each
    device held by no more pods than it may be (1; a time-sliced GPU: its replicas); pod N+1 stays Pending for
    lack of devices (not an admission failure)."""
    require_nvidia_tooling(cfg, "telling devices apart by nvidia-smi UUID")
    free = require_free_gpus(run, gpu_node, 1)
    exp = run.expectation(gpu_node)
    res = run.node(gpu_node).resource
    n = min(free, cfg.get("limits.maxGpusPerNode"))
    ns = run.ensure_namespace()
    deadline = cfg.seconds("timeouts.podComplete")
    script = pods.PROBE_SCRIPT + f"\nsleep {timing.POD_HOLD_S}"
    names = []
    for i in range(n):
        m = pods.probe_pod(pods.pod_name(f"burst{i}", gpu_node), ns, run.run_id, "burst", gpu_node, cfg, 1,
                           deadline=deadline, resource=res)
        m["spec"]["containers"][0]["command"] = ["sh", "-c", script]
        names.append(pod_runner.create(m))
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
