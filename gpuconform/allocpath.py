"""One GPU node's allocation path as typed facts (pure), after the Kubernetes storage e2e framework's driver
interface (test/e2e/storage/framework/testdriver.go: one test body, the driver's capabilities decide what applies):
what one device is asked for by, what the kubelet measures and records of its allocation, where the plugin
registers and which checks are made on it. The paths: a container device plugin, a DRA driver, and a DRA driver
behind an extended resource name (gpuconform/nodemode.py decides which a node is on). The checks' path-specific
steps are gpuconform/pytest_plugin/paths.py; the verdicts take these facts, never the path's name."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field

from . import catalog, nodemode

# What the kubelet measures of one allocation (kubernetes v1.37.2): the device plugin's Allocate RPC
# (pkg/kubelet/metrics/metrics.go DevicePluginAllocationDuration), or, on a DRA node, its own NodePrepareResources
# step per pod start, successes only (pkg/kubelet/metrics/metrics.go:1161 DRAOperationsDuration, subsystem "dra";
# pkg/kubelet/cm/dra/manager.go:243 observes "PrepareResources").
ALLOC_DURATION = "kubelet_device_plugin_alloc_duration_seconds"
DRA_PREPARE_DURATION = "dra_operations_duration_seconds"
DRA_PREPARE = {"operation_name": "PrepareResources", "is_error": "false"}


@dataclass(frozen=True)
class AllocationPath:
    name: str = nodemode.DEVICE_PLUGIN  # nodemode's path: for the report, never for a decision
    # What a pod requests instead of naming a claim: the node's GPU resource (device plugin) or the extended
    # resource name a DeviceClass serves (dra-extended-resource); "" where pods ask by claim only
    resource: str = "nvidia.com/gpu"
    driver: str = ""  # the GPU DRA driver ("" for a device plugin)
    device_class: str = ""  # the DeviceClass the checks' claims name ("" for a device plugin)
    mig: bool = False  # one device is a MIG device of the driver's MIG class (GPUs in MIG mode on a DRA node)

    @property
    def by_claim(self) -> bool:
        """A pod's devices come from a ResourceClaim of its own (a DRA driver allocates through the scheduler)."""
        return bool(self.driver)

    @property
    def registry_dir(self) -> str:
        """The kubelet directory the plugin registers in: a device plugin serves its socket in device-plugins, a
        DRA kubelet plugin registers through plugins_registry (pkg/kubelet/pluginmanager)."""
        return "plugins_registry" if self.by_claim else "device-plugins"

    @property
    def free_means(self) -> str:
        """How the free devices are counted, for a message ("" where it is the node's allocatable less requests)."""
        return ("devices of its class that claims could be allocated now: in complete pools, not withheld by a taint, "
                "not allocated to a claim") if self.by_claim else ""

    @property
    def not_registered(self) -> str:
        """The reason code for a plugin the kubelet does not hold as registered."""
        return "FAIL-DRA-NOT-REGISTERED" if self.by_claim else "FAIL-F01-NOT-REGISTERED"

    def registrar_sockets(self, pod_uids: list[str]) -> tuple[str, ...]:
        """The names the DRA driver's registration socket in plugins_registry may have, given its pods' UIDs:
        `<driver>-reg.sock`, or with rolling updates one derived from the pod (k8s.io/dynamic-resource-allocation
        v0.37.2 kubeletplugin/draplugin.go:83-98 RollingUpdateRegistrarSocketFile): `<driver>-<pod UID>-reg.sock`,
        `<driver>-<base64url(SHA-256(UID)[:8])>-reg.sock`, or where the path is too long
        `dra-<base64url(SHA-256(driver NUL UID)[:16])>-reg.sock`. Exact names: another driver's socket of the
        third form is never taken for this driver's."""
        out = [f"{self.driver}-reg.sock"]
        for uid in pod_uids:
            short = base64.urlsafe_b64encode(hashlib.sha256(uid.encode()).digest()[:8]).decode().rstrip("=")
            both = hashlib.sha256(f"{self.driver}\0{uid}".encode()).digest()[:16]
            out += [f"{self.driver}-{uid}-reg.sock", f"{self.driver}-{short}-reg.sock",
                    f"dra-{base64.urlsafe_b64encode(both).decode().rstrip('=')}-reg.sock"]
        return tuple(out)

    @property
    def seen_twice(self) -> tuple[str, str]:
        """The reason code for a device one pod each of a burst sees together, and what it means here: each pod of
        a DRA node holds its own ResourceClaim, so the driver injected one device into two claims' containers."""
        if self.by_claim:
            return "FAIL-DRA-DOUBLE-INJECTION", ", each with its own ResourceClaim"
        return "FAIL-DOUBLE-ALLOCATION", ""

    @property
    def record_mismatch(self) -> str:
        """The reason code for a record of a pod's devices (the kubelet's, its claims') that is not what it sees."""
        return "FAIL-DRA-WRONG-DEVICE" if self.by_claim else "FAIL-KUBELET-RECORD-MISMATCH"

    @property
    def allocate_metric(self) -> tuple[str, dict[str, str]]:
        """The kubelet histogram that times one allocation step, with its labels."""
        if self.by_claim:
            return DRA_PREPARE_DURATION, DRA_PREPARE
        return ALLOC_DURATION, {"resource_name": self.resource}

    @property
    def allocate_step(self) -> str:
        """What the allocateP99 threshold measures here, in words."""
        return "kubelet NodePrepareResources" if self.by_claim else "kubelet Allocate RPC"

    def not_made(self, check: str) -> str:
        """Why `check` (its test function's name) is not made on this path ("" where it is)."""
        c = catalog.BY_NAME.get(check)
        if c is None or not self.by_claim or c.dra:
            return ""
        return c.not_on_dra or "this check is made on device-plugin nodes only so far"

    def made_only_elsewhere(self, check: str) -> bool:
        """`check` is made on DRA paths only and this is not one (it is deselected here)."""
        c = catalog.BY_NAME.get(check)
        return c is not None and c.dra_only and not self.by_claim


@dataclass(frozen=True)
class Assigned:
    """One record of the devices a container was assigned, as assignment_findings judges it: the kubelet's
    PodResources List (verdicts.kubelet_assigned; dradevices.kubelet_claims_assigned on a DRA node) or the container's
    ResourceClaims' allocation, which the scheduler wrote (dradevices.claims_assigned)."""

    source: str  # the record, in words
    names: list[str] | None  # its own names for the devices (device IDs, pool/device); None: no entry for the pod
    ids: list[str] = field(default_factory=list)  # the GPU or MIG UUIDs those names stand for
    unmatched: str = ""  # why the names cannot be matched to what a container sees ("" where they can)
