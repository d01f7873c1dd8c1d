"""The node probe: what the kubelet and the host record about a GPU node (PodResources `List` and
`GetAllocatableResources`, the device-manager checkpoint, the PCI tree), printed as one JSON report by a program run
in a read-only privileged-namespace pod on the node; each part carries its own `error`. Stdlib plus grpcio with a
small hand-written protobuf decoder: docs/architecture.md, "The node probe"."""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
import sys
import time
from typing import Any, Callable, Iterator

SERVICE = "v1.PodResourcesLister"  # api.proto: `package v1;` `service PodResourcesLister`
MAX_RESPONSE = 16 * 1024 * 1024  # the kubelet's own e2e client allows 16 MiB (test/e2e_node/util.go)
CHECKPOINT = "kubelet_internal_checkpoint"
NVIDIA = "0x10de"

# ------------------------------------------------------------------ protobuf wire format

# The PodResources v1 messages this probe reads: message -> {field number: (name, kind, repeated)}, kind being
# "string", "int64" or another message of this table. Field numbers from k8s.io/kubelet (v0.34.4; v0.37.2 for
# dynamic_resources: field 5 of ContainerResources, filled by kubelets with KubeletPodResourcesDynamicResources,
# beta and on since 1.34, GA since 1.36) pkg/apis/podresources/v1/api.proto. Fields not listed (memory, a
# ClaimResource's share_id, ...) are skipped, as protobuf skips unknown fields; cpu_ids are decoded (packed int64)
# but not reported.
PROTO: dict[str, dict[int, tuple[str, str, bool]]] = {
    "ListPodResourcesResponse": {1: ("pod_resources", "PodResources", True)},
    "AllocatableResourcesResponse": {1: ("devices", "ContainerDevices", True), 2: ("cpu_ids", "int64", True)},
    "PodResources": {1: ("name", "string", False), 2: ("namespace", "string", False),
                     3: ("containers", "ContainerResources", True)},
    "ContainerResources": {1: ("name", "string", False), 2: ("devices", "ContainerDevices", True),
                           3: ("cpu_ids", "int64", True), 5: ("dynamic_resources", "DynamicResource", True)},
    # field 1 (class_name) is a tombstone since 1.31: claims are no longer tied to one class
    "DynamicResource": {2: ("claim_name", "string", False), 3: ("claim_namespace", "string", False),
                        4: ("claim_resources", "ClaimResource", True)},
    "ClaimResource": {1: ("cdi_devices", "CDIDevice", True), 2: ("driver_name", "string", False),
                      3: ("pool_name", "string", False), 4: ("device_name", "string", False)},
    "CDIDevice": {1: ("name", "string", False)},
    "ContainerDevices": {1: ("resource_name", "string", False), 2: ("device_ids", "string", True),
                         3: ("topology", "TopologyInfo", False)},
    "TopologyInfo": {1: ("nodes", "NUMANode", True)},
    "NUMANode": {1: ("ID", "int64", False)},
}

