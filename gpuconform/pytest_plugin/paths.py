"""The checks' path-specific steps, one class per allocation path, after the Kubernetes storage e2e framework's
TestDriver (test/e2e/storage/framework/testdriver.go): each check in tests/ has one body and calls these steps for
what its node's path reads and records; the facts they rest on are the node's AllocationPath
(gpuconform/allocpath.py). A step reads (through the NodeCheck), hands findings over and notes evidence; the
decisions stay in gpuconform/verdicts/. `for_check` picks the node's class: no test body asks which path it is on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuconform import counts, dradevices, healthtimes, pods, timing, verdicts
from gpuconform.reasons import REASONS

from .handover import Skip
from .livelog import log

if TYPE_CHECKING:
    from .nodecheck import NodeCheck


class DevicePluginPath:
    """A container device plugin advertises the node's GPUs as an extended resource."""

    def __init__(self, check: "NodeCheck"):
        self.check = check
        self.facts = check.gpu.allocation
        self.probe_refused = ""  # why the node probe may not run here, once a create was refused (end_reader)

    # ------------------------------------------------------------ registration

    def capacity(self) -> None:
        """Each GPU resource in capacity and allocatable; no GPU DRA driver publishes the same GPUs."""
        c = self.check
        node = c.node_object()
        exp = c.expectation(node)
        c.note("expected resources", {"pool": exp.describe(), "resources": exp.resources, "basis": exp.basis})
        twice, ev = c.offered_twice(node, exp.resources)
        c.note("GPU DRA drivers on this node", ev)
        c.hand_over(verdicts.capacity_findings(node, exp) + twice)

    def registration(self, samples: list) -> None:
        """The kubelet holds the plugin as registered, and neither it nor the kubelet restarted during the run."""
        c, kubelet = self.check, self.check.run.kubelet
        now, absent, ev = self.registrations(samples)
        started, started_before = verdicts.kubelet_started(samples), kubelet.kubelet_started_before.get(c.node)
        before = kubelet.registration_before.get(c.node) or {}
        c.note("registration", {**ev, "at_start": before, "now": now, "kubelet_process_start_at_start": started_before,
                                "kubelet_process_start_now": started})
        c.hand_over(verdicts.registration_findings(c.node, now, before, started, started_before, absent,
                                                   self.facts.not_registered))

    def registrations(self, samples: list) -> tuple[dict[str, float | None], dict[str, str], dict]:
        """kubelet_device_plugin_registration_total per resource: (now, why absent, evidence)."""
        return verdicts.registration_counts(samples, self.check.expectation().resources), {}, {}

    def sockets(self) -> list[str | tuple[str, ...]]:
        """The sockets the plugin serves in the kubelet's registration directory: one per resource."""
        return self.check.expectation().sockets(self.check.cfg.get("plugin.socket"))

    def socket(self, listing: str, exit_code: int | None) -> None:
        """The plugin's socket(s) in the kubelet's registration directory (device-plugins, plugins_registry)."""
        c, f = self.check, self.facts
        c.note(f"{f.registry_dir} listing", listing)
        c.hand_over(verdicts.socket_findings(c.node, listing, self.sockets(), exit_code, f.registry_dir,
                                             f.not_registered))

    # ------------------------------------------------------------ counts

    def counts(self) -> None:
        """capacity = allocatable = count x replicas (or the MIG profiles), as the node's labels say."""
        c = self.check
        node = c.node_object()
        exp = c.expectation(node)
        if counts.may_count_one_model(node, exp) and not c.probe_off() and c.gpu.usable:
            exp = verdicts.with_pci_count(exp, c.probe("count", required=False))
        c.note("expectation", {"pool": exp.describe(), **exp.__dict__})
        logs = None
        if verdicts.unhealthy_ids_needed(node, exp):  # the plugin log names the Unhealthy devices
            logs = c.plugin_logs(tail=500)
        cap, alloc = counts.advertised(node, exp.resource)
        for k, v in (("expected", exp.advertised), ("capacity", cap), ("allocatable", alloc)):
            c.record(k, v)
        c.hand_over(verdicts.count_findings(node, exp, logs))

    def pci(self, report: dict) -> None:
        """The PCI GPUs match the labels and what is advertised; the kubelet's allocatable list agrees."""
        c = self.check
        exp = c.expectation(c.node_object())
        # the node object trails the kubelet's live list by up to one node-status period (a plugin that has just
        # re-registered): judge it once it has caught up, or after that period
        node, waited = c.node_status_caught_up(lambda n: verdicts.allocatable_agrees(exp, n, report))
        hw, hw_ev = verdicts.hardware_findings(c.node, exp, node, report)
        al, al_ev = verdicts.allocatable_findings(c.node, exp, node, report)
        if waited:
            al_ev["waited for the node status"] = f"{waited:.1f}s"
        c.note("PCI hardware", {**hw_ev, "GPUs per NUMA node": verdicts.numa_counts(report)})
        c.note("kubelet allocatable list", al_ev)
        c.record("pci_gpus", len(hw_ev.get("pci GPUs", [])))
        found = hw + al + verdicts.reported_numa_findings(c.node, exp, report)
        c.hand_over(verdicts.folded([f for f in found if REASONS[f.code].outcome == "fail"] or found))

    def slices_now(self) -> int | None:
        """The driver's ResourceSlices for the node now (the rollout rehearsal's samples): None on this path."""
        return None

    def health_through_run(self) -> None:
        """No device goes out of service while the node's checks run: what the node offers is read when they start
        and again once they have all ended (went_out_of_service)."""
        c = self.check
        before = self.offered(at_end=False)
        reader = self.end_reader()
        c.wait_for_rest_of_node()
        after = self.offered(at_end=True, reader=reader)
        c.note("offered", {"when the node's checks started": before.__dict__, "when they had ended": after.__dict__})
        c.record("out_of_service_at_end", after.out_of_service)
        found = verdicts.went_out_of_service(c.node, before, after)
        new = [n.split(" (", 1)[0] for n in after.out_named if n not in before.out_named]
        if found and new:
            times = self.layer_times(new)
            c.note("time from the plugin's mark to each layer (healthtimes.py)", times)
            c.record("out_of_service_layers", healthtimes.render(times))
        c.hand_over(found)

    def layer_times(self, devices: list[str]) -> list[dict]:
        """For each device that went out of service: when the plugin marked it unhealthy (its log), and the
        kubelet's writes that carry it (the node status; the holding pod's allocatedResourcesStatus)."""
        c = self.check
        log = "\n".join(c.plugin_logs(tail=5000, timestamps=True) or [])
        node = c.node_object()
        status = (healthtimes.status_written(node, "f:allocatable"), "the kubelet's last write of the node's status "
                  "(allocatable; managedFields)")
        on_node = c.pods_on_node()  # one LIST for every device
        return [healthtimes.layer_times(d, healthtimes.plugin_marked(d, log), status, on_node) for d in devices]

    def end_reader(self) -> str | None:
        """Started when the check starts: the node probe repeating its report (timing.HEALTH_ROUND_S), whose first
        round after the node's other checks have ended is the kubelet's allocatable list then, read within a round
        rather than a new pod's start and end. None where the node probe may not run."""
        c = self.check
        if c.probe_off() or self.probe_refused:
            return None
        try:
            return c.start_probe("health", timing.HEALTH_ROUND_S)
        except Skip as e:  # refused where the node's runtime cannot mount as the policy asks: the node object serves
            self.probe_refused = str(e)
            c.note("node probe", self.probe_refused)
            return None

    def offered(self, at_end: bool, reader: str | None = None) -> counts.Offered:
        """Capacity and the devices out of service now; at the end from the kubelet's own record: its allocatable
        list through the node probe (the repeating `reader`'s next round, else a new probe pod), else the node
        object after one node-status period (the kubelet posts a changed allocatable with its next update)."""
        c = self.check
        exp = c.expectation()
        if not at_end:
            return verdicts.node_offer(exp, c.node_object())
        if not c.probe_off() and not self.probe_refused:
            report = (c.probe_round_after(reader) if reader else None) or c.probe("health-end", required=False)
            if not (report.get("allocatable") or {}).get("error") and report:
                return verdicts.node_offer(exp, c.node_object(), report)
        wait = verdicts.status_update_s(c.kubelet_config()) + 5.0
        log(f"{c.node}: waiting {wait:.0f}s for the kubelet's next node status (no kubelet allocatable list)")
        c.run.cancelled.wait(wait)
        return verdicts.node_offer(exp, c.node_object())

    # ------------------------------------------------------------ topology

    def numa(self) -> None:
        """A Guaranteed pod with 1 exclusive CPU and 1 GPU is admitted, and its CPUs and GPU sit on one NUMA node
        (in-pod evidence: Cpus_allowed_list, node cpulists, the GPU's numa_node; -1 is N/A): the topology manager
        aligns the device plugin's hints with the CPU manager's."""
        c = self.check
        c.needs_nvidia_tooling("finding the GPU's PCI NUMA node with nvidia-smi")
        free = c.needs_free_gpus(1, beside_run_long=True)  # a run-long pod's device is not fragmentation
        name, state = c.run_to_completion(c.probe_pod("numa", "numa", 1, guaranteed_cpus=1),
                                          allow=("FAIL-F06-TOPOLOGY-AFFINITY",))
        c.hand_over(verdicts.admission_findings(c.node, state, free, c.gpu.advertised or 0,
                                                c.cfg.get("topology.policy")))
        al = verdicts.alignment_from_log(c.log(name))
        c.note("alignment", al.detail)
        c.hand_over(verdicts.numa_findings(c.node, al))

    # ------------------------------------------------------------ workloads

    def allocated_through(self, state: dict | None) -> str:
        """The audit trail of how a pod got its device ("" where there is nothing beyond its request)."""
        return ""

    def kubelet_record(self) -> None:
        """Each record of a held pod's devices (the kubelet's PodResources List; on a DRA node its claims'
        allocation too) names the devices its container sees."""
        c = self.check
        self.record_needs()
        c.needs_free_gpus(1)
        holder = c.start(c.probe_pod("record", "kubelet-record", 1, hold_s=timing.POD_HOLD_S))
        c.wait_running(holder)
        seen = verdicts.Seen.from_log(holder, 1, c.log_until(holder))
        for assigned in self.records(holder):
            found, ev = verdicts.assignment_findings(c.node, f"{c.namespace()}/{holder}/probe", assigned, seen.ids,
                                                     self.facts.record_mismatch)
            c.note(assigned.source, ev)
            c.record(f"recorded by {assigned.source}", ", ".join(assigned.names or []) or "none")
            c.hand_over(found)

    def record_needs(self) -> None:
        """What the kubelet-record check must be able to read here: the node probe."""
        self.check.needs(self.check.cfg.get("nodeProbe.enabled"),
                         "nodeProbe.enabled is false: the kubelet's record is not checked")

    def records(self, holder: str) -> list[verdicts.Assigned]:
        """The kubelet's PodResources List of the holder's container, after no device is assigned twice."""
        c = self.check
        report = c.probe("record")
        twice = verdicts.double_assignment_findings(c.node, report)
        if twice and twice[0].code == "FAIL-DOUBLE-ALLOCATION":  # only pods still running count (kubelets < 1.34)
            active = {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in c.pods_on_node()}
            twice = verdicts.double_assignment_findings(c.node, report, active)
        c.hand_over(twice)
        return [verdicts.kubelet_assigned(report, c.namespace(), holder, "probe", c.resource)]

    def held_records(self, holders: list[str]) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]] | None:
        """After a rollout: the device IDs the kubelet's PodResources List records for each held pod, and those
        its GetAllocatableResources offers (the node probe; None where it may not run)."""
        c = self.check
        if c.probe_off():
            return None
        report = c.probe("rollout", required=False)
        return verdicts.held_and_offered(report, c.namespace(), holders, "probe", c.resource) if report else None

    def withheld(self) -> dict[str, list[str]]:
        """Devices withheld from allocation by a taint (a DRA notion: none here)."""
        return {}

    def after_burst(self, names: list[str], extra: str | None, withheld: dict[str, list[str]]) -> None:
        """What the burst judges beyond its pods' devices (nothing more on this path)."""


