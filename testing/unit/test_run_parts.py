"""The run's parts that decide something without a cluster: the namespaces' heartbeat and end, which event-read
errors are tolerated (gpuconform/pytest_plugin/namespaces.py), the fingerprint (gpuconform/fingerprint.py), and waiting for a node
object to catch up with the kubelet (gpuconform/pytest_plugin/checks.py)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from gpuconform.pytest_plugin import nodecheck
from gpuconform.pytest_plugin.namespaces import Namespaces
from gpuconform import cleanup, discovery, fingerprint, kube, timing
from gpuconform.reasons import EnvironmentProblem


class Core:
    """The CoreV1Api calls Namespaces makes, recorded; `events_error` makes event reads fail."""

    def __init__(self, events_error: BaseException | None = None):
        self.calls: list[tuple] = []
        self.events_error = events_error

    def create_namespace(self, body):
        self.calls.append(("create", body["metadata"]["name"], dict(body["metadata"]["annotations"])))

    def patch_namespace(self, name, body, **kw):
        self.calls.append(("patch", name, dict(body["metadata"]["annotations"])))

    def delete_namespace(self, name, **kw):
        self.calls.append(("delete", name))

    def list_namespaced_event(self, namespace, **kw):
        if self.events_error is not None:
            raise self.events_error
        return SimpleNamespace(items=[])


def spaces(core: Core) -> Namespaces:
    api = kube.CountingApiClient(k8s.Configuration(), kube.RateLimiter(1000, 1000), 1.0)
    return Namespaces(kube.Cluster(api, core, None, "test", 1.0), "r1")  # type: ignore[arg-type]


def test_namespaces_carry_a_heartbeat_that_is_refreshed_and_stops_at_the_end(monkeypatch):
    monkeypatch.setattr(timing, "HEARTBEAT_EVERY_S", 0.01)
    core = Core()
    s = spaces(core)
    assert s.ensure() == "gpuconform-r1"
    assert cleanup.HEARTBEAT in core.calls[0][2]
    end = time.monotonic() + 2
    while not any(c[0] == "patch" for c in core.calls):
        assert time.monotonic() < end, "no heartbeat refresh"
        time.sleep(0.005)
    s.end(keep=False, timeout_s=5)
    assert ("delete", "gpuconform-r1") in core.calls
    n = len(core.calls)
    time.sleep(0.05)
    assert len(core.calls) == n, "the heartbeat went on after the end"


def test_a_kept_namespace_is_stamped_ended_not_deleted(monkeypatch):
    monkeypatch.setattr(timing, "HEARTBEAT_EVERY_S", 60)
    core = Core()
    s = spaces(core)
    s.ensure()
    s.ensure(privileged=True)
    s.end(keep=True, timeout_s=5)
    ended = [c for c in core.calls if c[0] == "patch" and cleanup.ENDED in c[2]]
    assert [c[1] for c in ended] == ["gpuconform-r1", "gpuconform-r1-node"]
    assert not [c for c in core.calls if c[0] == "delete"]


@pytest.mark.parametrize("status,raises", [(404, None), (503, None), (401, "ERROR-AUTH"), (403, "ERROR-RBAC")])
def test_events_are_best_effort_except_for_rejected_credentials_and_permissions(status, raises):
    err = ApiException(status=status, reason="x")
    err.body = '{"message": "events is forbidden: User \\"u\\" cannot list resource \\"events\\" in API group \\"\\""}'
    s = spaces(Core(events_error=err))
    if raises is None:
        assert s.events_for("ns", "p") == []
    else:
        with pytest.raises(EnvironmentProblem) as e:
            s.events_for("ns", "p")
        assert e.value.code == raises


def node(name: str, product: str, kubelet: str) -> dict:
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product}},
            "status": {"nodeInfo": {"kubeletVersion": kubelet, "containerRuntimeVersion": "containerd://1.7"}}}


def plugin_pod(image: str, args: list[str]) -> dict:
    return {"metadata": {"name": "p", "namespace": "gpu-operator"},
            "spec": {"containers": [{"name": "plugin", "args": args}], "volumes": []},
            "status": {"containerStatuses": [{"image": image, "imageID": f"{image}@sha256:abc"}]}}


def test_fingerprint_summarises_what_the_run_read():
    objs = {"a": node("a", "A100", "v1.30.1"), "b": node("b", "A100", "v1.31.0")}
    plugins = {"a": discovery.Found([plugin_pod("nvcr.io/k8s-device-plugin:v0.17", ["--fail-on-init-error"])],
                                    "nvidia-helm", "")}
    fp = fingerprint.fingerprint(run_id="r1", server_version="v1.31.0", host="https://api:6443", credentials="test",
                                 node_count=5, gpu_nodes=[("a", "A100 x8"), ("b", "A100 x8")], node_objs=objs,
                                 plugins=plugins, configz={"a": {"topologyManagerPolicy": "single-numa-node"}})
    assert fp["GPU nodes"] == 2 and fp["nodes"] == 5
    assert fp["kubelet versions"] == "v1.30.1, v1.31.0" and fp["GPU products (GFD)"] == "A100"
    assert fp["plugin layouts"] == "none (1 node), nvidia-helm (1 node)" and fp["GPU pools"] == "A100 x8 (2 nodes)"
    assert fp["plugin image digests"] == "sha256:abc" and fp["topology manager policy"] == "single-numa-node"
    assert fp["CPU manager policy"] == "none" and len(fp["plugin config hash"]) == 16
    other = fingerprint.plugin_config_hash([plugin_pod("x", ["--fail-on-init-error=false"])])
    assert other != fp["plugin config hash"]
    assert fingerprint.fingerprint(run_id="r", server_version="v", host="h", credentials="c", node_count=0,
                                   gpu_nodes=[], node_objs={}, plugins={},
                                   configz={})["topology manager policy"] == fingerprint.NOT_READ


# ------------------------------------------------------------------ the node status catching up (NodeCheck)

class TrailingRun:
    """A run whose node object reaches the kubelet's value after `lag` reads; configz gives the status period."""

    def __init__(self, lag: int, period: str | None):
        from gpuconform import config

        self.reads, self.lag, self.period = 0, lag, period
        self.cfg, self.run_id = config.load(None, environ={}), "r1"
        self.inventory = SimpleNamespace(refresh_node=self.refresh_node)
        self.kubelet = SimpleNamespace(config=self.kubelet_config, how_read=lambda node, path: "read")

    def refresh_node(self, name):
        self.reads += 1
        return {"allocatable": 4 if self.reads > self.lag else 0}

    def kubelet_config(self, name):
        return None if self.period is None else {"nodeStatusUpdateFrequency": self.period}


