"""NodeCheck without a cluster: its pods are its own (deleted when it ends, kept on failure when configured), a
failed check's evidence is collected before they go, a refused creation becomes its verdict, the typed timeouts
cover every timeouts.* key, and the run-long pods are told apart by their labels."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpuconform import config, nodes, pods
from gpuconform.pytest_plugin import nodecheck
from gpuconform.reasons import EnvironmentProblem, Violation


class Spaces:
    def __init__(self, refuse: str | None = None):
        self.created: list[str] = []
        self.deleted: list[str] = []
        self.refuse = refuse

    def ensure(self, privileged: bool = False) -> str:
        return "gpuconform-r1-node" if privileged else "gpuconform-r1"

    def create_pod(self, manifest: dict) -> str:
        if self.refuse:
            raise EnvironmentProblem("ERROR-API", self.refuse)
        self.created.append(manifest["metadata"]["name"])
        return manifest["metadata"]["name"]

    def delete_pod(self, namespace: str, name: str) -> None:
        self.deleted.append(name)

    def events_for(self, namespace: str, name: str) -> list[dict]:
        return []

    def pod_log(self, namespace, name, container=None, tail=None, previous=False) -> str:
        return "a log"

    watches: dict = {}


class Hung:
    def raise_if_hung(self, node: str) -> None:
        pass


def fake_run(refuse: str | None = None, **overrides: str) -> SimpleNamespace:
    cfg = config.load(None, overrides, environ={})
    node = nodes.GpuNode("gpu-a", True, True, 4, 4, ())
    inventory = SimpleNamespace(node=lambda name: node, refresh_node=lambda name: {"status": {}},
                                find_plugin=lambda name: SimpleNamespace(pods=[]))
    return SimpleNamespace(cfg=cfg, run_id="r1", spaces=Spaces(refuse), hung=Hung(), inventory=inventory)


def test_a_checks_pods_are_named_for_its_node_and_deleted_when_it_ends():
    run = fake_run()
    check = nodecheck.make(run, "gpu-a", "t")
    name = check.start(check.probe_pod("iso1", "isolation", 1))
    m = check.probe_pod("iso1", "isolation", 1)
    assert name == "iso1-gpu-a" and m["spec"]["nodeSelector"]["kubernetes.io/hostname"] == "gpu-a"
    assert m["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert m["spec"]["activeDeadlineSeconds"] >= check.timeouts.pod_complete
    check.close()
    check.close()  # once
    assert run.spaces.deleted == ["iso1-gpu-a"]


def test_a_failed_checks_evidence_is_collected_before_its_pods_go_and_kept_when_configured():
    run = fake_run(keepNamespaceOnFailure="true")
    check = nodecheck.make(run, "gpu-a", "t")
    check.start(check.probe_pod("bad", "x", 0))
    check.exc = Violation("FAIL-F04-OVERADVERTISED", "deliberate")
    check.close()
    assert check.evidence.collected is not None and "log bad-gpu-a" in check.evidence.collected
    assert run.spaces.deleted == []  # kept for inspection


def test_a_skipped_check_collects_no_evidence():
    run = fake_run()
    check = nodecheck.make(run, "gpu-a", "t")
    check.start(check.probe_pod("s", "x", 0))
    check.exc = pytest.skip.Exception("[SKIP-F07-BUSY] busy")
    check.close()
    assert check.evidence.collected is None and run.spaces.deleted == ["s-gpu-a"]


def test_a_creation_refused_for_a_missing_runtime_class_is_its_verdict():
    run = fake_run(refuse='pods "x" is forbidden: pod rejected: RuntimeClass "nvidia" not found')
    check = nodecheck.make(run, "gpu-a", "t")
    with pytest.raises(Violation) as e:
        check.start(check.probe_pod("x", "x", 1))
    assert e.value.code == "FAIL-F12-INJECTION-FAILED"


def test_one_wait_covers_pods_of_one_namespace():
    run = fake_run()
    check = nodecheck.make(run, "gpu-a", "t")
    a = check.start(check.probe_pod("a", "x", 0))
    b = check.start(pods.socket_probe_pod("b", "gpuconform-r1-node", "r1", "gpu-a", run.cfg, 60))
    with pytest.raises(ValueError, match="one namespace"):
        check.wait_done(a, b)


def test_the_typed_timeouts_cover_every_timeouts_key():
    keys = {f.key for f in config.FIELDS if f.key.startswith("timeouts.")}
    assert set(config.Timeouts.KEYS.values()) == keys
    t = config.load(None, {"timeouts.podStart": "7s"}, environ={}).timeouts
    assert t.pod_start == 7.0 and config.Timeouts.key("pod_start") == "timeouts.podStart"


def test_run_long_pods_are_told_apart_by_run_label_and_heartbeat():
    cfg = config.load(None, environ={})
    mine = pods.run_long_pod("access-gpu-a", "ns", "r1", "access", "gpu-a", cfg, "nvidia.com/gpu")
    other_run = pods.run_long_pod("access-gpu-a", "ns", "r2", "access", "gpu-a", cfg, "nvidia.com/gpu")
    probe = pods.probe_pod("p", "ns", "r1", "burst", "gpu-a", cfg, 1, resource="nvidia.com/gpu")
    assert pods.is_run_long(mine, "r1") and not pods.is_run_long(other_run, "r1")
    assert not pods.is_run_long(probe, "r1") and not pods.is_run_long({}, "r1")


@pytest.mark.parametrize("path,device_class,unit", [
    ("device-plugin", "", "mig"),  # the labels decide on the device-plugin path
    ("dra", "gpu.nvidia.com", "gpu"),  # a MIG strategy label on a DRA node describes no resource a claim asks for
    ("dra-extended-resource", "mig.nvidia.com", "mig"),  # GPUs in MIG mode: one device is one MIG device
])
def test_what_one_device_of_a_workload_check_is_depends_on_the_path(path, device_class, unit):
    from gpuconform import counts

    run = fake_run()
    labelled = counts.Expectation("nvidia.com/gpu", 2, 3, "labels", mig_strategy="single")
    driver = "gpu.nvidia.com" if device_class else ""
    run.inventory.node = lambda name: nodes.GpuNode("gpu-a", True, True, 2, 2, (), "gpu.nvidia.com", path=path,
                                                    dra_driver=driver, device_class=device_class)
    run.inventory.expectation = lambda name, obj=None: labelled
    exp = nodecheck.make(run, "gpu-a", "t").workload_expectation()
    assert (exp.unit, exp.per_device) == (unit, 3 if path == "device-plugin" else 1)


def test_the_runs_pods_on_a_node_are_those_in_its_namespaces_with_its_label():
    run = fake_run()
    run.spaces.names = ["gpuconform-r1", "gpuconform-r1-node"]

    def pod(name, ns, run_id="r1"):
        return {"metadata": {"name": name, "namespace": ns, "labels": {pods.RUN_LABEL: run_id}}}

    on_node = [pod("burst0", "gpuconform-r1"), pod("longrun", "gpuconform-r1"), pod("copycat", "team-a"),
               pod("older", "gpuconform-r1", run_id="r0")]
    run.inventory.pods_on_node = lambda name: on_node
    assert sorted(nodecheck.make(run, "gpu-a", "t").run_pods_on_node()) == ["burst0", "longrun"]
