"""Allocation through the plugin: a CUDA workload runs, pods see exactly the GPUs they asked for, bursts
allocate every free GPU once and no more."""

import pytest

from gpuconform import dradevices, nodemode, pods, probes, runtimemode, timing, verdicts
from gpuconform.reasons import EnvironmentProblem


@pytest.mark.gpus(1)
def test_vector_add_succeeds_through_the_plugin(check):
    """MUST: a pod requesting one device of the node's GPU resource (a whole GPU, a time-sliced replica or a MIG
    device) runs the CUDA vector-add sample to 'Test PASSED' with exit code 0. On a node whose DRA driver serves
    an extended resource name (dra-extended-resource) the pod requests that name, as workloads written for device
    plugins do, and the scheduler makes its claim."""
    check.needs_nvidia_tooling("the CUDA vector-add sample")
    check.needs_free_gpus(1)
    name, state = check.run_to_completion(check.vector_add_pod())
    through = check.path.allocated_through(state)
    if through:  # the audit trail: which claim the pod's template or the scheduler made
        check.record("allocated_through", through)
    check.hand_over(verdicts.vector_add_findings(check.node, name, check.resource, check.log(name),
                                                 pods.exit_code(state)))


@pytest.mark.gpus(2)
def test_pods_see_exactly_the_gpus_they_request(check):
    """MUST: a pod requesting no GPU sees none; a pod requesting N devices sees exactly those N (whole GPUs:
    device nodes and nvidia-smi agree; MIG: N MIG devices; time-slicing: one replica, so one GPU), and its second
    container, which asks for none (no resource; on DRA, no claim in its resources.claims), sees none. All set
    NVIDIA_VISIBLE_DEVICES=all, as CUDA base images do: the runtime must not let a pod's own variable widen what
    it was allocated (accept-nvidia-visible-devices-envvar-when-unprivileged=false, or the volume-mounts/CDI
    device list strategies)."""
    check.needs_nvidia_tooling("device visibility from nvidia-smi and /dev/nvidiaN")
    free = check.needs_free_gpus(1)
    exp = check.workload_expectation()
    n = verdicts.isolation_request(exp, free, check.cfg.get("limits.maxGpusPerNode"))
    env = {"NVIDIA_VISIBLE_DEVICES": "all"}  # what CUDA base images set (their Dockerfiles' ENV)
    zero = check.start(check.probe_pod("iso0", "isolation", 0, env=env))
    some = check.start(check.probe_pod(f"iso{n}", "isolation", n, env=env, sidecar=True))
    check.wait_done(zero, some)
    s0, sn = (verdicts.Seen.from_log(p, k, check.log(p)) for p, k in ((zero, 0), (some, n)))
    side = verdicts.Seen.from_log(f"{some}/{pods.SIDECAR}", 0, check.log(some, container=pods.SIDECAR))
    check.note("visible", {"no-request": s0.evidence(), f"{n} x {check.resource}": sn.evidence(),
                           "its container asking for none": side.evidence(), "unit": exp.unit, "pod env": env})
    rc, mode = check.cfg.get("runtimeClassName"), None
    if rc and (s0.dev or s0.gpus or side.dev or side.gpus):  # does the configured RuntimeClass fit the install?
        classes, why_not = check.run.inventory.runtime_classes()
        mode = runtimemode.recognise(classes, check.plugin().pods, why_not)
        check.note("runtime mode", mode.evidence())
    check.hand_over(verdicts.isolation_findings(check.node, s0, sn, exp.unit, exp.per_device, mode, rc, side))


@pytest.mark.node_probe
@pytest.mark.gpus(1)
def test_kubelet_assigned_devices_match_what_the_pod_sees(check):
    """MUST: the device IDs the kubelet assigned to a suite pod's container (its own record: the PodResources
    List, read by the optional node probe) are the devices the container sees (GPU or MIG UUIDs in nvidia-smi; a
    time-sliced replica by its GPU), and no device ID is assigned to two containers at once across every pod on
    the node. On a DRA node: the devices the pod's ResourceClaim was allocated (its status, through the slices'
    uuid attribute) are those the container sees, and, with the node probe, those the kubelet's PodResources List
    records for the container (dynamic_resources)."""
    check.needs_nvidia_tooling("matching the kubelet's device IDs to nvidia-smi UUIDs")
    check.path.kubelet_record()