def caught_up(run, agrees):
    return nodecheck.make(run, "gpu-a", "t").node_status_caught_up(agrees)


def test_a_node_that_agrees_at_once_costs_no_wait():
    run = TrailingRun(lag=0, period="1s")
    assert caught_up(run, lambda n: n["allocatable"] == 4) == ({"allocatable": 4}, 0.0)


def test_a_node_object_trailing_the_kubelet_is_judged_once_it_has_caught_up(monkeypatch):
    monkeypatch.setattr(nodecheck.time, "sleep", lambda s: None)
    run = TrailingRun(lag=3, period="1s")
    obj, waited = caught_up(run, lambda n: n["allocatable"] == 4)
    assert obj == {"allocatable": 4} and run.reads == 4 and waited >= 0


def test_a_node_object_that_never_agrees_is_judged_after_one_status_period_and_slack(monkeypatch):
    clock = iter(range(0, 1000))
    monkeypatch.setattr(nodecheck.time, "sleep", lambda s: None)
    monkeypatch.setattr(nodecheck.time, "monotonic", lambda: float(next(clock)))
    run = TrailingRun(lag=10**6, period="2s")
    obj, waited = caught_up(run, lambda n: n["allocatable"] == 4)
    assert obj == {"allocatable": 0} and 7 <= waited <= 9  # 2 s period + 5 s slack


# ------------------------------------------------------------------ nothing new once the end has begun (issue 18)

def test_no_namespace_or_pod_is_created_once_the_end_has_begun():
    """Before: ensure() after end() created gpuconform-r1-node, which nobody deleted."""
    core = Core()
    s = spaces(core)
    s.ensure()
    s.end(keep=False, timeout_s=5)
    for make in (lambda: s.ensure(privileged=True), lambda: s.ensure(),
                 lambda: s.create_pod({"metadata": {"namespace": "gpuconform-r1", "name": "late"}})):
        with pytest.raises(EnvironmentProblem) as e:
            make()
        assert e.value.code == "ERROR-TIMEOUT" and "the run is ending" in e.value.message
    assert [c[:2] for c in core.calls if c[0] == "create"] == [("create", "gpuconform-r1")]


def test_a_namespace_created_while_the_end_begins_is_deleted_by_it():
    """A check thread creates the node-probe namespace while the main thread ends the run: the end waits for
    the create and deletes it, or the create is refused; never a namespace the end does not know."""
    import threading

    class SlowCore(Core):
        def __init__(self):
            super().__init__()
            self.creating = threading.Event()

        def create_namespace(self, body):
            if body["metadata"]["name"].endswith("-node"):
                self.creating.set()
                time.sleep(0.3)
            super().create_namespace(body)

    core = SlowCore()
    s = spaces(core)
    s.ensure()
    t = threading.Thread(target=s.ensure, kwargs={"privileged": True})
    t.start()
    assert core.creating.wait(2)
    s.end(keep=False, timeout_s=5)
    t.join(2)
    assert [c[1] for c in core.calls if c[0] == "delete"] == ["gpuconform-r1", "gpuconform-r1-node"]


def test_a_namespace_create_cut_short_by_an_interrupt_is_still_deleted_at_the_end():
    class Interrupted(Core):
        def create_namespace(self, body):
            super().create_namespace(body)
            raise KeyboardInterrupt  # SIGTERM's first signal, after the API made it

    core = Interrupted()
    s = spaces(core)
    with pytest.raises(KeyboardInterrupt):
        s.ensure()
    s.end(keep=False, timeout_s=5)
    assert ("delete", "gpuconform-r1") in core.calls
