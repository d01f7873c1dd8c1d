"""End-to-end: `make cleanup` leaves alone what is not a run's (issue 18).

With the fault foreign-namespace applied (other teams' namespaces labelled like the suite's:
localcluster/faults.py FOREIGN_NAMESPACES) and one abandoned run namespace made here as a SIGKILLed run leaves it
(named and labelled by its run id, heartbeat long stale), `python -m gpuconform.cleanup` (what `make cleanup`
runs) deletes the abandoned one and leaves the foreign ones Active, naming each with why; with --force (as a dry
run: live runs of other tests on the bed must not lose their namespaces) it still would not delete them.

Needs the local cluster (`make cluster-up`); skipped with a reason when it is not running.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time

import faults
import pytest
from bedtools import KUBECONFIG, ROOT, bed, get, kubectl

pytestmark = [pytest.mark.e2e, pytest.mark.faults,
              pytest.mark.skipif(not KUBECONFIG.exists(), reason="local cluster not running (make cluster-up)")]


def cleanup(*extra: str) -> str:
    out = subprocess.run([sys.executable, "-m", "gpuconform.cleanup", "--kubeconfig", str(KUBECONFIG), *extra],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"cleanup {' '.join(extra)} exited {out.returncode}:\n{out.stdout}\n{out.stderr}"
    return out.stdout


def phase(name: str) -> str | None:
    items = get("namespaces", "--field-selector", f"metadata.name={name}")["items"]
    return items[0]["status"]["phase"] if items else None


def test_cleanup_deletes_an_abandoned_run_namespace_and_leaves_foreign_ones_labelled_like_it():
    """The abandoned run's heartbeat is old by the API server's clock (its managedFields time), not by what the
    annotation says: made here just now, it is stale only beyond --stale-after (3 s, waited for)."""
    run_id = f"e2e-{secrets.token_hex(3)}"
    abandoned = {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": f"gpuconform-{run_id}",
        "labels": {"app.kubernetes.io/part-of": "gpuconform", "gpuconform.dev/run": run_id},
        "annotations": {"gpuconform.dev/heartbeat": "2025-01-01T00:00:00Z"}}}
    bed("fault", "foreign-namespace")
    try:
        kubectl("apply", "-f", "-", input=json.dumps(abandoned))
        assert "its run is alive" in cleanup("--dry-run"), "a heartbeat written just now is a live run's"
        time.sleep(4)
        out = cleanup("--stale-after", "3")
        assert f"delete gpuconform-{run_id}: no heartbeat for" in out, out
        assert phase(f"gpuconform-{run_id}") in (None, "Terminating"), out
        forced = cleanup("--force", "--dry-run")
        for name in faults.FOREIGN_NAMESPACES:
            assert f"leave  {name}: not a gpuconform run's namespace: " in out, out
            assert f"leave  {name}: not a gpuconform run's namespace: " in forced, forced
            assert f"would delete {name}:" not in forced, forced
            assert phase(name) == "Active", f"{name} was deleted by make cleanup:\n{out}"
    finally:
        kubectl("delete", "namespace", f"gpuconform-{run_id}", "--ignore-not-found", "--wait=false", check=False)
        bed("fault-clear")
