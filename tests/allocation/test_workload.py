"""Allocation through the plugin: a CUDA workload runs, pods see exactly the GPUs they asked for, bursts
allocate every free GPU once and no more."""

import time

import pytest

from fixtures.checks import raise_for, require_nvidia_tooling
from gpuconform import pods, probes, verdicts
from gpuconform.reasons import skip_reason


def _need(run, node, n):
    if (why := run.node(node).skip_reason(n)):
        pytest.skip(skip_reason(*why))
    free = run.free_gpus(node)
    if free < n:
        pytest.skip(skip_reason("GPU-F07-BUSY", f"{node} has {free} free {run.node(node).resource} now, the check "
                                f"needs {n}"))
    return free


def _probe_log(run, ns, name, deadline_s=30.0):
    """A Running probe prints then sleeps: read its log until the end marker (bounded)."""
    end = time.monotonic() + deadline_s
    while True:
        text = run.pod_log(ns, name)
        if "== end ==" in text or time.monotonic() > end:
            return text
        time.sleep(0.5)


def _seen(run, ns, name, requested, log=None):
    s = probes.sections(log if log is not None else run.pod_log(ns, name))
    devs = [d for d in s.get("dev", "").splitlines() if d.strip()]
    return verdicts.Seen(name, requested, devs, probes.parse_nvidia_smi_l(s.get("nvidia-smi -L", "")), s.get("env", ""))


def _evidence(seen):
    return {"dev": seen.dev, "nvidia-smi": [g.uuid for g in seen.gpus],
            "mig": [m.uuid for g in seen.gpus for m in g.migs], "env": seen.env}


@pytest.mark.gpus(1)
def test_vector_add_succeeds_through_the_plugin(run, cfg, gpu_node, pod_runner, evidence):
    """MUST: a pod requesting one device of the node's GPU resource (a whole GPU, a time-sliced replica or a MIG
    device) runs the CUDA vector-add sample to 'Test PASSED' with exit code 0."""
    require_nvidia_tooling(cfg, "the CUDA vector-add sample")
    _need(run, gpu_node, 1)
    ns = run.ensure_namespace()
    name = pod_runner.create(pods.vector_add_pod(f"vectoradd-{gpu_node}"[:63], ns, run.run_id, gpu_node, cfg,
                                                 run.cfg.seconds("timeouts.podComplete"), run.node(gpu_node).resource))
    state = pod_runner.wait([name], "done", "timeouts.podComplete", gpu_node)[name]
    log = run.pod_log(ns, name)
    result = probes.vector_add_result(log, pods.exit_code(state))
    if not result.passed:
        raise_for(result.code, f"{gpu_node}: vector-add pod {name} ({run.node(gpu_node).resource}) exited "
                  f"{pods.exit_code(state)}: {result.cause}; output tail: {log.strip()[-300:]!r}")


@pytest.mark.gpus(2)
def test_pods_see_exactly_the_gpus_they_request(run, cfg, gpu_node, pod_runner, evidence):
    """MUST: a pod requesting no GPU sees none; a pod requesting N devices sees exactly those N (whole GPUs:
    device nodes and nvidia-smi agree; MIG: N MIG devices; time-slicing: one replica, so one GPU)."""
    require_nvidia_tooling(cfg, "device visibility from nvidia-smi and /dev/nvidiaN")
    free = _need(run, gpu_node, 1)
    exp = run.expectation(gpu_node)
    # A time-sliced node hands out replicas; upstream can refuse requests for more than one
    # (failRequestsGreaterThanOne), so one replica is the request every healthy sharing config admits.
    n = 1 if exp.per_device > 1 else min(2, free, cfg["limits"]["maxGpusPerNode"])
    ns = run.ensure_namespace()
    deadline = run.cfg.seconds("timeouts.podComplete")
    res = run.node(gpu_node).resource
    zero = pod_runner.create(pods.probe_pod(f"iso0-{gpu_node}"[:63], ns, run.run_id, "isolation", gpu_node, cfg, 0,
                                            deadline=deadline))
    some = pod_runner.create(pods.probe_pod(f"iso{n}-{gpu_node}"[:63], ns, run.run_id, "isolation", gpu_node, cfg, n,
                                            deadline=deadline, resource=res))
    pod_runner.wait([zero, some], "done", "timeouts.podComplete", gpu_node)
    s0, sn = _seen(run, ns, zero, 0), _seen(run, ns, some, n)
    evidence.note("visible", {"no-request": _evidence(s0), f"{n} x {res}": _evidence(sn), "unit": exp.unit})
    for finding in verdicts.isolation_findings(gpu_node, s0, sn, exp.unit, exp.per_device):
        raise_for(finding.code, finding.message)


@pytest.mark.gpus("all")
def test_burst_allocates_every_free_gpu_once_and_one_more_waits(run, cfg, gpu_node, pod_runner, evidence):
    """MUST: N single-device pods created at once (N = free devices of the node's GPU resource) all run, each
    device held by no more pods than it may be (1; a time-sliced GPU: its replicas); pod N+1 stays Pending for
    lack of devices (not an admission failure)."""
    require_nvidia_tooling(cfg, "telling devices apart by nvidia-smi UUID")
    free = _need(run, gpu_node, 1)
    exp = run.expectation(gpu_node)
    res = run.node(gpu_node).resource
    n = min(free, cfg["limits"]["maxGpusPerNode"])
    ns = run.ensure_namespace()
    deadline = run.cfg.seconds("timeouts.podComplete")
    script = pods.PROBE_SCRIPT + "\nsleep 600"
    names = []
    for i in range(n):
        m = pods.probe_pod(f"burst{i}-{gpu_node}"[:63], ns, run.run_id, "burst", gpu_node, cfg, 1, deadline=deadline,
                           resource=res)
        m["spec"]["containers"][0]["command"] = ["sh", "-c", script]
        names.append(pod_runner.create(m))
    pod_runner.wait(names, "running", "timeouts.podStart", gpu_node)
    extra = None
    if n == free:  # only when the burst took every free device can one more be expected to wait
        m = pods.probe_pod(f"burst-extra-{gpu_node}"[:63], ns, run.run_id, "burst", gpu_node, cfg, 1,
                           deadline=deadline, resource=res)
        extra = pod_runner.create(m)
    seen = [_seen(run, ns, name, 1, _probe_log(run, ns, name)) for name in names]
    findings, owners = verdicts.burst_findings(gpu_node, seen, exp.per_device)
    evidence.note("device owners", {"resource": res, "per device": exp.per_device, "owners": owners})
    for finding in findings:
        raise_for(finding.code, finding.message)
    if extra:
        states = pod_runner.wait([extra], "running", "timeouts.podStart", gpu_node, allow=("GPU-F07-BUSY",))
        phase = states[extra]["status"].get("phase")
        if phase != "Pending":
            raise_for("GPU-F04-OVERADVERTISED", f"{gpu_node}: pod {extra} ({res} #{n + 1}) reached {phase} although "
                      f"all {n} free devices were held by the burst")
