"""Plain kubectl access to the local test bed for the end-to-end tests (independent of the suite's code)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STATE = ROOT / ".localcluster"
sys.path.insert(0, str(ROOT / "localcluster"))
import shapes  # noqa: E402,F401 - re-exported: the bed's own tables of profiles and layouts (names as upstream ships them)
KUBECONFIG = STATE / "kubeconfig"
MATRIX_OUT = ROOT / "reports" / "fault-matrix.txt"  # written by test_fault_matrix.py, shown by conftest.py
SHAPES_OUT = ROOT / "reports" / "shape-runs.txt"  # written by test_shapes.py, shown by conftest.py
# Resolved at import: pytester later points HOME at a temporary directory. The running bed's release first.
_RELEASE = (json.loads((STATE / "state.json").read_text()).get("k8s_version", "")
            if (STATE / "state.json").exists() else "")
_BUILT = sorted(Path.home().glob(".cache/gpuconform/k8s/*/kubectl"),
                key=lambda p: (p.parent.name.startswith(f"{_RELEASE}-") if _RELEASE else False, p.stat().st_mtime))
KUBECTL = str(_BUILT[-1]) if _BUILT else "kubectl"


def kubectl(*args: str, input: str | None = None, check: bool = True, timeout: float = 120) -> str:
    out = subprocess.run([KUBECTL, *args], capture_output=True, text=True, input=input, timeout=timeout,
                         env={**os.environ, "KUBECONFIG": str(KUBECONFIG)})
    if check:
        assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr.strip()}"
    return out.stdout


def run_pytest(*args: str, kubeconfig: Path = KUBECONFIG, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m pytest -p no:cacheprovider ARGS` in the repository, against `kubeconfig`, output captured."""
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=ROOT,
                          env={**os.environ, "KUBECONFIG": str(kubeconfig)}, capture_output=True, text=True,
                          timeout=timeout)


def bed_shape() -> tuple[str, str]:
    """(profile, layout) the running bed is in."""
    st = json.loads((STATE / "state.json").read_text()) if (STATE / "state.json").exists() else {}
    return st.get("profile") or "plain", st.get("layout") or "helm"


def bed(*args: str, timeout: float = 600) -> str:
    """`cluster.py ARGS` (fault NAME, fault-clear, bed PROFILE LAYOUT); fails the test with its output."""
    out = subprocess.run([sys.executable, str(ROOT / "localcluster" / "cluster.py"), *args], capture_output=True,
                         text=True, timeout=timeout)
    assert out.returncode == 0, f"cluster.py {' '.join(args)} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
    return out.stdout


def get(*args: str) -> dict:
    return json.loads(kubectl("get", "-o", "json", *args))


def shipped_cluster_roles() -> list[dict]:
    """The ClusterRoles in manifests/*.yaml: the least privilege the suite ships with."""
    import yaml

    roles = [doc for f in sorted((ROOT / "manifests").glob("*.yaml")) for doc in yaml.safe_load_all(f.read_text())
             if doc and doc.get("kind") == "ClusterRole"]
    assert roles, "no ClusterRole found in manifests/*.yaml"
    return roles


# Shipped ClusterRoles that rbac.yaml does not bind cluster-wide: gpuconform-run, which the suite binds to itself in
# each run namespace (the copy of the main role may bind it by this name only), and the optional plugin-log read,
# bound per plugin namespace (manifests/rbac-plugin-logs.yaml).
RUN_ROLE, PLUGIN_LOGS_ROLE = "gpuconform-run", "gpuconform-plugin-logs"


def identity_objects(ns: str, sa: str) -> list[dict]:
    """A namespace and ServiceAccount with copies of the shipped ClusterRoles (renamed after the account, so
    tests never touch an installed copy) bound to it, as rbac.yaml binds them: gpuconform-run as shipped and not
    bound (the suite binds it in its run namespaces), the plugin-log read left out. Apply; delete the same list
    afterwards."""
    objs: list[dict] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": ns}}]
    for role in shipped_cluster_roles():
        if role["metadata"]["name"] == RUN_ROLE:
            objs.append(role)
            continue
        if role["metadata"]["name"] == PLUGIN_LOGS_ROLE:
            continue
        name = f"{sa}-{role['metadata']['name']}"
        objs.append({**role, "metadata": {"name": name}})
        objs.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                     "metadata": {"name": name},
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                     "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]})
    return objs


def as_list(objs: list[dict]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})


def token_kubeconfig(path: Path, ns: str, sa: str) -> str:
    """Writes a kubeconfig that authenticates as the ServiceAccount with a fresh token; returns the token."""
    import yaml

    admin = yaml.safe_load(KUBECONFIG.read_text())
    token = kubectl("create", "token", sa, "-n", ns, "--duration=1h").strip()
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": sa,
        "clusters": [{"name": "bed", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": sa, "user": {"token": token}}],
        "contexts": [{"name": sa, "context": {"cluster": "bed", "user": sa}}]}))
    path.chmod(0o600)
    return token


def run_suite(tmp: Path, *extra: str) -> tuple[int, dict]:
    """The suite on the bed with its config (burst.samples=1), `extra` pytest arguments: (exit code, summary),
    the summary checked against the published schema (healthy or broken, it matches)."""
    import jsonschema

    summary = tmp / "summary.json"
    out = run_pytest("tests", "-q", "--gpuconform-config", "localcluster/gpuconform.yaml", "--gpuconform-summary",
                     str(summary), "--gpuconform-set", "burst.samples=1", *extra, timeout=900)
    assert summary.exists(), f"no summary written (exit {out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-2000:]}"
    data = json.loads(summary.read_text())
    jsonschema.validate(data, json.loads((ROOT / "docs" / "summary.schema.json").read_text()))
    return out.returncode, data


def suite_image_by_digest() -> str:
    """The bed's suite image as `<repo>@sha256:<digest>` (the bed tags it so on import: localcluster/gpunode.py
    tag_by_digest): what images.nodeProbe and the admission policy's rootImages name where the policy is in force."""
    import gpunode

    return gpunode.image_by_digest()
