"""Plain kubectl access to the local test bed for the end-to-end tests (independent of the suite's code)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATE = ROOT / ".localcluster"
KUBECONFIG = STATE / "kubeconfig"
# Resolved at import: pytester later points HOME at a temporary directory.
_BUILT = sorted(Path.home().glob(".cache/gpuconform/k8s/*/kubectl"))
KUBECTL = str(_BUILT[-1]) if _BUILT else "kubectl"


def kubectl(*args: str, input: str | None = None, check: bool = True, timeout: float = 120) -> str:
    out = subprocess.run([KUBECTL, *args], capture_output=True, text=True, input=input, timeout=timeout,
                         env={**os.environ, "KUBECONFIG": str(KUBECONFIG)})
    if check:
        assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr.strip()}"
    return out.stdout


def get(*args: str) -> dict:
    return json.loads(kubectl("get", "-o", "json", *args))