@pytest.mark.spans_run
@pytest.mark.gpus(1)
def test_gpu_access_held_through_the_run_survives_to_its_end(check):
    """MUST: a pod that holds one device from the start of the run to its end still sees it at the end. The pod
    repeats its device check every few seconds; the last one, printed after every other check on the node is
    done, must see what the first saw (access is lost when the runtime's device cgroup rules are reset, e.g. by
    a systemd daemon-reload). On a node with a single free device it is not checked: holding that device for
    the run would leave the other checks none. Also records how many pods the topology manager rejected on the
    node during the run (kubelet metrics, where they can be read): evidence, not a verdict."""
    check.needs_nvidia_tooling("device visibility from nvidia-smi")
    check.needs(check.gpu.free != 1, "the node has one free device: holding it through the run would leave the "
                                     "other checks none")
    check.needs_free_gpus(1)
    name = check.start(check.run_long_pod("access", "access"))
    check.wait_running(name)
    start = probes.rounds(check.log_until(name, until=lambda text: bool(probes.rounds(text))))
    check.wait_for_rest_of_node()
    # the last rounds only (a run-long log grows by a round every RUN_HOLD_EVERY_S): the first that began after
    # the node's other checks had ended
    end = check.round_after(name, tail=timing.RUN_HOLD_TAIL_LINES)
    first = verdicts.Seen.from_log(name, 1, start[0][1]) if start else None
    last = verdicts.Seen.from_log(name, 1, end[1]) if end else None
    done = end[0] if end else len(start)
    check.note("device checks", {"rounds": done, "first": first and first.evidence(),
                                 "last": last and last.evidence()})
    # evidence only: an unreadable kubelet, or a malformed /metrics (skipped where it is judged), decides nothing here
    try:
        after = check.kubelet_metrics()
    except (EnvironmentProblem, pytest.skip.Exception):
        after = None
    admission = verdicts.admission_errors_delta(check.run.kubelet.metrics_before.get(check.node), after)
    check.note("topology manager", admission)  # evidence only: other workloads' rejections are not a verdict
    check.record("topology_admission_errors_during_run",
                 admission["topology manager admission errors during the run"])
    check.hand_over(verdicts.access_findings(check.node, name, first, last, done))


@pytest.mark.gpus("all")
def test_burst_allocates_every_free_gpu_once_and_one_more_waits(check):
    """MUST: N single-device pods created at once (N = free devices of the node's GPU resource) all run, each
    device held by no more pods than it may be (1; a time-sliced GPU: its replicas); pod N+1 stays Pending for
    lack of devices (not an admission failure). On a DRA node each pod has its own claim, and no claim is allocated
    a device its driver tainted out of service, and a device the driver reports Unhealthy to the kubelet (the
    allocatedResourcesStatus of the run's pods on the node: the burst's and the run-long check's) is one it
    tainted so."""
    check.needs_nvidia_tooling("telling devices apart by nvidia-smi UUID")
    free = check.needs_free_gpus(1)
    withheld = check.path.withheld()
    exp = check.workload_expectation()
    n = verdicts.burst_size(free, check.cfg.get("limits.maxGpusPerNode"))
    names = [check.start(check.probe_pod(f"burst{i}", "burst", 1, hold_s=timing.POD_HOLD_S)) for i in range(n)]
    check.wait_running(*names)
    # only when the burst took every free device can one more be expected to wait
    extra = check.start(check.probe_pod("burst-extra", "burst", 1)) if n == free else None
    seen = [verdicts.Seen.from_log(name, 1, check.log_until(name)) for name in names]
    findings, owners = verdicts.burst_findings(check.node, seen, exp.per_device, twice=check.facts.seen_twice)
    check.note("device owners", {"resource": check.resource, "per device": exp.per_device, "owners": owners})
    check.hand_over(findings)
    state = check.wait_running(extra, allow=("SKIP-F07-BUSY",))[extra] if extra else None
    check.path.after_burst(names, extra, withheld)
    if state is not None:
        freed = check.freed_since(free, names + [extra]) if state.get("status", {}).get("phase") != "Pending" else 0
        check.note("pod N+1", {"phase": state.get("status", {}).get("phase"), "devices released meanwhile by pods "
                               "outside the burst": freed})
        check.hand_over(verdicts.extra_pod_findings(check.node, state, check.resource, n, freed))


@pytest.mark.gpus(1)
def test_a_shared_claim_gives_its_pods_one_device_and_is_released_after_them(check):
    """MUST (DRA nodes only): two pods naming one ResourceClaim of the node's DeviceClass run at once and each sees
    exactly the device the claim was allocated; once both have ended the claim is released (status.reservedFor
    empty, status.allocation cleared, or the claim deleted) within a few seconds, so its device can be allocated
    again."""
    check.needs_nvidia_tooling("telling devices apart by nvidia-smi UUID")
    check.needs(check.granted("resourceclaims"), "get resourceclaims is not granted: a claim's allocation is not "
                                                 "read (manifests/rbac.yaml)")
    check.needs_free_gpus(1)
    claim = check.shared_claim("shared")
    holders = [check.start(check.probe_pod(f"shared{i}", "shared-claim", 1, claim_name=claim,
                                           hold_s=timing.POD_HOLD_S)) for i in range(2)]
    check.wait_running(*holders)
    seen = {p: verdicts.Seen.from_log(p, 1, check.log_until(p)).ids for p in holders}
    found, ev = verdicts.dra.shared_claim_findings(check.node, check.claim(claim), check.facts.driver,
                                                   check.resource_slices(), seen)
    check.note("shared claim", ev)
    check.hand_over(found)
    check.end(*holders)
    after, waited = check.wait_claim(claim, lambda c: not verdicts.dra.release_findings(check.node, claim, c, 0)[0],
                                     timing.CLAIM_RELEASE_S)
    found, ev = verdicts.dra.release_findings(check.node, claim, after, waited)
    check.note("release", ev)
    check.record("claim_released_s", ev.get("waited s", round(waited, 1)))
    check.hand_over(found)


