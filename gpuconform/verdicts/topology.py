"""Topology verdicts (tests/topology): the kubelet's policies from its configz, the admission of a Guaranteed
GPU pod under single-numa-node, and the NUMA alignment of its CPUs and GPU from the probe's output."""

from __future__ import annotations

import json

from .. import metrics, probes
from .common import Finding

# configz leaves out a field at its default; these are the kubelet's defaults (KubeletConfiguration v1beta1).
KUBELET_DEFAULTS = {"topologyManagerPolicy": "none", "topologyManagerScope": "container", "cpuManagerPolicy": "none"}


def parse_configz(text: str) -> dict:
    """The kubelet's configz body ({"kubeletconfig": {...}}, kubernetes pkg/kubelet/server configz) -> the
    kubeletconfig mapping; ValueError saying what is wrong when the body is not that (an HTML page from a proxy,
    junk): read as an empty config, it would pass as "every policy at its default"."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ValueError(f"not JSON ({e.__class__.__name__} at character {getattr(e, 'pos', '?')}; "
                         f"starts {text.strip()[:40]!r})") from None
    kc = doc.get("kubeletconfig") if isinstance(doc, dict) else None
    if not isinstance(kc, dict):
        raise ValueError(f"no kubeletconfig object in it (a JSON {type(doc).__name__}"
                         + (f" with keys {sorted(doc)[:5]}" if isinstance(doc, dict) else "") + ")")
    return kc


def kubelet_policies(kubelet_config: dict | None) -> dict[str, str]:
    """The policies the kubelet runs with, from its configz `kubeletconfig` ({} or None: every default)."""
    kc = kubelet_config or {}
    return {k: kc.get(k, default) for k, default in KUBELET_DEFAULTS.items()}


def expected_policies(topology: dict) -> dict[str, str]:
    """What the config expects (the `topology` section; "any" accepts every value)."""
    return {"topologyManagerPolicy": topology["policy"], "topologyManagerScope": topology["scope"],
            "cpuManagerPolicy": topology["cpuManagerPolicy"]}


def policy_findings(node: str, got: dict[str, str], want: dict[str, str]) -> list[Finding]:
    """Each expected policy ("any": not compared) equals the kubelet's (FAIL-TOPOLOGY-POLICY)."""
    wrong = [f"{k}={got.get(k)!r} (expected {v!r})" for k, v in want.items() if v != "any" and got.get(k) != v]
    return [Finding("FAIL-TOPOLOGY-POLICY", f"{node}: kubelet " + ", ".join(wrong))] if wrong else []


def admission_findings(node: str, pod: dict, free: int, advertised: int, policy: str) -> list[Finding]:
    """A Guaranteed 1 CPU + 1 GPU pod rejected with TopologyAffinityError: on a node with GPUs in use the free ones
    may just be split across NUMA nodes (SKIP-F06-FRAGMENTED, a skip); on an idle node no NUMA node offers both a
    CPU and a GPU (FAIL-F06-TOPOLOGY-AFFINITY). `free` and `advertised` count the node's GPU resource."""
    st = pod.get("status", {})
    if st.get("reason") != "TopologyAffinityError":
        return []
    msg = st.get("message", "")
    if free < advertised:
        return [Finding("SKIP-F06-FRAGMENTED", f"{node}: TopologyAffinityError with {advertised - free} of "
                        f"{advertised} GPUs in use: free GPUs may be split across NUMA nodes ({msg})")]
    return [Finding("FAIL-F06-TOPOLOGY-AFFINITY", f"{node}: the kubelet rejected a Guaranteed 1 CPU + 1 GPU pod on an "
                    f"idle node under policy {policy}: {msg}. No NUMA node offers both a free CPU and a GPU, so the "
                    "plugin's device topology or the CPU reservation is wrong")]


def alignment_from_log(log: str) -> probes.Alignment:
    """The pod's CPUs (Cpus_allowed_list), the node's NUMA cpulists and each GPU's NUMA node (sysfs numa_node by
    PCI bus id; without it, `nvidia-smi topo -m`'s NUMA Affinity), from the probe's sections."""
    s = probes.sections(log)
    gpu_numa = probes.parse_pci_numa(s.get("pci numa", "")) or probes.parse_topo_numa(s.get("topo", ""))
    try:
        cpus = probes.cpus_allowed(s.get("cpus", ""))
        node_cpus: dict[int, set[int]] = {}
        for k, v in s.items():
            if k.startswith("numa "):
                if not k[5:].isdigit():
                    raise ValueError(f"section {k[:40]!r} does not name a NUMA node")
                node_cpus[int(k[5:])] = probes.parse_cpulist(v)
    except ValueError as e:  # a malformed cpulist: nothing to judge, said so (not a crash, not a pass)
        why = f"malformed probe output: {e}"
        return probes.Alignment(None, frozenset(), frozenset(), why, unknown=why, malformed=True)
    return probes.alignment(cpus, node_cpus, gpu_numa)


def numa_findings(node: str, al: probes.Alignment) -> list[Finding]:
    """CPUs and GPU on one NUMA node; SKIP-NUMA-NA (a skip) when the GPU reports no NUMA affinity; NOTCHECKED-OPTIONAL
    when the probe's output does not show which NUMA nodes the pod's CPUs are on; ERROR-MALFORMED-DATA when what it
    shows does not parse (a cpulist that is not one)."""
    if al.unknown:
        return [Finding("ERROR-MALFORMED-DATA" if al.malformed else "NOTCHECKED-OPTIONAL",
                        f"{node}: NUMA alignment not checked: {al.unknown}")]
    if al.aligned is None:
        return [Finding("SKIP-NUMA-NA", f"{node}: {al.detail}")]
    return [] if al.aligned else [Finding("FAIL-NUMA-MISALIGNED", f"{node}: {al.detail}")]


# The topology manager's admission failures, cumulative since the kubelet started (kubernetes v1.34
# pkg/kubelet/metrics/metrics.go TopologyManagerAdmissionErrorsTotalKey, in the kubelet subsystem).
ADMISSION_ERRORS = "kubelet_topology_manager_admission_errors_total"


def admission_errors_delta(before: list | None, after: list | None) -> dict:
    """Evidence, not a verdict: how many pods the node's topology manager rejected during the run (any pod, any
    workload: other tenants' rejections under fragmentation are legitimate, the suite's own are judged by the NUMA
    check). A kubelet restart resets the counter: then the count since the restart."""
    b = metrics.value(before, ADMISSION_ERRORS) if before is not None else None
    a = metrics.value(after, ADMISSION_ERRORS) if after is not None else None
    if a is None:
        return {"topology manager admission errors during the run": "not read (the kubelet's metrics not readable, or the "
                                                                     "kubelet does not export it)"}
    since_start = b is not None and a >= b  # else the kubelet restarted during the run and reset the counter
    return {"topology manager admission errors during the run": int(a - b if since_start else a),
            "counted since": "the run started" if since_start else "the kubelet (re)started"}