VARINT, I64, LEN, I32 = 0, 1, 2, 5  # wire types; 3 and 4 (groups) are not used by proto3


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decodes the base-128 varint at `pos` -> (unsigned value, position after it)."""
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes")


def int64(value: int) -> int:
    """A varint read as protobuf int64 (two's complement in 64 bits: -1 is ten bytes)."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def wire_fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """Yields (field number, wire type, value) for each field of a message: an int for a varint, bytes for the
    others (length-delimited payloads, fixed 32/64-bit fields)."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        number, wtype = key >> 3, key & 7
        if wtype == VARINT:
            value, pos = read_varint(buf, pos)
        elif wtype in (I64, I32):
            size = 8 if wtype == I64 else 4
            value, pos = buf[pos:pos + size], pos + size
        elif wtype == LEN:
            size, pos = read_varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        else:
            raise ValueError(f"field {number}: unsupported wire type {wtype}")
        if pos > len(buf):
            raise ValueError(f"field {number}: truncated")
        yield number, wtype, value


def packed_int64(payload: bytes) -> list[int]:
    """The values of a packed repeated int64 field (varints back to back)."""
    out, pos = [], 0
    while pos < len(payload):
        value, pos = read_varint(payload, pos)
        out.append(int64(value))
    return out


def decode(buf: bytes, message: str) -> dict[str, Any]:
    """Decodes `buf` as `message` of PROTO into a dict with every listed field (proto3 defaults: "", 0, [],
    None for an absent message). A singular field seen twice keeps the last value; unknown fields are skipped."""
    spec = PROTO[message]
    out: dict[str, Any] = {name: [] if rep else ("" if kind == "string" else 0 if kind == "int64" else None)
                           for name, kind, rep in spec.values()}
    for number, wtype, value in wire_fields(buf):
        if number not in spec:
            continue
        name, kind, rep = spec[number]
        values = _field_values(message, number, kind, wtype, value)
        if rep:
            out[name].extend(values)
        elif values:
            out[name] = values[-1]
    return out


def _field_values(message: str, number: int, kind: str, wtype: int, value: Any) -> list[Any]:
    """The values one occurrence of a field carries (a packed field carries several)."""
    if kind == "int64" and wtype == VARINT:
        return [int64(value)]
    if kind == "int64" and wtype == LEN:
        return packed_int64(value)
    if wtype != LEN:
        want = f"{VARINT} or {LEN}" if kind == "int64" else f"{LEN}"
        raise ValueError(f"{message} field {number} ({kind}): wire type {wtype}, expected {want}")
    if kind == "string":
        return [value.decode("utf-8", errors="replace")]
    return [decode(value, kind)]


def _devices(devices: list[dict]) -> list[dict]:
    """ContainerDevices messages -> the report's {"resource", "ids", "numa"}."""
    return [{"resource": dev["resource_name"], "ids": list(dev["device_ids"]),
             "numa": [n["ID"] for n in (dev["topology"] or {}).get("nodes", [])]} for dev in devices]


def _claims(dynamic: list[dict]) -> list[dict]:
    """DynamicResource messages -> the report's {"claim": namespace/name, "devices": [{"driver", "pool", "device",
    "cdi"}]}."""
    return [{"claim": f"{d['claim_namespace']}/{d['claim_name']}",
             "devices": [{"driver": r["driver_name"], "pool": r["pool_name"], "device": r["device_name"],
                          "cdi": [x["name"] for x in r["cdi_devices"]]} for r in d["claim_resources"]]}
            for d in dynamic]


def _container(c: dict) -> dict:
    out = {"name": c["name"], "devices": _devices(c["devices"])}
    if c["dynamic_resources"]:  # only where the kubelet reports DRA claims (a device-plugin node's report is as before)
        out["claims"] = _claims(c["dynamic_resources"])
    return out


def parse_list(buf: bytes) -> list[dict]:
    """A ListPodResourcesResponse -> the report's pods."""
    return [{"namespace": p["namespace"], "name": p["name"], "containers": [_container(c) for c in p["containers"]]}
            for p in decode(buf, "ListPodResourcesResponse")["pod_resources"]]


def parse_allocatable(buf: bytes) -> list[dict]:
    """An AllocatableResourcesResponse -> the report's devices."""
    return _devices(decode(buf, "AllocatableResourcesResponse")["devices"])


# ------------------------------------------------------------------ PodResources over gRPC

def call(socket_path: str, method: str, timeout: float) -> bytes:
    """Calls `method` of the kubelet's PodResourcesLister with an empty request; returns the raw response.
    Waits for the socket to accept within `timeout` (wait_for_ready): a kubelet restarting under the probe (its
    socket refuses for a moment, then it serves again) is read once it is back, not reported unreadable; a
    kubelet that stays down gives DEADLINE_EXCEEDED after `timeout`. Raises grpc.RpcError (UNIMPLEMENTED on
    kubelets without the method, DEADLINE_EXCEEDED, UNAVAILABLE)."""
    import grpc  # lazily: the parsers and gpu_functions must import without grpcio

    target = "unix://" + os.path.abspath(socket_path)
    with grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", MAX_RESPONSE)]) as channel:
        rpc = channel.unary_unary(f"/{SERVICE}/{method}", request_serializer=lambda _: b"",
                                  response_deserializer=lambda b: b)
        return rpc(None, timeout=timeout, wait_for_ready=True)


def rpc_error(exc: Exception) -> str:
    """A grpc.RpcError -> "<StatusCode name>: <details>"; anything else -> "<type>: <message>"."""
    code, details = getattr(exc, "code", None), getattr(exc, "details", None)
    if callable(code) and callable(details):
        c = code()
        return f"{getattr(c, 'name', c)}: {details()}"
    return f"{type(exc).__name__}: {exc}"


def socket_problem(path: str) -> str | None:
    """Why `path` cannot be the kubelet's socket, or None."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return f"no socket at {path}"
    except OSError as e:
        return f"cannot stat {path}: {e}"
    return None if stat.S_ISSOCK(mode) else f"{path} is not a unix socket"


def pod_resources(path: str, method: str, parse: Callable[[bytes], list], timeout: float) -> tuple[list, str | None]:
    """(parsed response, error) of one PodResources call."""
    problem = socket_problem(path)
    if problem:
        return [], problem
    try:
        raw = call(path, method, timeout)
    except ImportError as e:
        return [], f"grpcio is not installed: {e}"
    except Exception as e:  # grpc.RpcError and the like
        return [], rpc_error(e)
    try:
        return parse(raw), None
    except Exception as e:  # ValueError from the decoder; anything else must not cost the report
        return [], f"undecodable {method} response ({len(raw)} bytes): {e}"


# ------------------------------------------------------------------ the device checkpoint

def parse_checkpoint(text: str) -> tuple[dict[str, list[str]], list[dict]]:
    """The kubelet's device checkpoint -> (registered {resource: [ids]}, entries). Format from k8s.io/kubernetes
    (v1.34.4) pkg/kubelet/cm/devicemanager/checkpoint/checkpoint.go: {"Data": {"PodDeviceEntries": [{PodUID,
    ContainerName, ResourceName, DeviceIDs, AllocResp}], "RegisteredDevices": {resource: [ids]}}, "Checksum"}.
    DeviceIDs is DevicesPerNUMA (map NUMA node -> [ids], JSON keys as strings); the old v1 format had a plain
    list; both are accepted. AllocResp (the plugin's base64 AllocateResponse) is dropped; the checksum is not
    verified (it hashes the Go structure). Raises ValueError on anything else."""
    doc = json.loads(text)
    data = doc.get("Data") if isinstance(doc, dict) else None
    if not isinstance(data, dict):
        raise ValueError("no Data object")
    registered = _or(data.get("RegisteredDevices"), {})
    if not isinstance(registered, dict):
        raise ValueError("RegisteredDevices is not an object")
    entries = _or(data.get("PodDeviceEntries"), [])
    if not isinstance(entries, list):
        raise ValueError("PodDeviceEntries is not a list")
    return ({str(res): _strings(ids, f"RegisteredDevices[{res}]") for res, ids in registered.items()},
            [_entry(e, i) for i, e in enumerate(entries)])


def _or(value: Any, default: Any) -> Any:
    """JSON null (a Go nil map or slice) -> `default`; anything else as it is, to be type-checked."""
    return default if value is None else value


def _entry(e: Any, i: int) -> dict:
    if not isinstance(e, dict):
        raise ValueError(f"PodDeviceEntries[{i}] is not an object")
    return {"podUID": str(e.get("PodUID", "")), "container": str(e.get("ContainerName", "")),
            "resource": str(e.get("ResourceName", "")), "ids": _device_ids(e.get("DeviceIDs"), i)}


def _device_ids(ids: Any, i: int) -> list[str]:
    """DeviceIDs: a map NUMA node -> [ids] (in NUMA order) or a plain list; null is none."""
    if isinstance(ids, dict):
        return [d for k in sorted(ids, key=_numa_order) for d in _strings(ids[k], f"PodDeviceEntries[{i}].DeviceIDs")]
    return _strings(ids, f"PodDeviceEntries[{i}].DeviceIDs")


def _numa_order(key: str) -> tuple[int, str]:
    """Sort key of DevicesPerNUMA's JSON keys: numerically ("10" after "2"), anything odd last."""
    return (int(key), key) if key.lstrip("-").isdigit() else (1 << 62, key)


def _strings(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} is not a list of strings")
    return list(value)


def read_checkpoint(device_plugins: str) -> dict:
    """The report's checkpoint part."""
    path = os.path.join(device_plugins, CHECKPOINT)
    try:
        with open(path, encoding="utf-8") as f:
            registered, entries = parse_checkpoint(f.read())
    except FileNotFoundError:
        return {"error": f"no checkpoint at {path}", "registered": {}, "entries": []}
    except (OSError, ValueError) as e:
        return {"error": f"{path}: {e}", "registered": {}, "entries": []}
    return {"error": None, "registered": registered, "entries": entries}


# ------------------------------------------------------------------ the PCI tree

def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def _hex(text: str | None, digits: int) -> str | None:
    """"0x10DE\\n" -> "0x10de" (zero-padded to `digits`); None when absent or not hex."""
    try:
        return f"0x{int(text, 16):0{digits}x}" if text is not None else None
    except ValueError:
        return None


PCIE_ROOT = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")


def _numa(text: str | None) -> int | None:
    """sysfs numa_node: "-1" (no affinity, typical in VMs) or absent (a kernel without NUMA) -> None."""
    try:
        n = int(text) if text is not None else -1
    except ValueError:
        return None
    return n if n >= 0 else None


def read_function(path: str) -> dict:
    """One PCI function's directory (/sys/bus/pci/devices/<address>, usually a symlink into /sys/devices) ->
    its report entry. `virtfn`: an SR-IOV virtual function, which has a `physfn` link to its physical one.
    `driver`: the kernel driver bound to it (the `driver` link's target's name, as go-nvlib's getDriver reads it:
    NVIDIA/go-nvlib pkg/nvpci/nvpci.go), None when none is bound. `pcieRoot`: the root complex the function sits
    under ("pci0000:00", the component of its resolved path after devices/), as DRA drivers publish it
    (k8s.io/dynamic-resource-allocation v0.37.2 deviceattribute/pci_linux.go); None when it does not resolve so."""
    driver = os.path.join(path, "driver")
    root = next((p for p in os.path.realpath(path).split(os.sep) if PCIE_ROOT.match(p)), None)
    return {"address": os.path.basename(path), "vendor": _hex(_read(os.path.join(path, "vendor")), 4),
            "device": _hex(_read(os.path.join(path, "device")), 4),
            "class": _hex(_read(os.path.join(path, "class")), 6),
            "numa": _numa(_read(os.path.join(path, "numa_node"))),
            "virtfn": os.path.lexists(os.path.join(path, "physfn")), "pcieRoot": root,
            "driver": os.path.basename(os.path.realpath(driver)) if os.path.lexists(driver) else None}


def scan_pci(root: str, vendor: str) -> dict:
    """The report's pci part: the functions of `vendor` under `<root>/bus/pci/devices`, by address. A vendor
    function whose class cannot be read is still listed, and named in the part's error."""
    tree = os.path.join(root, "bus", "pci", "devices")
    out: dict[str, Any] = {"error": None, "root": root, "functions": []}
    try:
        names = sorted(os.listdir(tree))
    except OSError:
        out["error"] = f"no PCI tree at {tree}: is nodeProbe.sysfsPath right?"
        return out
    unreadable = []
    for name in names:
        path = os.path.join(tree, name)
        if _hex(_read(os.path.join(path, "vendor")), 4) != vendor:
            continue
        fn = read_function(path)
        out["functions"].append(fn)
        if fn["class"] is None:
            unreadable.append(name)
    if unreadable:
        out["error"] = f"class unreadable for {', '.join(unreadable)} under {tree}"
    return out


def gpu_functions(functions: list[dict]) -> list[dict]:
    """The physical GPUs among scanned PCI functions: class VGA controller (0x0300xx, older boards) or 3D
    controller (0x0302xx, datacenter GPUs), and not an SR-IOV virtual function.

    NVIDIA's own recognition, NVIDIA/go-nvlib pkg/nvpci/nvpci.go (at 007bf08): PCIVgaControllerClass 0x030000 and
    PCI3dControllerClass 0x030200 (IsGPU = IsVGAController || Is3DController), GetGPUs() leaves out virtual
    functions (SriovInfo.IsVF, i.e. a `physfn` link). An NVSwitch is its own class (PCINvSwitchClass 0x068000,
    a bridge) and the HDMI audio function of a board (0x0403xx) is no GPU class either, so neither counts.
    go-nvlib compares the whole class word; this matches class and subclass and ignores the programming
    interface byte, which NVIDIA GPUs leave at 00.

    - MIG devices are not PCI functions: a MIG-partitioned GPU is one function, however many MIG devices the
      plugin advertises.
    - SR-IOV VFs of a GPU (vGPU hosts) are not extra GPUs: they carry `physfn`, and the physical function counts.
    - Inside a VM, a passed-through VF has no `physfn` (its PF is on the host) and counts as a GPU.
    """
    return [f for f in functions if _class_prefix(f.get("class")) in (0x0300, 0x0302) and not f.get("virtfn")]


def _class_prefix(cls: Any) -> int | None:
    """"0x030200" -> 0x0302 (class and subclass)."""
    try:
        return int(cls, 16) >> 8
    except (TypeError, ValueError):
        return None


# ------------------------------------------------------------------ the report

def guarded(part: Callable[[], dict], empty: dict) -> dict:
    """Runs one part; an unexpected exception becomes that part's error, so the report is always printed."""
    try:
        return part()
    except Exception as e:  # the probe must print its report whatever happens
        return {**empty, "error": f"{type(e).__name__}: {e}"}


def pod_resources_parts(socket_path: str, timeout: float) -> tuple[dict, dict]:
    """The report's podResources and allocatable parts."""
    pods, perr = pod_resources(socket_path, "List", parse_list, timeout)
    devices, aerr = pod_resources(socket_path, "GetAllocatableResources", parse_allocatable, timeout)
    return {"error": perr, "pods": pods}, {"error": aerr, "devices": devices}


def report(args: argparse.Namespace, pci: bool = True) -> dict:
    """The whole report; without the PCI tree where `pci` is False (a repeating probe's rounds: the hardware does
    not change within a run)."""
    pods, allocatable = pod_resources_parts(args.pod_resources, args.timeout)
    out = {"version": 1, "podResources": pods, "allocatable": allocatable,
           "checkpoint": guarded(lambda: read_checkpoint(args.device_plugins), {"registered": {}, "entries": []})}
    if pci:
        out["pci"] = guarded(lambda: scan_pci(args.sysfs.rstrip("/") or "/", args.vendor),
                             {"root": args.sysfs, "functions": []})
    return out


def pci_id(text: str) -> str:
    """argparse type: a 16-bit PCI ID ("0x10de", "10DE") -> "0x10de"."""
    value = _hex(text, 4)
    if value is None or int(value, 16) > 0xFFFF:
        raise argparse.ArgumentTypeError(f"not a PCI vendor ID: {text!r}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python3 -m gpuconform.nodeprobe", description=__doc__.splitlines()[0])
    p.add_argument("--pod-resources", required=True, metavar="SOCKET", help="the kubelet's PodResources socket")
    p.add_argument("--device-plugins", required=True, metavar="DIR", help="the kubelet's device-plugins directory")
    p.add_argument("--sysfs", required=True, metavar="ROOT", help="the host's sysfs, mounted read-only")
    p.add_argument("--vendor", type=pci_id, default=NVIDIA, help="PCI vendor ID to list (default %(default)s)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per PodResources call")
    p.add_argument("--every", type=float, default=0.0, metavar="SECONDS",
                   help="repeat: a round (its report without the PCI tree) every SECONDS, for --for seconds")
    p.add_argument("--for", dest="for_s", type=float, default=0.0, metavar="SECONDS",
                   help="how long to repeat (with --every)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Prints the report as one line of JSON; 0 whatever the parts found (argparse exits 2 on bad arguments).
    With --every: rounds, each `== round ==`, its number, the report, `== end ==` (probes.rounds). A round's
    header is written before the round reads anything, so a round numbered above every header a reader has seen
    read the kubelet after that reader looked (probes.round_after): no clock decides which round is new."""
    args = parse_args(argv)
    if args.every <= 0:
        print(json.dumps(report(args)), flush=True)
        return 0
    until = time.monotonic() + args.for_s
    n = 0
    while True:
        n += 1
        print(f"== round ==\n{n}", flush=True)
        print(json.dumps(report(args, pci=False)) + "\n== end ==", flush=True)
        if time.monotonic() + args.every > until:
            return 0
        time.sleep(args.every)


if __name__ == "__main__":
    sys.exit(main())