@pytest.mark.gpus("all")  # the parent GPU it asks for by UUID must be held by no other check
def test_a_mig_device_and_its_parent_gpu_are_never_both_allocated(check):
    """MUST (DRA nodes only): where the driver publishes MIG devices beside their parent GPUs (partitionable
    devices, KEP-4815), a claim of the MIG class for a MIG device of one of those GPUs is allocated (its pod runs),
    and while it is held a claim for that very GPU is not: its pod stays Pending ("cannot allocate all claims").
    Both claims name the GPUs by uuid in a CEL selector. NOTCHECKED-DRA-NO-MIG where no such pair is published, or
    no MIG device is allocated even with its GPU free."""
    check.needs(check.granted("resourceclaims/create"), "create resourceclaims is not granted: the MIG and parent "
                                                        "claims are not made (manifests/rbac.yaml)")
    driver, slices = check.facts.driver, check.resource_slices()
    parents, mig_class = dradevices.mig_parents(driver, slices), nodemode.MIG_DEVICE_CLASSES.get(driver, "")
    if not parents or not mig_class:
        check.hand_over([verdicts.Finding("NOTCHECKED-DRA-NO-MIG", f"{check.node}: {driver} publishes no MIG device "
                                          "beside its parent GPU")])
    check.needs(check.run.inventory.has_device_class(mig_class), f"DeviceClass {mig_class} (the class MIG devices "
                "are asked for by) is not readable or does not exist")
    check.needs_free_gpus(1)
    # a MIG device of any of those GPUs: the scheduler picks one whose GPU is free (another pod may hold some)
    part = check.shared_claim("mig", device_class=mig_class,
                              selector=verdicts.dra.parent_selector(driver, sorted(parents), mig=True))
    holder = check.start(check.probe_pod("mig", "mig-parent", 1, claim_name=part, hold_s=timing.POD_HOLD_S))
    held, _ = check.wait_claim(part, lambda c: verdicts.dra.allocated_parent(driver, c, slices) is not None,
                               check.timeouts.pod_start)
    uuid = verdicts.dra.allocated_parent(driver, held, slices)
    if uuid is None or uuid not in parents:
        state = ((check.pod_state(holder) or {}).get("status") or {}).get("phase")
        check.hand_over([verdicts.Finding("NOTCHECKED-DRA-NO-MIG", f"{check.node}: no MIG device of "
                                          f"{', '.join(sorted(parents.values()))} was allocated to a {mig_class} "
                                          f"claim: the pair cannot be tried (pod {holder}: {state})")])
    whole = check.shared_claim("parent", selector=verdicts.dra.parent_selector(driver, [uuid], mig=False))
    asker = check.start(check.probe_pod("parent", "mig-parent", 1, claim_name=whole, hold_s=timing.POD_HOLD_S))
    # the GPU looks free to the suite's count, so its pod staying Pending reads as not schedulable: the verdict
    # is the claims'
    check.wait_running(asker, allow=("SKIP-F07-BUSY", "FAIL-F07-NOT-SCHEDULABLE"))
    found, ev = verdicts.dra.mig_parent_findings(check.node, driver, parents[uuid], uuid, check.claim(part),
                                                 check.claim(whole), slices)
    check.note("MIG device and parent", ev)
    check.record("mig_claim_allocated", ", ".join(ev["MIG claim allocated"]))
    check.record("parent_claim_allocated", str(ev["parent claim allocated"]))
    check.hand_over(found)


def test_an_admin_access_claim_is_refused_in_a_namespace_without_the_label(check):
    """MUST (DRA nodes only): a ResourceClaim asking admin access to the node's DeviceClass (exactly.adminAccess,
    which shows its pods every device of the class, also those allocated to others) is refused in the run's
    namespace, which carries no resource.kubernetes.io/admin-access=true label. Sent as a server-side dry run:
    nothing is stored, no device is touched."""
    check.needs(check.granted("resourceclaims/create"), "create resourceclaims is not granted: admin access is not "
                                                        "tried (manifests/rbac.yaml)")
    trial, labels = check.admin_access_trial()
    found, ev = verdicts.dra.admin_access_findings(check.node, check.namespace(), labels, check.facts.device_class,
                                                   trial)
    check.note("admin access", ev)
    check.record("admin_access", ev.get("verdict") or f"HTTP {trial.get('status')}")
    check.hand_over(found)
