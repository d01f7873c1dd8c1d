"""Pre-flight: the reads of the run's own namespaces (its pods' logs and events) are held already, or the identity
may bind gpuconform-run to itself there (review P7: no cluster-wide pods/log or events for the shipped identity)."""

from __future__ import annotations

import pytest

from gpuconform.pytest_plugin import preflight
from gpuconform.pytest_plugin.namespaces import run_binding
from gpuconform.reasons import EnvironmentProblem


class Cluster:
    source = "test"
    run_binding = None


def allow(monkeypatch, granted: set[tuple[str, str]]):
    """`can` answers from `granted` ((verb, resource[/sub])); every REQUIRED one is granted."""
    required = {(v, f"{r}/{s}" if s else r) for v, _, r, s, _ in preflight.REQUIRED}

    def can(cluster, verb, group, res, sub, namespace, name=""):
        key = (verb, f"{res}/{sub}" if sub else res)
        return key in required or key in granted

    monkeypatch.setattr(preflight, "can", can)
    monkeypatch.setattr(preflight, "self_subject", lambda cluster: {"kind": "ServiceAccount", "name": "gc",
                                                                    "namespace": "gpuconform-system"})


def test_an_identity_holding_the_reads_binds_nothing(monkeypatch):
    allow(monkeypatch, {("get", "pods/log"), ("list", "events")})
    c = Cluster()
    preflight.check_permissions(c)
    assert c.run_binding is None


def test_the_shipped_identity_binds_its_reads_to_itself_in_its_namespaces(monkeypatch):
    allow(monkeypatch, {("create", "rolebindings"), ("bind", "clusterroles")})
    c = Cluster()
    preflight.check_permissions(c)
    assert c.run_binding == {"kind": "ServiceAccount", "name": "gc", "namespace": "gpuconform-system"}
    b = run_binding("gpuconform-r1", "r1", c.run_binding)
    assert b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpuconform-run"}
    assert b["metadata"]["namespace"] == "gpuconform-r1" and b["metadata"]["labels"]["gpuconform.dev/run"] == "r1"


def test_neither_the_reads_nor_the_binding_is_one_missing_permission(monkeypatch):
    allow(monkeypatch, {("create", "rolebindings")})
    with pytest.raises(EnvironmentProblem) as e:
        preflight.check_permissions(Cluster())
    assert e.value.code == "ERROR-RBAC" and "bind clusterrole gpuconform-run" in e.value.message


def test_a_log_the_identity_may_not_read_is_none_other_errors_raise():
    from gpuconform.pytest_plugin.namespaces import Namespaces

    class Logs:
        def __init__(self, code):
            self.code = code

        def pod_log(self, *a, **kw):
            raise EnvironmentProblem(self.code, "pods/log forbidden" if self.code == "ERROR-RBAC" else "down")

    assert Namespaces(Logs("ERROR-RBAC"), "r1").readable_log("nvidia-device-plugin", "p") is None
    with pytest.raises(EnvironmentProblem):
        Namespaces(Logs("ERROR-API"), "r1").readable_log("nvidia-device-plugin", "p")
