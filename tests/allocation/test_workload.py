"""Allocation through the plugin: a CUDA workload runs, pods see exactly the GPUs they asked for, bursts
allocate every free GPU once and no more."""

import time

import pytest

from fixtures.plugin import raise_for, require_nvidia_tooling
from gpuconform import pods, probes
from gpuconform.reasons import skip_reason


def _need(run, node, n):
    if (why := run.node(node).skip_reason(n)):
        pytest.skip(skip_reason(*why))
    free = run.free_gpus(node)
    if free < n:
        pytest.skip(skip_reason("GPU-F07-BUSY", f"{node} has {free} free GPU(s) now, the check needs {n}"))
    return free


def _probe_log(run, ns, name, deadline_s=30.0):
    """A Running probe prints then sleeps: read its log until the end marker (bounded)."""
    end = time.monotonic() + deadline_s
    while True:
        text = run.pod_log(ns, name)
        if "== end ==" in text or time.monotonic() > end:
            return text
        time.sleep(0.5)


def _visible(log):
    s = probes.sections(log)
    devs = [d for d in s.get("dev", "").splitlines() if d.strip()]
    smi = probes.parse_nvidia_smi_l(s.get("nvidia-smi -L", ""))
    return devs, smi, s.get("env", "")


def test_vector_add_succeeds_through_the_plugin(run, cfg, gpu_node, pod_runner, evidence):
    """MUST: a pod requesting one GPU runs the CUDA vector-add sample to 'Test PASSED' with exit code 0."""
    require_nvidia_tooling(cfg, "the CUDA vector-add sample")
    _need(run, gpu_node, 1)
    ns = run.ensure_namespace()
    name = pod_runner.create(pods.vector_add_pod(f"vectoradd-{gpu_node}"[:63], ns, run.run_id, gpu_node, cfg,
                                                 run.cfg.seconds("timeouts.podComplete")))
    state = pod_runner.wait([name], "done", "timeouts.podComplete", gpu_node)[name]
    log = run.pod_log(ns, name)
    result = probes.vector_add_result(log, pods.exit_code(state))
    if not result.passed:
        raise_for(result.code, f"{gpu_node}: vector-add pod {name} exited {pods.exit_code(state)}: {result.cause}; "
                  f"output tail: {log.strip()[-300:]!r}")


def test_pods_see_exactly_the_gpus_they_request(run, cfg, gpu_node, pod_runner, evidence):
    """MUST: a pod requesting no GPU sees none; a pod requesting N GPUs sees exactly N (device nodes and
    nvidia-smi agree with NVIDIA_VISIBLE_DEVICES)."""
    require_nvidia_tooling(cfg, "device visibility from nvidia-smi and /dev/nvidiaN")
    free = _need(run, gpu_node, 1)
    n = min(2, free, cfg["limits"]["maxGpusPerNode"])
    ns = run.ensure_namespace()
    deadline = run.cfg.seconds("timeouts.podComplete")
    zero = pod_runner.create(pods.probe_pod(f"iso0-{gpu_node}"[:63], ns, run.run_id, "isolation", gpu_node, cfg, 0,
                                            deadline=deadline))
    some = pod_runner.create(pods.probe_pod(f"iso{n}-{gpu_node}"[:63], ns, run.run_id, "isolation", gpu_node, cfg, n,
                                            deadline=deadline))
    pod_runner.wait([zero, some], "done", "timeouts.podComplete", gpu_node)
    d0, s0, env0 = _visible(run.pod_log(ns, zero))
    dn, sn, envn = _visible(run.pod_log(ns, some))
    evidence.note("visible", {"no-request": {"dev": d0, "nvidia-smi": [g.uuid for g in s0], "env": env0},
                              f"{n}-gpus": {"dev": dn, "nvidia-smi": [g.uuid for g in sn], "env": envn}})
    if d0 or s0:
        raise_for("GPU-ISOLATION", f"{gpu_node}: pod {zero} requested no GPU but sees {len(d0)} device node(s) "
                  f"{d0} and {len(s0)} GPU(s) in nvidia-smi")
    seen = max(len(dn), len(sn))
    if len(dn) < n or len(sn) < n:
        raise_for("GPU-F12-DEVICE-NOT-INJECTED", f"{gpu_node}: pod {some} was granted {n} GPU(s) but sees "
                  f"{len(dn)} device node(s) and {len(sn)} in nvidia-smi ({envn.strip()})")
    if seen > n:
        raise_for("GPU-ISOLATION", f"{gpu_node}: pod {some} requested {n} GPU(s) but sees {seen}")


def test_burst_allocates_every_free_gpu_once_and_one_more_waits(run, cfg, gpu_node, pod_runner, evidence):
    """MUST: N single-GPU pods created at once (N = free GPUs) all run, each on a different device; pod N+1
    stays Pending for lack of GPUs (not an admission failure)."""
    require_nvidia_tooling(cfg, "telling devices apart by nvidia-smi UUID")
    free = _need(run, gpu_node, 1)
    n = min(free, cfg["limits"]["maxGpusPerNode"])
    ns = run.ensure_namespace()
    deadline = run.cfg.seconds("timeouts.podComplete")
    script = pods.PROBE_SCRIPT + "\nsleep 600"
    names = []
    for i in range(n):
        m = pods.probe_pod(f"burst{i}-{gpu_node}"[:63], ns, run.run_id, "burst", gpu_node, cfg, 1, deadline=deadline)
        m["spec"]["containers"][0]["command"] = ["sh", "-c", script]
        names.append(pod_runner.create(m))
    pod_runner.wait(names, "running", "timeouts.podStart", gpu_node)
    extra = None
    if n == free:  # only when the burst took every free GPU can one more be expected to wait
        m = pods.probe_pod(f"burst-extra-{gpu_node}"[:63], ns, run.run_id, "burst", gpu_node, cfg, 1, deadline=deadline)
        extra = pod_runner.create(m)
    owners: dict[str, str] = {}
    for name in names:
        devs, smi, env = _visible(_probe_log(run, ns, name))
        ids = [g.uuid for g in smi] or devs
        if not ids:
            raise_for("GPU-F12-DEVICE-NOT-INJECTED", f"{gpu_node}: burst pod {name} was granted 1 GPU but sees none "
                      f"({env.strip()})")
        for i in ids:
            if i in owners:
                raise_for("GPU-DOUBLE-ALLOCATION", f"{gpu_node}: device {i} visible in both {owners[i]} and {name} "
                          f"at the same time")
            owners[i] = name
    evidence.note("device owners", owners)
    if extra:
        states = pod_runner.wait([extra], "running", "timeouts.podStart", gpu_node, allow=("GPU-F07-BUSY",))
        phase = states[extra]["status"].get("phase")
        if phase != "Pending":
            raise_for("GPU-F04-OVERADVERTISED", f"{gpu_node}: pod {extra} (GPU #{n + 1}) reached {phase} although "
                      f"all {n} free GPUs were held by the burst")
