"""The mock NVML (localcluster/mocknvml) as NVIDIA's device plugin health check uses it: event sets fed by the
events file (xid, lost), lost GPUs, GPUs without event support.

The library is built once per session with localcluster/mocknvml/build.sh into a temporary folder and called
through ctypes the way go-nvml calls it (NVIDIA/k8s-device-plugin v0.19.3 internal/rm/health.go, checkHealth:
EventSetCreate, GetSupportedEventTypes, RegisterEvents, EventSetWait_v2 in a loop). Its state is per process, so
each test writes its own config, initialises, and shuts down.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "localcluster" / "mocknvml" / "build.sh"

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or shutil.which("go") is None,
    reason="building the mock NVML needs gcc, and go to fetch go-nvml's nvml.h (localcluster/mocknvml/build.sh)")

# nvml.h nvmlReturn_t
SUCCESS, INVALID_ARGUMENT, NOT_SUPPORTED, TIMEOUT, GPU_IS_LOST = 0, 2, 3, 10, 15
# nvml.h nvmlEventType*
SINGLE_BIT_ECC, DOUBLE_BIT_ECC, XID = 0x1, 0x2, 0x8
HEALTH_MASK = XID | DOUBLE_BIT_ECC | SINGLE_BIT_ECC  # health.go's eventMask
WHOLE_GPU = 0xFFFFFFFF

UUID0 = "GPU-11111111-2222-4333-8444-555555555555"
TWO_GPUS = f"""driver 550.127.05
gpu
  name NVIDIA A100-SXM4-40GB
  uuid {UUID0}
gpu
  name NVIDIA A100-SXM4-40GB
