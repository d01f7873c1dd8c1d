"""nodeprobe: the node probe's protobuf decoding (PodResources v1), checkpoint parsing, PCI scan and report.

The PodResources responses are built with the tiny protobuf encoder below, using the field numbers of
k8s.io/kubelet pkg/apis/podresources/v1/api.proto, independently of the decoder's table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gpuconform import nodeprobe
from gpuconform.nodeprobe import (decode, gpu_functions, parse_allocatable, parse_checkpoint, parse_list,
                                  read_checkpoint, read_varint, scan_pci)

# ------------------------------------------------------------------ a tiny protobuf encoder


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # int64: negatives are ten bytes of two's complement
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field: int, wtype: int) -> bytes:
    return varint(field << 3 | wtype)


def ld(field: int, payload: bytes) -> bytes:
    return key(field, 2) + varint(len(payload)) + payload


def string(field: int, text: str) -> bytes:
    return ld(field, text.encode())


def i64(field: int, n: int) -> bytes:
    return key(field, 0) + varint(n)


def packed(field: int, ns: list[int]) -> bytes:
    return ld(field, b"".join(varint(n) for n in ns))


# api.proto messages, by their field numbers
def numa_node(n: int) -> bytes:
    return i64(1, n)  # NUMANode.ID = 1


def topology(*nodes: int) -> bytes:
    return b"".join(ld(1, numa_node(n)) for n in nodes)  # TopologyInfo.nodes = 1


def container_devices(resource: str, ids: list[str], numa: tuple[int, ...] | None = None) -> bytes:
    out = string(1, resource) + b"".join(string(2, i) for i in ids)  # resource_name = 1, device_ids = 2
    return out + (ld(3, topology(*numa)) if numa is not None else b"")  # topology = 3


def container(name: str, *devices: bytes, cpus: list[int] | None = None) -> bytes:
    out = string(1, name) + b"".join(ld(2, d) for d in devices)  # name = 1, devices = 2
    out += packed(3, cpus) if cpus else b""  # cpu_ids = 3 (packed)
    out += ld(4, string(1, "memory") + i64(2, 1 << 30))  # memory = 4: unknown to the decoder, skipped
    return out


def pod(namespace: str, name: str, *containers: bytes) -> bytes:
    return string(1, name) + string(2, namespace) + b"".join(ld(3, c) for c in containers)  # name, namespace, containers


def list_response(*pods: bytes) -> bytes:
    return b"".join(ld(1, p) for p in pods)  # ListPodResourcesResponse.pod_resources = 1


def allocatable_response(*devices: bytes, cpus: list[int] | None = None) -> bytes:
    out = b"".join(ld(1, d) for d in devices)  # devices = 1
    return out + (packed(2, cpus) if cpus else b"")  # cpu_ids = 2


UUID0 = "GPU-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"
UUID1 = "GPU-8c4f2a1e-0d3b-4e5f-a617-2b8c9d0e1f23"

# ------------------------------------------------------------------ decoder


def test_varint_round_trip_including_negative_int64():
    for n in (0, 1, 127, 128, 300, 2**31, 2**63 - 1):
        assert read_varint(varint(n), 0) == (n, len(varint(n)))
    assert len(varint(-1)) == 10
    assert nodeprobe.int64(read_varint(varint(-1), 0)[0]) == -1


def test_list_response_with_numa_topology_and_packed_cpus():
    buf = list_response(
        pod("gpuconform-r1", "probe-a",
            container("main", container_devices("nvidia.com/gpu", [UUID0, UUID1], numa=(0, 1)), cpus=[2, 3, 130]),
            container("sidecar")),
        pod("kube-system", "no-devices"))
    assert parse_list(buf) == [
        {"namespace": "gpuconform-r1", "name": "probe-a", "containers": [
            {"name": "main", "devices": [{"resource": "nvidia.com/gpu", "ids": [UUID0, UUID1], "numa": [0, 1]}]},
            {"name": "sidecar", "devices": []}]},
        {"namespace": "kube-system", "name": "no-devices", "containers": []},
    ]
    assert decode(container("main", cpus=[2, 3, 130]), "ContainerResources")["cpu_ids"] == [2, 3, 130]


def test_unpacked_repeated_int64_is_accepted_too():
    buf = string(1, "c") + i64(3, 5) + i64(3, 7) + packed(3, [9])
    assert decode(buf, "ContainerResources")["cpu_ids"] == [5, 7, 9]


def test_allocatable_response_devices_without_topology_have_no_numa():
    buf = allocatable_response(container_devices("nvidia.com/gpu", [UUID0], numa=(1,)),
                               container_devices("nvidia.com/gpu", [UUID1]),
                               container_devices("example.com/nic", ["nic0"], numa=()), cpus=list(range(8)))
    assert parse_allocatable(buf) == [{"resource": "nvidia.com/gpu", "ids": [UUID0], "numa": [1]},
                                      {"resource": "nvidia.com/gpu", "ids": [UUID1], "numa": []},
                                      {"resource": "example.com/nic", "ids": ["nic0"], "numa": []}]
    assert decode(buf, "AllocatableResourcesResponse")["cpu_ids"] == list(range(8))


def test_empty_response_is_empty():
    assert parse_list(b"") == []
    assert parse_allocatable(b"") == []


def test_unknown_fields_of_every_wire_type_are_skipped():
    unknown = i64(9, 42) + key(10, 1) + b"\0" * 8 + key(11, 5) + b"\0" * 4 + string(12, "future")
    buf = unknown + string(1, "nvidia.com/gpu") + unknown + string(2, "x")
    assert decode(buf, "ContainerDevices") == {"resource_name": "nvidia.com/gpu", "device_ids": ["x"],
                                               "topology": None}


@pytest.mark.parametrize("buf, words", [
    (string(1, "nvidia.com/gpu")[:-3], "truncated"),
    (b"\x80", "truncated varint"),
    (i64(1, 7), "wire type 0"),  # ContainerDevices.resource_name sent as a varint
    (key(1, 3), "wire type 3"),  # a group
])
def test_malformed_messages_raise_value_error(buf, words):
    with pytest.raises(ValueError, match=words):
        decode(buf, "ContainerDevices")


# ------------------------------------------------------------------ gRPC (a generic server on a unix socket)

def _short_socket_dir(tmp_path: Path) -> str:
    """Unix socket paths are limited to ~107 bytes."""
    return str(tmp_path) if len(str(tmp_path)) < 80 else tempfile.mkdtemp(prefix="np", dir="/tmp")


def test_grpc_round_trip_list_served_allocatable_unimplemented(tmp_path):
    grpc = pytest.importorskip("grpc")
    from concurrent import futures

    sock = os.path.join(_short_socket_dir(tmp_path), "kubelet.sock")
    body = list_response(pod("ns", "p", container("c", container_devices("nvidia.com/gpu", [UUID0], numa=(0,)))))
    seen = []

    def list_pods(request, context):
        seen.append(request)
        return body

    handler = grpc.method_handlers_generic_handler("v1.PodResourcesLister", {
        "List": grpc.unary_unary_rpc_method_handler(list_pods, request_deserializer=lambda b: b,
                                                    response_serializer=lambda b: b)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port("unix:" + sock)
    server.start()
    try:
        pods, allocatable = nodeprobe.pod_resources_parts(sock, timeout=5)
    finally:
        server.stop(None)
    assert seen == [b""]  # the empty ListPodResourcesRequest
    assert pods == {"error": None, "pods": [{"namespace": "ns", "name": "p", "containers": [
        {"name": "c", "devices": [{"resource": "nvidia.com/gpu", "ids": [UUID0], "numa": [0]}]}]}]}
    assert allocatable["devices"] == []
    assert allocatable["error"].startswith("UNIMPLEMENTED: ")


def test_rpc_error_text():
    class Code:
        name = "UNAVAILABLE"

    class Err(Exception):
        def code(self):
            return Code()

        def details(self):
            return "connect failed"

    assert nodeprobe.rpc_error(Err()) == "UNAVAILABLE: connect failed"
    assert nodeprobe.rpc_error(RuntimeError("boom")) == "RuntimeError: boom"


def test_missing_socket_and_non_socket(tmp_path):
    missing = str(tmp_path / "kubelet.sock")
    assert nodeprobe.pod_resources(missing, "List", parse_list, 1) == ([], f"no socket at {missing}")
    (tmp_path / "file").write_text("x")
    assert nodeprobe.pod_resources(str(tmp_path / "file"), "List", parse_list, 1)[1].endswith("is not a unix socket")


def test_parsers_import_without_grpc():
    code = "import sys, gpuconform.nodeprobe, gpuconform.verdicts.kubelet_record; assert 'grpc' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])


# ------------------------------------------------------------------ the device checkpoint

def checkpoint(entries: list[dict], registered: dict | None) -> str:
    return json.dumps({"Data": {"PodDeviceEntries": entries, "RegisteredDevices": registered}, "Checksum": 123})


def test_checkpoint_numa_map_and_plain_list_device_ids():
    text = checkpoint([
        {"PodUID": "uid-1", "ContainerName": "main", "ResourceName": "nvidia.com/gpu",
         "DeviceIDs": {"1": [UUID1], "0": [UUID0]}, "AllocResp": "CiQKGE5WSURJQV9WSVNJQkxF"},
        {"PodUID": "uid-2", "ContainerName": "old", "ResourceName": "nvidia.com/gpu", "DeviceIDs": ["GPU-x"],
         "AllocResp": None},
        {"PodUID": "uid-3", "ContainerName": "none", "ResourceName": "nvidia.com/gpu", "DeviceIDs": None},
    ], {"nvidia.com/gpu": [UUID0, UUID1], "example.com/empty": None})
    registered, entries = parse_checkpoint(text)
    assert registered == {"nvidia.com/gpu": [UUID0, UUID1], "example.com/empty": []}
    assert entries == [
        {"podUID": "uid-1", "container": "main", "resource": "nvidia.com/gpu", "ids": [UUID0, UUID1]},
        {"podUID": "uid-2", "container": "old", "resource": "nvidia.com/gpu", "ids": ["GPU-x"]},
        {"podUID": "uid-3", "container": "none", "resource": "nvidia.com/gpu", "ids": []},
    ]


def test_checkpoint_numa_keys_sort_numerically():
    text = checkpoint([{"PodUID": "u", "ContainerName": "c", "ResourceName": "r",
                        "DeviceIDs": {"10": ["c"], "2": ["b"], "-1": ["a"]}}], {})
    assert parse_checkpoint(text)[1][0]["ids"] == ["a", "b", "c"]


def test_checkpoint_of_a_fresh_kubelet_is_empty():
    assert parse_checkpoint(checkpoint(None, None)) == ({}, [])


@pytest.mark.parametrize("text", [
    "not json",
    "[]",
    '{"Checksum": 1}',
    '{"Data": {"PodDeviceEntries": {}}}',
    '{"Data": {"RegisteredDevices": []}}',
    '{"Data": {"PodDeviceEntries": ["x"]}}',
    '{"Data": {"PodDeviceEntries": [{"DeviceIDs": {"0": "GPU-0"}}]}}',
    '{"Data": {"RegisteredDevices": {"r": [1, 2]}}}',
])
def test_checkpoint_garbage_raises(text):
    with pytest.raises(ValueError):
        parse_checkpoint(text)


def test_read_checkpoint_file_missing_garbage_and_good(tmp_path):
    part = read_checkpoint(str(tmp_path))
    assert part == {"error": f"no checkpoint at {tmp_path / 'kubelet_internal_checkpoint'}", "registered": {},
                    "entries": []}
    (tmp_path / "kubelet_internal_checkpoint").write_text("{garbage")
    part = read_checkpoint(str(tmp_path))
    assert part["error"].startswith(str(tmp_path / "kubelet_internal_checkpoint") + ": ")
    assert part["entries"] == [] and part["registered"] == {}
    (tmp_path / "kubelet_internal_checkpoint").write_text(checkpoint([], {"nvidia.com/gpu": [UUID0]}))
    assert read_checkpoint(str(tmp_path)) == {"error": None, "registered": {"nvidia.com/gpu": [UUID0]}, "entries": []}


# ------------------------------------------------------------------ the PCI tree

def pci_function(sys_root: Path, address: str, vendor: str, device: str, cls: str, numa: str | None = "0",
                 physfn: str | None = None, symlink: bool = True, driver: str | None = None) -> Path:
    """One function as sysfs shows it: /sys/devices/pci0000:00/<address> with attribute files, and
    /sys/bus/pci/devices/<address> a symlink to it (or, with symlink=False, a plain directory); `driver` binds
    it: a `driver` link to /sys/bus/pci/drivers/<driver>."""
    devices = sys_root / "bus" / "pci" / "devices"
    devices.mkdir(parents=True, exist_ok=True)
    real = sys_root / "devices" / "pci0000:00" / address if symlink else devices / address
    real.mkdir(parents=True)
    for name, value in (("vendor", vendor), ("device", device), ("class", cls), ("numa_node", numa)):
        if value is not None:
            (real / name).write_text(value + "\n")
    if physfn:
        (real / "physfn").symlink_to(os.path.relpath(sys_root / "devices" / "pci0000:00" / physfn, real))
    if driver:
        drv = sys_root / "bus" / "pci" / "drivers" / driver
        drv.mkdir(parents=True, exist_ok=True)
        (real / "driver").symlink_to(os.path.relpath(drv, real))
    if symlink:
        (devices / address).symlink_to(os.path.relpath(real, devices))
    return real


@pytest.fixture
def sysfs(tmp_path) -> Path:
    root = tmp_path / "sys"
    pci_function(root, "0000:07:00.0", "0x10de", "0x20b0", "0x030200", numa="0", driver="nvidia")  # A100
    pci_function(root, "0000:07:00.1", "0x10de", "0x1aef", "0x040300", numa="0")  # the board's HDMI audio
    pci_function(root, "0000:0a:00.0", "0x10de", "0x2204", "0x030000", numa="1",
                 driver="vfio-pci")  # RTX 3090 (VGA controller) set aside for a VM
    pci_function(root, "0000:0b:00.0", "0x10de", "0x1af1", "0x068000", numa="-1")  # NVSwitch bridge
    pci_function(root, "0000:07:00.4", "0x10de", "0x20b0", "0x030200", numa="0", physfn="0000:07:00.0")  # SR-IOV VF
    pci_function(root, "0000:3b:00.0", "0x8086", "0x1572", "0x020000", numa="0")  # Intel X710 NIC
    pci_function(root, "0000:c1:00.0", "0x10DE", "0x2330", "0x030200", numa="-1", symlink=False)  # H100, VM-style
    pci_function(root, "0000:d1:00.0", "0x10de", "0x2330", "0x030200", numa=None)  # kernel without NUMA
    return root


def test_scan_lists_the_vendors_functions_by_address(sysfs):
    part = scan_pci(str(sysfs), "0x10de")
    assert part["error"] is None and part["root"] == str(sysfs)
    assert part["functions"] == [
        {"address": "0000:07:00.0", "vendor": "0x10de", "device": "0x20b0", "class": "0x030200", "numa": 0,
         "virtfn": False, "driver": "nvidia", "pcieRoot": "pci0000:00"},
        {"address": "0000:07:00.1", "vendor": "0x10de", "device": "0x1aef", "class": "0x040300", "numa": 0,
         "virtfn": False, "driver": None, "pcieRoot": "pci0000:00"},
        {"address": "0000:07:00.4", "vendor": "0x10de", "device": "0x20b0", "class": "0x030200", "numa": 0,
         "virtfn": True, "driver": None, "pcieRoot": "pci0000:00"},
        {"address": "0000:0a:00.0", "vendor": "0x10de", "device": "0x2204", "class": "0x030000", "numa": 1,
         "virtfn": False, "driver": "vfio-pci", "pcieRoot": "pci0000:00"},
        {"address": "0000:0b:00.0", "vendor": "0x10de", "device": "0x1af1", "class": "0x068000", "numa": None,
         "virtfn": False, "driver": None, "pcieRoot": "pci0000:00"},
        {"address": "0000:c1:00.0", "vendor": "0x10de", "device": "0x2330", "class": "0x030200", "numa": None,
         "virtfn": False, "driver": None, "pcieRoot": None},
        {"address": "0000:d1:00.0", "vendor": "0x10de", "device": "0x2330", "class": "0x030200", "numa": None,
         "virtfn": False, "driver": None, "pcieRoot": "pci0000:00"},
    ]


def test_scan_other_vendor(sysfs):
    assert [f["address"] for f in scan_pci(str(sysfs), "0x8086")["functions"]] == ["0000:3b:00.0"]


def test_scan_missing_tree(tmp_path):
    part = scan_pci(str(tmp_path / "nosys"), "0x10de")
    assert part == {"error": f"no PCI tree at {tmp_path / 'nosys'}/bus/pci/devices: is nodeProbe.sysfsPath right?",
                    "root": str(tmp_path / "nosys"), "functions": []}


def test_scan_names_a_function_without_class(tmp_path):
    root = tmp_path / "sys"
    pci_function(root, "0000:01:00.0", "0x10de", "0x20b0", "0x030200")
    (pci_function(root, "0000:02:00.0", "0x10de", "0x20b0", "0x030200") / "class").unlink()
    part = scan_pci(str(root), "0x10de")
    assert len(part["functions"]) == 2 and "0000:02:00.0" in part["error"]


def test_gpu_functions_physical_vga_and_3d_only(sysfs):
    gpus = gpu_functions(scan_pci(str(sysfs), "0x10de")["functions"])
    # not: the audio function, the NVSwitch, the VF with physfn
    assert [g["address"] for g in gpus] == ["0000:07:00.0", "0000:0a:00.0", "0000:c1:00.0", "0000:d1:00.0"]


def test_gpu_functions_on_plain_dicts():
    fns = [{"address": "a", "class": "0x030200", "virtfn": False},
           {"address": "b", "class": "0x030000"},  # virtfn absent: physical
           {"address": "c", "class": "0x030201", "virtfn": False},  # class and subclass decide
           {"address": "d", "class": "0x030200", "virtfn": True},
           {"address": "e", "class": "0x068000", "virtfn": False},
           {"address": "f", "class": "0x040300", "virtfn": False},
           {"address": "g", "class": "0x038000", "virtfn": False},  # "other display controller"
           {"address": "h", "class": None, "virtfn": False},
           {"address": "i", "virtfn": False}]
    assert [g["address"] for g in gpu_functions(fns)] == ["a", "b", "c"]
    assert gpu_functions([]) == []


# ------------------------------------------------------------------ the report

def test_main_prints_one_json_line_with_every_parts_error(tmp_path, capsys):
    sock = tmp_path / "pod-resources" / "kubelet.sock"
    plugins = tmp_path / "device-plugins"
    plugins.mkdir()
    rc = nodeprobe.main(["--pod-resources", str(sock), "--device-plugins", str(plugins),
                         "--sysfs", str(tmp_path / "sys") + "/", "--timeout", "1"])
    out = capsys.readouterr().out
    assert rc == 0 and out.count("\n") == 1
    doc = json.loads(out)
    assert list(doc) == ["version", "podResources", "allocatable", "checkpoint", "pci"]
    assert doc["version"] == 1
    assert doc["podResources"] == {"error": f"no socket at {sock}", "pods": []}
    assert doc["allocatable"] == {"error": f"no socket at {sock}", "devices": []}
    assert doc["checkpoint"] == {"error": f"no checkpoint at {plugins / 'kubelet_internal_checkpoint'}",
                                 "registered": {}, "entries": []}
    assert doc["pci"] == {"error": f"no PCI tree at {tmp_path / 'sys'}/bus/pci/devices: is nodeProbe.sysfsPath right?",
                          "root": str(tmp_path / "sys"), "functions": []}


def test_main_reads_checkpoint_and_pci(tmp_path, sysfs, capsys):
    plugins = tmp_path / "device-plugins"
    plugins.mkdir()
    (plugins / "kubelet_internal_checkpoint").write_text(checkpoint([], {"nvidia.com/gpu": [UUID0]}))
    nodeprobe.main(["--pod-resources", str(tmp_path / "none.sock"), "--device-plugins", str(plugins),
                    "--sysfs", str(sysfs), "--vendor", "10DE"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["checkpoint"] == {"error": None, "registered": {"nvidia.com/gpu": [UUID0]}, "entries": []}
    assert doc["pci"]["error"] is None and len(gpu_functions(doc["pci"]["functions"])) == 4


def test_main_repeats_in_rounds_a_reader_tells_apart_by_number(tmp_path, capsys, monkeypatch):
    from gpuconform import probes
    from gpuconform.verdicts import probe_report
    plugins = tmp_path / "device-plugins"
    plugins.mkdir()
    (plugins / "kubelet_internal_checkpoint").write_text(checkpoint([], {"nvidia.com/gpu": [UUID0]}))
    monkeypatch.setattr(nodeprobe, "scan_pci", lambda root, vendor: 1 / 0)  # rounds never scan the PCI tree
    rc = nodeprobe.main(["--pod-resources", str(tmp_path / "none.sock"), "--device-plugins", str(plugins),
                         "--sysfs", str(tmp_path), "--every", "0.01", "--for", "0.025"])
    out = capsys.readouterr().out
    got = probes.rounds(out)
    assert rc == 0 and [n for n, _ in got] == [1, 2, 3] and probes.begun(out) == 3
    doc, problems = probe_report(got[-1][1])
    assert problems == [] and "pci" not in doc
    assert doc["checkpoint"]["registered"] == {"nvidia.com/gpu": [UUID0]}
    # a round whose header is written but whose report is not yet: begun, not complete; a later one is "after"
    cut = out + "== round ==\n4\n"
    assert probes.begun(cut) == 4 and [n for n, _ in probes.rounds(cut)] == [1, 2, 3]


def test_main_survives_an_unexpected_exception(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(nodeprobe, "scan_pci", lambda root, vendor: 1 / 0)
    nodeprobe.main(["--pod-resources", "x", "--device-plugins", str(tmp_path), "--sysfs", str(tmp_path)])
    doc = json.loads(capsys.readouterr().out)
    assert doc["pci"] == {"error": "ZeroDivisionError: division by zero", "root": str(tmp_path), "functions": []}


@pytest.mark.parametrize("argv", [
    [],
    ["--pod-resources", "s", "--device-plugins", "d", "--sysfs", "r", "--vendor", "nvidia"],
    ["--pod-resources", "s", "--device-plugins", "d", "--sysfs", "r", "--vendor", "0x10000"],
    ["--pod-resources", "s", "--device-plugins", "d", "--sysfs", "r", "--timeout", "soon"],
])
def test_bad_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        nodeprobe.main(argv)
    assert e.value.code == 2
    assert capsys.readouterr().out == ""


def test_module_runs_as_a_program(tmp_path):
    r = subprocess.run([sys.executable, "-m", "gpuconform.nodeprobe", "--pod-resources", str(tmp_path / "s"),
                        "--device-plugins", str(tmp_path), "--sysfs", str(tmp_path)],
                       capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2], timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["podResources"]["error"] == f"no socket at {tmp_path / 's'}"


def dynamic_resource(namespace: str, claim: str, *devices: tuple[str, str, str, str]) -> bytes:
    """DynamicResource (claim_name = 2, claim_namespace = 3, claim_resources = 4) with ClaimResources
    (cdi_devices = 1 of CDIDevice.name = 1, driver_name = 2, pool_name = 3, device_name = 4)."""
    res = b"".join(ld(4, ld(1, string(1, cdi)) + string(2, drv) + string(3, pool) + string(4, dev))
                   for drv, pool, dev, cdi in devices)
    return string(2, claim) + string(3, namespace) + res


def test_list_response_with_a_dra_claim_of_a_container():
    """ContainerResources.dynamic_resources = 5 (v1.37.2 api.proto): the claim and its prepared devices."""
    ctr = string(1, "probe") + ld(5, dynamic_resource("gpuconform-r1", "record-gpu-node-dra-gpus-x7k2q",
                                                      ("gpu.nvidia.com", "gpu-node-dra", "gpu-1",
                                                       "k8s.gpu.nvidia.com/claim=4d1e-gpu-1")))
    (p,) = parse_list(list_response(pod("gpuconform-r1", "record-gpu-node-dra", ctr)))
    assert p["containers"] == [{"name": "probe", "devices": [], "claims": [
        {"claim": "gpuconform-r1/record-gpu-node-dra-gpus-x7k2q", "devices": [
            {"driver": "gpu.nvidia.com", "pool": "gpu-node-dra", "device": "gpu-1",
             "cdi": ["k8s.gpu.nvidia.com/claim=4d1e-gpu-1"]}]}]}]
    (plain,) = parse_list(list_response(pod("ns", "p", container("main"))))
    assert "claims" not in plain["containers"][0]  # a device-plugin node's report keeps its shape
