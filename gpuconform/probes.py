"""Parsing what in-pod probes print: nvidia-smi, CPU lists, NUMA files, the CUDA vector-add sample.

Probe pods print sections delimited by `== name ==` lines (see manifests.probe_script), so one pod gives all the
evidence a check needs and its log is attached verbatim to a failing test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


def sections(log: str) -> dict[str, str]:
    """Splits probe output into {section: text} on lines like `== nvidia-smi -L ==`."""
    out: dict[str, list[str]] = {}
    current = None
    for line in log.splitlines():
        m = re.match(r"^== (.+) ==$", line)
        if m:
            current = m.group(1)
            out[current] = []
        elif current is not None:
            out[current].append(line)
    return {k: "\n".join(v).strip("\n") for k, v in out.items()}


def rounds(log: str, marker: str = "round") -> list[tuple[int, str]]:
    """A repeating probe's log (`== round ==`, the round's number, then its sections, each round ending with
    `== end ==`) -> (number, text) of each complete round, in order; a round still being printed, or cut at the
    start of a tail of the log, is left out."""
    out = []
    for part in re.split(rf"^== {re.escape(marker)} ==$", log, flags=re.M)[1:]:
        m = re.match(r"\s*(\d+)\s*\n", part)
        if m and re.search(r"^== end ==$", part, re.M):
            out.append((int(m.group(1)), part))
    return out


def begun(log: str, marker: str = "round") -> int:
    """The highest round number whose header the log shows, complete or not (0: none). A repeating probe writes
    a round's header before it reads anything, so every round numbered above this one began after the log was
    read."""
    return max((int(n) for n in re.findall(rf"^== {re.escape(marker)} ==\n\s*(\d+)\s*$", log, flags=re.M)),
               default=0)


@dataclass(frozen=True)
class Mig:
    profile: str  # e.g. "1g.5gb", "1g.10gb.me", "1c.3g.20gb"
    index: int  # the MIG device's index under its parent GPU
    uuid: str


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    uuid: str
    migs: tuple[Mig, ...] = ()


_L_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: ((?:GPU|MIG)-[^)]+)\)\s*$")
# nvidia-smi -L prints a GPU in MIG mode followed by one indented line per MIG device it can see:
#   "  MIG 1g.20gb     Device  0: (UUID: MIG-ce861fb0-...)" (testing/unit/samples/smi_l_a100_mig_mixed.txt)
_MIG_LINE = re.compile(r"^MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)]+)\)\s*$")


def parse_nvidia_smi_l(text: str) -> list[Gpu]:
    """`nvidia-smi -L` -> GPUs, each with the MIG devices listed under it. 'No devices were found' gives []."""
    gpus: list[Gpu] = []
    for line in text.splitlines():
        m = _L_LINE.match(line.strip())
        if m:
            gpus.append(Gpu(int(m.group(1)), m.group(2), m.group(3)))
            continue
        m = _MIG_LINE.match(line.strip())
        if m and gpus:
            g = gpus[-1]
            gpus[-1] = Gpu(g.index, g.name, g.uuid, g.migs + (Mig(m.group(1), int(m.group(2)), m.group(3)),))
    return gpus


def exclusive_ids(gpus: list[Gpu]) -> list[str]:
    """The IDs of what a pod was exclusively given: its MIG devices where it sees any (the parent GPU is shared
    between MIG devices), else its GPUs. Time-sliced replicas of one GPU share that GPU's UUID."""
    migs = [m.uuid for g in gpus for m in g.migs]
    return migs or [g.uuid for g in gpus]


