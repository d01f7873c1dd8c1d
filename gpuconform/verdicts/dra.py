"""Verdicts on the DRA path: a node whose GPUs a DRA driver serves (gpuconform/nodemode.py). Facts from Kubernetes
v1.37.2 (k8s.io/api resource/v1 types.go; docs/vendors.md):
- a driver publishes each pool of a node as ResourceSlices with spec.driver, spec.nodeName and spec.pool {name,
  generation, resourceSliceCount}; a pool is complete when resourceSliceCount slices of its highest generation
  exist (slices of older generations are being replaced; the scheduler uses only the newest);
- its kubelet plugin registers through a socket in the kubelet's plugins_registry directory, named
  `<driver>-reg.sock`, or with rolling updates `<driver>-<pod UID or hash>-reg.sock` / `dra-<hash>-reg.sock`
  (k8s.io/dynamic-resource-allocation v0.37.2 kubeletplugin/draplugin.go RollingUpdateRegistrarSocketFile).
"""

from __future__ import annotations

import re

from .common import Finding
from .kubelet_record import _for_containers, _part


def pools(driver: str, slices: list[dict]) -> dict[str, dict]:
    """The driver's pools among `slices`: name -> {generation, want (resourceSliceCount), have (slices of that
    generation), devices (their device names)}."""
    out: dict[str, dict] = {}
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("driver") != driver:
            continue
        pool = spec.get("pool") or {}
        gen = int(pool.get("generation") or 0)
        p = out.setdefault(pool.get("name") or "", {"generation": gen, "want": 0, "have": 0, "devices": []})
        if gen > p["generation"]:
            p.update(generation=gen, have=0, devices=[])
        if gen == p["generation"]:
            p["want"] = int(pool.get("resourceSliceCount") or 0)
            p["have"] += 1
            p["devices"] += [d.get("name") for d in spec.get("devices") or []]
    return out


def slice_findings(node: str, driver: str, slices: list[dict]) -> tuple[list[Finding], dict]:
    """The node's pools of `driver` are present and complete: FAIL-DRA-NO-SLICES when the driver publishes no
    slice (or no device) for the node, FAIL-DRA-POOL-INCOMPLETE when a pool lacks slices of its generation.
    Returns (findings, evidence)."""
    mine = pools(driver, slices)
    ev = {"driver": driver, "pools": mine, "other drivers": sorted({(s.get("spec") or {}).get("driver") or "?"
                                                                     for s in slices} - {driver})}
    if not mine:
        return [Finding("FAIL-DRA-NO-SLICES", f"{node}: the GPU DRA driver {driver} publishes no ResourceSlice for "
                        f"this node (slices naming it: {len(slices)})")], ev
    bad = [f"{name or '(unnamed)'}: {p['have']} of {p['want']} slice(s) at generation {p['generation']}"
           for name, p in sorted(mine.items()) if p["have"] != p["want"]]
    if bad:
        return [Finding("FAIL-DRA-POOL-INCOMPLETE", f"{node}: pool(s) of {driver} incomplete: {'; '.join(bad)}")], ev
    if not any(p["devices"] for p in mine.values()):
        return [Finding("FAIL-DRA-NO-SLICES", f"{node}: the ResourceSlices of {driver} list no device")], ev
    return [], ev


def device_count(driver: str, slices: list[dict]) -> int:
    return sum(len(p["devices"]) for p in pools(driver, slices).values())


def devices_hardware_findings(node: str, driver: str, slices: list[dict], report: dict) -> tuple[list[Finding], dict]:
    """The driver's devices on the node equal its GPUs on the PCI bus (the node probe's sysfs count, GPUs bound to
    VFIO set aside as on the device-plugin path): FAIL-DRA-DEVICES-NOT-HARDWARE otherwise. A PCI tree that could
    not be read gives NOTCHECKED-OPTIONAL."""
    pci, err = _part(report, "pci")
    if err:
        return [Finding("NOTCHECKED-OPTIONAL", f"{node}: PCI hardware not read: {err}")], {}
    gpus, vfio = _for_containers(pci.get("functions", []))
    published = device_count(driver, slices)
    ev = {"pci GPUs": [g.get("address") for g in gpus], "set aside for VMs (vfio)": [g.get("address") for g in vfio],
          "devices published": published, "driver": driver}
    if published != len(gpus):
        more = "more" if published > len(gpus) else "fewer"
        return [Finding("FAIL-DRA-DEVICES-NOT-HARDWARE", f"{node}: {driver} publishes {published} device(s), {more} "
                        f"than the {len(gpus)} GPU(s) on the PCI bus ({', '.join(ev['pci GPUs']) or 'none'})")], ev
    return [], ev


def registrar_findings(node: str, driver: str, listing: str, exit_code: int | None = 0) -> list[Finding]:
    """`ls -la` of the kubelet's plugins_registry directory shows a registration socket of `driver`."""
    if exit_code != 0:
        return [Finding("ERROR-API", f"{node}: socket probe exited {exit_code}: {listing[-300:]}")]
    entries = [ln.split()[-1] for ln in listing.splitlines()[1:] if ln.split()]
    own = re.compile(rf"^{re.escape(driver)}(-[A-Za-z0-9_-]+)?-reg\.sock$|^dra-[A-Za-z0-9_-]+-reg\.sock$")
    if any(own.match(e) for e in entries):
        return []
    return [Finding("FAIL-DRA-NOT-REGISTERED", f"{node}: no registration socket of {driver} in the kubelet's "
                    f"plugins_registry directory (entries: {[e for e in entries if e not in ('.', '..')]})")]