"""


class EventData(ctypes.Structure):
    """nvml.h nvmlEventData_t (the device handle is one pointer)."""
    _fields_ = [("device", ctypes.c_void_p), ("eventType", ctypes.c_ulonglong), ("eventData", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class Memory(ctypes.Structure):
    """nvml.h nvmlMemory_t."""
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


P = ctypes.c_void_p
SIGNATURES = {
    "nvmlInit_v2": [], "nvmlShutdown": [],
    "nvmlDeviceGetCount_v2": [ctypes.POINTER(ctypes.c_uint)],
    "nvmlDeviceGetHandleByIndex_v2": [ctypes.c_uint, ctypes.POINTER(P)],
    "nvmlDeviceGetHandleByUUID": [ctypes.c_char_p, ctypes.POINTER(P)],
    "nvmlDeviceGetMigDeviceHandleByIndex": [P, ctypes.c_uint, ctypes.POINTER(P)],
    "nvmlDeviceGetUUID": [P, ctypes.c_char_p, ctypes.c_uint],
    "nvmlDeviceGetMemoryInfo": [P, ctypes.POINTER(Memory)],
    "nvmlDeviceGetSupportedEventTypes": [P, ctypes.POINTER(ctypes.c_ulonglong)],
    "nvmlDeviceRegisterEvents": [P, ctypes.c_ulonglong, P],
    "nvmlEventSetCreate": [ctypes.POINTER(P)],
    "nvmlEventSetWait_v2": [P, ctypes.POINTER(EventData), ctypes.c_uint],
    "nvmlEventSetWait": [P, ctypes.POINTER(EventData), ctypes.c_uint],
    "nvmlEventSetFree": [P],
}


@pytest.fixture(scope="session")
def lib(tmp_path_factory) -> ctypes.CDLL:
    out = tmp_path_factory.mktemp("mocknvml")
    r = subprocess.run([str(BUILD)], env={**os.environ, "OUT": str(out)}, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"build.sh failed:\n{r.stdout}\n{r.stderr}"
    dll = ctypes.CDLL(str(out / "libnvidia-ml.so.1"))  # CDLL releases the GIL: a thread can append while C waits
    for name, args in SIGNATURES.items():
        fn = getattr(dll, name)
        fn.argtypes, fn.restype = args, ctypes.c_int
    return dll


class Mock:
    """One initialised session of the library over a config of our own, and its events file."""

    def __init__(self, lib: ctypes.CDLL, events: Path):
        self.lib, self.events = lib, events
        self.sets: list[P] = []

    def count(self) -> int:
        n = ctypes.c_uint()
        assert self.lib.nvmlDeviceGetCount_v2(ctypes.byref(n)) == SUCCESS
        return n.value

    def handle(self, index: int) -> P:
        h = P()
        assert self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(h)) == SUCCESS
        return h

    def mig(self, gpu: P, index: int) -> P:
        h = P()
        assert self.lib.nvmlDeviceGetMigDeviceHandleByIndex(gpu, index, ctypes.byref(h)) == SUCCESS
        return h

    def uuid(self, h) -> tuple[int, str]:
        buf = ctypes.create_string_buffer(96)
        r = self.lib.nvmlDeviceGetUUID(h, buf, len(buf))
        return r, buf.value.decode()

    def memory(self, h) -> int:
        return self.lib.nvmlDeviceGetMemoryInfo(h, ctypes.byref(Memory()))

    def supported(self, h) -> tuple[int, int]:
        mask = ctypes.c_ulonglong()
        r = self.lib.nvmlDeviceGetSupportedEventTypes(h, ctypes.byref(mask))
        return r, mask.value

    def event_set(self, *gpus: int, mask: int = HEALTH_MASK) -> P:
        """An event set with the given GPUs registered, as checkHealth does it."""
        s = P()
        assert self.lib.nvmlEventSetCreate(ctypes.byref(s)) == SUCCESS
        self.sets.append(s)
        for i in gpus:
            assert self.lib.nvmlDeviceRegisterEvents(self.handle(i), mask, s) == SUCCESS
        return s

    def wait(self, s: P, timeout_ms: int) -> tuple[int, EventData]:
        data = EventData()
        return self.lib.nvmlEventSetWait_v2(s, ctypes.byref(data), timeout_ms), data

    def append(self, text: str, after: float = 0.0) -> None:
        """Appends to the events file now, or from a thread `after` seconds from now (while we wait)."""
        def write():
            with self.events.open("a") as f:
                f.write(text)
        if after:
            t = threading.Timer(after, write)
            t.daemon = True
            t.start()
        else:
            write()


@pytest.fixture
def mock(lib, tmp_path, monkeypatch):
    """Set config= before first use: `mock(config)` writes it, points MOCK_NVML_CONFIG at it and initialises."""
    started: list[Mock] = []

    def start(config: str = TWO_GPUS, events: str | None = "") -> Mock:
        path = tmp_path / "hw.conf"
        path.write_text(config)
        monkeypatch.setenv("MOCK_NVML_CONFIG", str(path))
        ev = tmp_path / "hw.conf.events"  # the default events file: $MOCK_NVML_CONFIG.events
        if events is not None:
            ev.write_text(events)
        assert lib.nvmlInit_v2() == SUCCESS
        m = Mock(lib, ev)
        started.append(m)
        return m

    yield start
    for m in started:
        for s in m.sets:
            lib.nvmlEventSetFree(s)
        assert lib.nvmlShutdown() == SUCCESS


def test_init_count_handles_uuid(mock, lib):
    m = mock()
    assert m.count() == 2
    assert m.uuid(m.handle(0)) == (SUCCESS, UUID0)
    r, u1 = m.uuid(m.handle(1))
    assert r == SUCCESS and u1.startswith("GPU-") and u1 != UUID0
    h = P()
    assert lib.nvmlDeviceGetHandleByIndex_v2(2, ctypes.byref(h)) == INVALID_ARGUMENT
    assert lib.nvmlDeviceGetHandleByUUID(UUID0.encode(), ctypes.byref(h)) == SUCCESS
    assert h.value == m.handle(0).value
    assert m.supported(m.handle(0)) == (SUCCESS, HEALTH_MASK)


def test_wait_times_out_on_an_empty_events_file(mock):
    m = mock()
    s = m.event_set(0, 1)
    t0 = time.monotonic()
    r, _ = m.wait(s, 150)
    assert r == TIMEOUT
    assert 0.14 <= time.monotonic() - t0 < 1.0


def test_wait_times_out_without_an_events_file(mock):
    m = mock(events=None)
    assert not m.events.exists()
    assert m.wait(m.event_set(0), 120)[0] == TIMEOUT


def test_xid_appended_while_waiting_is_delivered_once(mock):
    m = mock()
    s = m.event_set(0, 1)
    m.append("xid 1 79\n", after=0.15)
    t0 = time.monotonic()
    r, e = m.wait(s, 3000)
    assert r == SUCCESS
    assert time.monotonic() - t0 < 1.5  # polled, not the whole timeout
    assert (e.eventType, e.eventData) == (XID, 79)
    assert (e.gpuInstanceId, e.computeInstanceId) == (WHOLE_GPU, WHOLE_GPU)
    assert e.device == m.handle(1).value
    assert m.uuid(e.device) == m.uuid(m.handle(1))
    assert m.wait(s, 150)[0] == TIMEOUT  # consumed: not delivered twice


def test_each_set_gets_each_line_and_v1_wait_too(mock, lib):
    m = mock()
    a, b = m.event_set(0), m.event_set(0)
    m.append(f"xid {UUID0} 48\n")  # by UUID
    data = EventData()
    assert lib.nvmlEventSetWait(a, ctypes.byref(data), 500) == SUCCESS and data.eventData == 48
    r, e = m.wait(b, 500)
    assert r == SUCCESS and e.eventData == 48


def test_lines_written_before_the_set_are_not_delivered(mock):
    m = mock(events="xid 0 79\n")  # NVML records no event from before registration (nvml.h)
    assert m.wait(m.event_set(0), 150)[0] == TIMEOUT


def test_a_partial_line_is_not_consumed_until_complete(mock):
    m = mock()
    s = m.event_set(0)
    m.append("xid 0 4")
    assert m.wait(s, 150)[0] == TIMEOUT
    m.append("8\n")
    r, e = m.wait(s, 500)
    assert r == SUCCESS and e.eventData == 48
    assert m.wait(s, 120)[0] == TIMEOUT


def test_xid_of_an_unregistered_gpu_is_not_delivered(mock):
    m = mock()
    s = m.event_set(0)
    ecc_only = m.event_set()
    assert m.lib.nvmlDeviceRegisterEvents(m.handle(1), DOUBLE_BIT_ECC, ecc_only) == SUCCESS
    m.append("xid 1 79\nxid 0 94\n")
    r, e = m.wait(s, 500)
    assert r == SUCCESS and e.eventData == 94 and e.device == m.handle(0).value
    assert m.wait(s, 120)[0] == TIMEOUT
    assert m.wait(ecc_only, 120)[0] == TIMEOUT  # GPU 1 registered, but not for Xid events


def test_lost_gpu_fails_wait_and_queries(mock):
    m = mock()
    s = m.event_set(0, 1)
    other = m.event_set(0)  # did not register GPU 1
    h0, h1 = m.handle(0), m.handle(1)
    m.append("lost 1\n", after=0.15)
    assert m.wait(s, 3000)[0] == GPU_IS_LOST
    assert m.uuid(h1)[0] == GPU_IS_LOST
    assert m.memory(h1) == GPU_IS_LOST
    assert m.supported(h1)[0] == GPU_IS_LOST
    assert m.handle(1).value == h1.value  # the handle is still handed out; queries on it fail
    assert m.uuid(h0)[0] == SUCCESS and m.memory(h0) == SUCCESS
    m.append("xid 1 79\n")  # a lost GPU reports nothing more; the set is told once
    assert m.wait(s, 150)[0] == TIMEOUT
    assert m.wait(other, 120)[0] == TIMEOUT


def test_lost_in_the_events_file_is_seen_by_queries_without_a_wait(mock):
    m = mock()
    h1 = m.handle(1)
    assert m.memory(h1) == SUCCESS
    m.append("lost 1\n")
    assert m.memory(h1) == GPU_IS_LOST


def test_lost_from_the_config(mock):
    m = mock(TWO_GPUS + "  lost 1\n")
    h1 = m.handle(1)  # handed out, as NVML does; every query on it fails
    assert m.uuid(h1)[0] == GPU_IS_LOST
    assert m.memory(h1) == GPU_IS_LOST
    assert m.supported(h1)[0] == GPU_IS_LOST
    assert m.lib.nvmlDeviceRegisterEvents(h1, HEALTH_MASK, m.event_set()) == GPU_IS_LOST
    assert m.uuid(m.handle(0))[0] == SUCCESS


def test_events_0_is_not_supported(mock):
    m = mock(TWO_GPUS + "  events 0\n")
    assert m.supported(m.handle(1))[0] == NOT_SUPPORTED  # health.go: marks the device unhealthy
    assert m.lib.nvmlDeviceRegisterEvents(m.handle(1), XID, m.event_set()) == NOT_SUPPORTED
    assert m.supported(m.handle(0)) == (SUCCESS, HEALTH_MASK)


def test_events_none_is_an_empty_mask(mock):
    m = mock(TWO_GPUS + "  events none\n")
    assert m.supported(m.handle(1)) == (SUCCESS, 0)
    s = m.event_set()
    assert m.lib.nvmlDeviceRegisterEvents(m.handle(1), 0, s) == NOT_SUPPORTED  # health.go: "too old"
    m.append("xid 1 79\n")
    assert m.wait(s, 120)[0] == TIMEOUT


def test_malformed_lines_are_skipped(mock, monkeypatch, capfd):
    monkeypatch.setenv("MOCK_NVML_TRACE", "1")
    m = mock()
    s = m.event_set(0)
    bad = ["xid", "xid 0", "xid 9 79", "xid 0 abc", "xid 0 -1", "bogus 0", "lost", "lost 9", "xid 0 79 extra"]
    m.append("\n".join(bad) + "\n# a comment\n\n   \nxid 0 94  # trailing comment\n")
    r, e = m.wait(s, 500)
    assert r == SUCCESS and e.eventData == 94
    assert m.wait(s, 120)[0] == TIMEOUT
    err = capfd.readouterr().err
    assert err.count("skipping malformed line") == len(bad), err  # one message a line


def test_xid_of_a_mig_device_names_its_instance(mock):
    m = mock("""gpu
  name NVIDIA A100-SXM4-40GB
  mig_capable 1
  mig_mode 1
  mig 3g.20gb 2
""")
    gpu = m.handle(0)
    mig = m.mig(gpu, 1)
    r, mig_uuid = m.uuid(mig)
    assert r == SUCCESS and mig_uuid.startswith("MIG-")
    s = m.event_set(0)
    m.append(f"xid {mig_uuid} 48\n")
    r, e = m.wait(s, 500)
    assert r == SUCCESS and e.device == gpu.value  # events come on the parent GPU's handle (nvml.h)
    assert (e.gpuInstanceId, e.computeInstanceId) == (2, 0)
    m.append(f"lost {mig_uuid}\n")  # the GPU under it falls off the bus
    assert m.wait(s, 500)[0] == GPU_IS_LOST
    assert m.uuid(gpu)[0] == GPU_IS_LOST
    assert m.uuid(mig)[0] == GPU_IS_LOST and m.memory(mig) == GPU_IS_LOST