def parse_query_csv(text: str) -> list[dict[str, str]]:
    """`nvidia-smi --query-gpu=a,b --format=csv` (with header) -> rows keyed by header names without units."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines or "," not in lines[0] and len(lines) == 1 and not lines[0].startswith("index"):
        return []
    header = [re.sub(r"\s*\[.*\]$", "", h.strip()) for h in lines[0].split(",")]
    rows = []
    for ln in lines[1:]:
        vals = [v.strip() for v in ln.split(",")]
        if len(vals) == len(header):
            rows.append(dict(zip(header, vals)))
    return rows


def parse_topo_numa(text: str) -> dict[str, int | None]:
    """`nvidia-smi topo -m` -> {"GPU0": numa node or None for N/A} from the 'NUMA Affinity' column.

    Cells are split on any whitespace, not on single tabs: nvidia-smi pads short cells with a second tab
    ("0-7", tab, tab, "N/A"), which shifts tab-counted columns, and pasted or re-logged copies often have the
    tabs expanded to spaces. A GPU row is: name, one link cell per device column, CPU affinity, NUMA affinity
    [, GPU NUMA ID].
    An affinity that is not one node (N/A, a range such as 0-1) gives None.
    """
    lines = text.splitlines()
    at = next((i for i, ln in enumerate(lines) if "CPU Affinity" in ln), None)
    if at is None or "NUMA Affinity" not in lines[at]:
        return {}
    n_devices = len(lines[at].split("CPU Affinity")[0].split())
    out: dict[str, int | None] = {}
    for ln in lines[at + 1:]:
        cells = ln.split()
        if cells and cells[0].startswith("Legend"):
            break
        if len(cells) < n_devices + 3 or not re.fullmatch(r"GPU\d+", cells[0]):
            continue
        v = cells[n_devices + 2]
        out[cells[0]] = int(v) if v.isdigit() else None
    return out


def parse_pci_numa(text: str) -> dict[str, int | None]:
    """The probe's "pci numa" section: one "<pci.bus_id> <numa_node>" line per GPU (sysfs numa_node) ->
    {bus id: node}; -1 (no NUMA affinity, typical in VMs) or anything but a node number gives None."""
    out: dict[str, int | None] = {}
    for line in text.splitlines():
        bus, _, val = line.strip().rpartition(" ")
        if bus:
            out[bus.strip()] = int(val) if val.isdigit() else None
    return out


# The most CPU ids a cpulist may name: Linux's NR_CPUS tops out at 8192 (x86 MAXSMP), so 65536 leaves room and
# still refuses a range such as 0-4000000000, which would otherwise be built as a set of billions of ints.
MAX_CPUS = 65536
_CPU_PART = re.compile(r"^(\d+)(?:-(\d+))?$")


def parse_cpulist(text: str) -> set[int]:
    """'0-3,8,10-11' -> {0,1,2,3,8,10,11} (the kernel's cpulist format, lib/bitmap.c; no stride form). Anything
    else, or a CPU id of MAX_CPUS or more, raises ValueError naming the bad part."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        m = _CPU_PART.match(part)
        if not m:
            raise ValueError(f"cpulist {text.strip()[:80]!r}: {part[:40]!r} is not a CPU or a range of CPUs")
        a, b = int(m.group(1)), int(m.group(2) or m.group(1))
        if a > b or b >= MAX_CPUS:
            raise ValueError(f"cpulist {text.strip()[:80]!r}: range {part[:40]!r} is empty or past CPU {MAX_CPUS - 1}")
        cpus.update(range(a, b + 1))
    return cpus


def cpus_allowed(proc_status: str) -> set[int]:
    """Cpus_allowed_list from /proc/self/status (empty when it is not there; ValueError when it is malformed)."""
    m = re.search(r"^Cpus_allowed_list:\s*(\S+)", proc_status, re.M)
    return parse_cpulist(m.group(1)) if m else set()


def numa_of_cpus(cpus: set[int], node_cpulists: dict[int, set[int]]) -> set[int]:
    """The NUMA nodes the given CPUs belong to."""
    return {n for n, lst in node_cpulists.items() if cpus & lst}


@dataclass(frozen=True)
class Alignment:
    aligned: bool | None  # None = not applicable (no NUMA affinity reported) or not judged (`unknown`)
    cpu_numa: frozenset[int]
    gpu_numa: frozenset[int]
    detail: str
    unknown: str = ""  # why the CPUs' NUMA nodes could not be read: nothing to judge, never a pass
    malformed: bool = False  # `unknown` because the probe's output did not parse (ERROR-MALFORMED-DATA)


def alignment(cpus: set[int], node_cpulists: dict[int, set[int]], gpu_numa: dict[str, int | None]) -> Alignment:
    """CPUs and GPUs on one NUMA node? GPUs with numa_node -1/N/A make the answer N/A, not a failure; CPUs whose
    NUMA node the probe did not show make it unknown (with no CPU evidence, one GPU node alone would look aligned)."""
    cn = frozenset(numa_of_cpus(cpus, node_cpulists))
    known = {g: n for g, n in gpu_numa.items() if n is not None}
    if not gpu_numa:
        return Alignment(None, cn, frozenset(), "no GPU NUMA information found in the pod")
    if len(known) < len(gpu_numa):
        na = sorted(g for g, n in gpu_numa.items() if n is None)
        return Alignment(None, cn, frozenset(known.values()), f"no NUMA affinity reported for {', '.join(na)}")
    gn = frozenset(known.values())
    listed = set().union(*node_cpulists.values()) if node_cpulists else set()
    why = ("the probe printed no Cpus_allowed_list: the pod's CPUs are unknown" if not cpus else
           "the probe printed no NUMA node cpulists (numa N sections)" if not node_cpulists else
           f"CPUs {fmt_cpus(cpus - listed)} of the pod are on none of the NUMA nodes the probe listed "
           f"({', '.join(str(n) for n in sorted(node_cpulists))})" if cpus - listed else "")
    if why:
        return Alignment(None, cn, gn, why, unknown=why)
    ok = len(cn | gn) == 1
    detail = (f"CPUs {fmt_cpus(cpus)} on NUMA {sorted(cn)}, GPUs "
              + ", ".join(f"{g}@NUMA{n}" for g, n in sorted(known.items())))
    return Alignment(ok, cn, gn, detail)


def fmt_cpus(cpus: set[int]) -> str:
    """{0,1,2,5} -> '0-2,5'."""
    out, run = [], []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
        else:
            if run:
                out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
            run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


# CUDA error strings the vector-add sample prints, mapped to what a platform engineer should look at.
CUDA_CAUSES = [
    ("no CUDA-capable device is detected", "FAIL-F12-DEVICE-NOT-INJECTED",
     "the container sees no GPU: the runtime did not inject the allocated device"),
    ("CUDA driver version is insufficient for CUDA runtime version", "FAIL-F13-CUDA-FAILURE",
     "host driver too old for the image's CUDA runtime: upgrade the driver or use an older CUDA image"),
    ("system not yet initialized", "FAIL-F13-CUDA-FAILURE",
     "NVSwitch systems need nvidia-fabricmanager running (Fabric Manager not started)"),
    ("forward compatibility was attempted on non supported HW", "FAIL-F13-CUDA-FAILURE",
     "the image's CUDA forward-compat libs do not support this GPU: use a matching CUDA image"),
    # older CUDA runtimes print "all CUDA-capable devices are busy or unavailable", newer ones
    # "CUDA-capable device(s) is/are busy or unavailable": match the common tail.
    ("busy or unavailable", "FAIL-F13-CUDA-FAILURE",
     "GPUs are in exclusive-process mode and busy, or MPS is misconfigured"),
    ("out of memory", "FAIL-F13-CUDA-FAILURE", "GPU memory is exhausted by another process (sharing oversubscribed?)"),
    ("unknown error", "FAIL-F13-CUDA-FAILURE", "driver/device fault: check dmesg for XID errors"),
]


@dataclass(frozen=True)
class WorkloadResult:
    passed: bool
    code: str | None
    cause: str


def vector_add_result(log: str, exit_code: int | None) -> WorkloadResult:
    """Maps the CUDA sample's output and exit code to pass or a reason code with a cause."""
    if exit_code == 0 and re.search(r"^Test PASSED\s*$", log, re.M):
        return WorkloadResult(True, None, "Test PASSED")
    for needle, code, cause in CUDA_CAUSES:
        if needle.lower() in log.lower():
            return WorkloadResult(False, code, f"{cause} (sample printed: {needle!r})")
    m = re.search(r"error code (.*?)\)!", log)  # the sample prints "(error code %s)!"; %s may hold "(s)"
    if m:
        return WorkloadResult(False, "FAIL-F13-CUDA-FAILURE", f"CUDA error {m.group(1)!r}: unmapped cause")
    return WorkloadResult(False, "FAIL-F13-CUDA-FAILURE",
                          f"exit code {exit_code} without 'Test PASSED' and without a known CUDA error string")