class DraPath(DevicePluginPath):
    """A DRA driver publishes the node's GPUs as ResourceSlices; each pod's devices come from a claim of its own
    (behind an extended resource name on dra-extended-resource, for the pods that request it)."""

    def capacity(self) -> None:
        """The driver's pools for the node exist, are complete (after a republish settles) and list devices."""
        c = self.check
        slices, waited = c.settled_slices()  # a pool being republished is seen incomplete for a moment
        found, ev = verdicts.dra.slice_findings(c.node, self.facts.driver, slices)
        if waited:
            ev["waited for incomplete pools to settle"] = f"{waited:.1f}s"
        c.note("ResourceSlices", ev)
        c.record("dra_devices", sum(len(p["devices"]) for p in ev["pools"].values()))
        c.hand_over(found)

    def registrations(self, samples: list) -> tuple[dict[str, float | None], dict[str, str], dict]:
        """The kubelet's plugin manager holds one of the driver's registration sockets as registered."""
        return verdicts.dra_registrations(samples, self.facts.driver, self.sockets()[0])

    def sockets(self) -> list[str | tuple[str, ...]]:
        """The driver's registration socket, one of the names its pods' UIDs give it."""
        return [self.facts.registrar_sockets([p["metadata"].get("uid") or "" for p in self.check.plugin().pods])]

    def counts(self) -> None:
        """No device tainted out of service (slice or DeviceTaintRule); as many GPUs published as counted."""
        c, driver = self.check, self.facts.driver
        exp = c.expectation(c.node_object())
        slices, rules = c.resource_slices(), c.taint_rules()
        offer = dradevices.published(driver, slices, rules)
        c.note("published devices", {"driver": driver, "GPUs published (whole or as MIG devices)":
                                     dradevices.physical_gpus(driver, slices),
                                     "tainted out of service": offer.out_named,
                                     "informational taints (device stays in service)":
                                     dradevices.informational(driver, slices, rules), "expected": exp.physical,
                                     "expected from": exp.source})
        for k, v in (("expected", exp.physical), ("published", offer.count),
                     ("tainted_out_of_service", offer.out_of_service)):
            c.record(k, v)
        c.hand_over(verdicts.folded(verdicts.offer_findings(c.node, exp, offer)))

    def pci(self, report: dict) -> None:
        """The physical GPUs the driver publishes equal the GPUs on the PCI bus (and the labels agree with it), and
        the topology it publishes for them is the PCI tree's."""
        c, driver = self.check, self.facts.driver
        node, slices = c.node_object(), c.resource_slices()
        hw, hw_ev = verdicts.hardware_findings(c.node, c.expectation(node), node, report,
                                               dradevices.published(driver, slices))
        topo, topo_ev = verdicts.dra.published_topology_findings(c.node, driver, slices, report)
        c.note("PCI hardware and published devices", hw_ev)
        c.note("published topology", {**topo_ev, "verdict": "; ".join(f.message for f in topo) or "as the PCI tree"})
        c.record("pci_gpus", len(hw_ev.get("pci GPUs", [])))
        found = hw + [f for f in topo if REASONS[f.code].outcome == "fail"]  # the NUMA check says what is not
        c.hand_over(verdicts.folded([f for f in found if REASONS[f.code].outcome == "fail"] or found))

    def slices_now(self) -> int | None:
        """The driver's ResourceSlices for the node now (from the slice watch)."""
        return sum(1 for s in self.check.resource_slices() if (s.get("spec") or {}).get("driver") == self.facts.driver)

    def layer_times(self, devices: list[str]) -> list[dict]:
        """For each device ("pool/device") tainted out of service: the taint's timeAdded (the driver's mark) and
        the slice's last write (what the scheduler reads), and the holding pod's allocatedResourcesStatus."""
        c, driver, slices = self.check, self.facts.driver, self.check.resource_slices()
        ours = [p for p in c.pods_on_node() if (p["metadata"].get("labels") or {}).get(pods.RUN_LABEL) == c.run_id]
        held = [(p, set(dradevices.claim_devices(c.claims_of_pod(p), driver)))
                for p in ours]  # the run's pods: the suite reads claims in its own namespaces only
        out = []
        for d in devices:
            added, written = healthtimes.slice_written(slices, driver, d)
            out.append(healthtimes.layer_times(
                d, (added, "the device taint's timeAdded in the driver's slice"),
                (written, "the driver's last write of its slice (managedFields)"),
                [p for p, devs in held if d in devs], holding=True))
        return out

    def end_reader(self) -> str | None:
        return None  # the slices and rules are watched: the end is read at once

    def offered(self, at_end: bool, reader: str | None = None) -> counts.Offered:
        """The driver's published GPUs and its devices tainted out of service now (its slices and the
        DeviceTaintRules, as the watches hold them: a driver taints a failing device in its slice at once)."""
        c = self.check
        return dradevices.published(self.facts.driver, c.resource_slices(), c.taint_rules())

    def numa(self) -> None:
        """The kubelet's topology manager takes no hints from DRA drivers (its hint providers are the device, CPU
        and memory managers: kubernetes v1.37.2 pkg/kubelet/cm/container_manager_linux.go:315-359), so a claim's
        devices are put on one NUMA node or PCIe root by the claim (matchAttribute on resource.kubernetes.io/
        numaNode or pcieRoot): what the driver publishes there must be where the PCI tree has its devices."""
        c, driver = self.check, self.facts.driver
        slices = c.resource_slices()
        # the PCI tree is read only where the driver publishes something to compare it with
        told = dradevices.publishes_topology(dradevices.published_topology(driver, slices))
        found, ev = verdicts.dra.published_topology_findings(c.node, driver, slices,
                                                             c.pci_report("numa") if told else {})
        c.note("published topology", ev)
        c.hand_over(found)

    def allocated_through(self, state: dict | None) -> str:
        """The claim the pod's template made, or the one the scheduler made for the extended resource."""
        status, f = (state or {}).get("status") or {}, self.facts
        if f.resource:
            made = status.get("extendedResourceClaimStatus") or {}
            return (f"{f.resource} (extended resource, KEP-5004): ResourceClaim "
                    f"{made.get('resourceClaimName') or '(not recorded)'} of DeviceClass {f.device_class}")
        made = [r.get("resourceClaimName") or "(not recorded)" for r in status.get("resourceClaimStatuses") or []]
        return f"ResourceClaim {', '.join(made) or '(not recorded)'} of DeviceClass {f.device_class}"

    def record_needs(self) -> None:
        """The claims' allocation must be readable (the kubelet's own record is read where the node probe runs)."""
        self.check.needs(self.check.granted("resourceclaims"), "get resourceclaims is not granted: a DRA pod's "
                                                              "allocation is not read (manifests/rbac.yaml)")

    def records(self, holder: str) -> list[verdicts.Assigned]:
        """The holder's claims' allocation, and with the node probe the kubelet's PodResources List
        (dynamic_resources) of its container."""
        c, driver = self.check, self.facts.driver
        slices = c.resource_slices()
        out = [dradevices.claims_assigned(c.claims_of(holder), driver, slices)]
        if not c.probe_off():
            out.append(dradevices.kubelet_claims_assigned(c.probe("record"), c.namespace(), holder, "probe", driver,
                                                          slices))
        return out

    def held_records(self, holders: list[str]) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]] | None:
        """After a rollout: the devices (pool/device) the held pods' claims were allocated, and those the driver
        publishes for the node now (None without the grant to read claims)."""
        c, driver = self.check, self.facts.driver
        if not c.granted("resourceclaims"):
            return None
        slices = c.resource_slices()
        held = {p: tuple(dradevices.claim_devices(c.claims_of(p), driver)) for p in holders}
        return held, tuple(f"{pool}/{dev}" for pool, dev in dradevices.slice_uuids(driver, slices))

    def withheld(self) -> dict[str, list[str]]:
        """The devices its driver (or a DeviceTaintRule) tainted out of service now."""
        return dradevices.withheld(self.facts.driver, self.check.resource_slices(), self.check.taint_rules())

    def after_burst(self, names: list[str], extra: str | None, withheld: dict[str, list[str]]) -> None:
        """What the kubelet reports of the health of the devices the run holds on the node (the burst's pods and the
        run-long check's: every device not others'), and no claim allocated a device withheld by a taint."""
        c, driver = self.check, self.facts.driver
        held = c.run_pods_on_node()
        entries = verdicts.dra.health_entries(held)
        unhealthy = {e["pod"] for e in entries if e["health"] == "Unhealthy"}
        found, ev = verdicts.dra.health_findings(c.node, driver, entries,
                                                 {p: c.claims_of_pod(held[p]) for p in unhealthy}, withheld)
        c.note("device health", ev)
        c.record("device_health", ev["summary"])
        c.hand_over(found)
        if withheld:  # the scheduler kept the tainted devices out of every claim, the extra pod's too
            found, ev = verdicts.dra.tainted_allocation_findings(
                c.node, driver, {p: c.claims_of(p) for p in names + ([extra] if extra else [])}, withheld)
            c.note("device taints", ev)
            c.hand_over(found)


def for_check(check: "NodeCheck") -> DevicePluginPath:
    """The steps of the check's node's allocation path."""
    return DraPath(check) if check.gpu.allocation.by_claim else DevicePluginPath(check)
