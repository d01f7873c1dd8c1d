"""Loading the recorded inputs under testing/unit/samples/ (each file says at its top where it came from: '# source:',
'# what:', '# note:' lines) and building the probe logs the checks read from them."""

from __future__ import annotations

from pathlib import Path

import yaml

SAMPLES = Path(__file__).parent / "samples"


def text(name: str) -> str:
    """A sample's text without the '# ' lines at its top."""
    lines = (SAMPLES / name).read_text().splitlines(keepends=True)
    while lines and lines[0].startswith("# "):
        lines.pop(0)
    return "".join(lines)


def obj(name: str):
    """A YAML sample (a pod, a node, a list of them) as the API returns it: a camelCase dict (the comments at its
    top are YAML comments)."""
    return yaml.safe_load((SAMPLES / name).read_text())


def probe_log(**sections: str) -> str:
    """A probe pod's log in pods.PROBE_SCRIPT's layout: `== name ==` then the section's lines, ending with
    `== end ==`. Keyword names use '_' for ' ' (nvidia_smi_L -> "nvidia-smi -L", pci_numa -> "pci numa",
    numa_0 -> "numa 0")."""
    names = {"nvidia_smi_L": "nvidia-smi -L", "pci_numa": "pci numa"}
    out = []
    for key, body in sections.items():
        out += [f"== {names.get(key, key.replace('_', ' '))} ==", body.rstrip("\n")]
    return "\n".join(out + ["== end =="]) + "\n"
