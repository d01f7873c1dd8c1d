"""The API layer (gpuconform/kube.py, apierrors.py, watch.py) without a cluster: the retry rule, the default
request timeout and the deadline on every call, the create that an earlier attempt already made, how failures are
named, and the watch reporting its errors instead of leaving its readers to time out. The REST layer under the
client is a script, or a local HTTP server for the tests through the real client and urllib3."""

from __future__ import annotations

import json
import time

import pytest
import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from gpuconform import kube
from gpuconform import watch as gwatch


# ------------------------------------------------------------------ errors as the REST layer raises them

def refused() -> urllib3.exceptions.NewConnectionError:
    return urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection: [Errno 111] "
                                                       "Connection refused")


def read_timeout() -> urllib3.exceptions.ReadTimeoutError:
    return urllib3.exceptions.ReadTimeoutError(None, "/api/v1/pods", "Read timed out. (read timeout=30)")


def http(status: int, message: str = "", retry_after: str | None = None) -> ApiException:
    e = ApiException(status=status, reason={401: "Unauthorized", 403: "Forbidden"}.get(status, "Error"))
    e.body = json.dumps({"kind": "Status", "message": message}) if message else ""
    e.headers = {"Retry-After": retry_after} if retry_after else {}
    return e


RBAC_403 = ('pods is forbidden: User "system:serviceaccount:gpuconform-system:gpuconform" cannot list resource '
            '"pods" in API group "" at the cluster scope')
PSA_403 = ('pods "probe" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false '
           '(container "probe" must set securityContext.allowPrivilegeEscalation=false)')


# ------------------------------------------------------------------ the retry rule

@pytest.mark.parametrize("method,path,exc,named,retry", [
    ("GET", "/api/v1/nodes", http(503), False, True),  # idempotent: a 5xx is retried
    ("GET", "/api/v1/nodes", read_timeout(), False, True),
    ("DELETE", "/api/v1/namespaces/x", read_timeout(), False, True),
    ("PUT", "/api/v1/namespaces/x", http(500), False, True),
    ("POST", "/api/v1/namespaces/x/pods", http(429), False, True),  # APF rejected it before acting: any method
    ("POST", "/api/v1/namespaces/x/pods", http(503, retry_after="1"), False, True),  # server says "not acted on"
    ("POST", "/api/v1/namespaces/x/pods", refused(), False, True),  # never sent
    ("POST", "/api/v1/namespaces/x/pods", read_timeout(), False, False),  # may have been created: not blindly
    ("POST", "/api/v1/namespaces/x/pods", http(500), False, False),
    ("POST", "/api/v1/namespaces/x/pods", read_timeout(), True, True),  # a named create: 409 resolves it
    ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", read_timeout(), False, True),  # stores nothing
    ("PATCH", "/api/v1/namespaces/x", read_timeout(), False, False),  # not idempotent in general
    ("GET", "/api/v1/nodes", http(401), False, False),  # permanent: surfaced at once
    ("GET", "/api/v1/nodes", http(403, RBAC_403), False, False),
    ("GET", "/api/v1/nodes/n", http(404), False, False),
    ("POST", "/api/v1/namespaces/x/pods", http(409), True, False),
    ("POST", "/api/v1/namespaces/x/pods", http(422), True, False),
    ("GET", "/api/v1/nodes", ApiException(status=0, reason="SSLError\ncertificate verify failed"), False, False),
    ("GET", "/api/v1/nodes", ValueError("bug"), False, False),
])
def test_retry_rule(method, path, exc, named, retry):
    assert kube.should_retry(method, path, exc, named_create=named) is retry


def test_created_name_only_for_posts_of_named_objects():
    assert kube.created_name("POST", "/api/v1/namespaces/x/pods", {"metadata": {"name": "p"}}) == "p"
    assert kube.created_name("POST", "/api/v1/namespaces/x/pods", {"metadata": {"generateName": "p-"}}) is None
    assert kube.created_name("PUT", "/api/v1/namespaces/x/pods/p", {"metadata": {"name": "p"}}) is None
    assert kube.created_name("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                             {"metadata": {"name": "r"}}) is None


def test_retry_after_is_honoured_and_capped():
    assert kube.retry_after(http(429, retry_after="3")) == 3
    assert kube.retry_after(http(429, retry_after="3600")) == kube.timing.API_RETRY_AFTER_MAX_S
    assert kube.retry_after(http(429)) is None


# ------------------------------------------------------------------ the client over a scripted REST layer

class Resp:
    """What the REST layer returns (kubernetes.client.rest.RESTResponse's surface)."""

    def __init__(self, status: int, body: dict | None = None, headers: dict | None = None):
        self.status, self.reason = status, {200: "OK", 201: "Created", 409: "Conflict"}.get(status, "Error")
        self.data = json.dumps(body or {}).encode()
        self.headers = headers or {}
        self.response = self

    def read(self) -> bytes:
        return self.data

    def getheaders(self) -> dict:
        return self.headers

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


class Script:
    """Stands in for ApiClient.call_api (the HTTP send): answers from a list, records every request."""

    def __init__(self, *answers, delay: float = 0.0):
        self.answers, self.delay = list(answers), delay
        self.sent: list[tuple[str, str, object]] = []  # (method, path, timeout)

    def __call__(self, method, url, header_params=None, body=None, post_params=None, _request_timeout=None):
        self.sent.append((method, url.split("://", 1)[-1].split("/", 1)[-1], _request_timeout))
        if self.delay:
            time.sleep(self.delay)
        a = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(a, BaseException):
            raise a
        return a


@pytest.fixture
def fast(monkeypatch):
    monkeypatch.setattr(kube.timing, "API_BACKOFF_BASE_S", 0.01)
    monkeypatch.setattr(kube.timing, "API_BACKOFF_MAX_S", 0.02)


def client(monkeypatch, script: Script, timeout: float = 2.0) -> tuple[kube.CountingApiClient, k8s.CoreV1Api]:
    monkeypatch.setattr(k8s.ApiClient, "call_api", script)
    cfg = k8s.Configuration()
    cfg.host = "https://api.test:6443"
    api = kube.CountingApiClient(cfg, kube.RateLimiter(1000, 1000), request_timeout=timeout)
    return api, k8s.CoreV1Api(api)


NODES = {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"}, "items": []}


def test_every_call_gets_a_request_timeout_unless_it_sets_its_own(monkeypatch):
    script = Script(Resp(200, NODES))
    api, core = client(monkeypatch, script, timeout=2.0)
    core.list_node()
    core.list_node(_request_timeout=5)
    assert [t for _, _, t in script.sent] == [2.0, 5]


def test_transient_status_is_retried_and_counted(monkeypatch, fast):
    script = Script(Resp(503), Resp(200, NODES))
    api, core = client(monkeypatch, script)
    assert core.list_node().metadata.resource_version == "7"
    assert api.requests == 2


def test_rejected_credentials_are_raised_at_once_and_named(monkeypatch, fast):
    script = Script(Resp(401, {"kind": "Status", "message": "Unauthorized"}))
    api, core = client(monkeypatch, script)
    with pytest.raises(ApiException) as e:
        core.list_node()
    assert e.value.status == 401 and api.requests == 1
    problem = kube.api_error(e.value, "listing nodes")
    assert problem.code == "ERROR-AUTH" and "token expired" in problem.message


def test_one_call_ends_within_its_deadline_not_attempts_times_timeout(monkeypatch, fast):
    """Each attempt hangs until its read timeout: the call stops at API_CALL_DEADLINE_FACTOR x the timeout, and
    the attempts after the first get only the time left (before, 5 attempts x the timeout)."""
    monkeypatch.setattr(kube.timing, "API_MIN_ATTEMPT_S", 0.01)
    script = Script(read_timeout(), delay=0.15)
    api, core = client(monkeypatch, script, timeout=0.2)
    t0 = time.monotonic()
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core.list_node()
    took = time.monotonic() - t0
    assert took < 0.2 * kube.timing.API_CALL_DEADLINE_FACTOR + 0.15 + 0.05, took
    assert 2 <= len(script.sent) < kube.timing.API_RETRY_ATTEMPTS
    timeouts = [t for _, _, t in script.sent]
    assert timeouts[0] == 0.2 and all(t <= 0.2 for t in timeouts) and timeouts[-1] < 0.2


def test_a_deadline_block_bounds_every_call_inside_it(monkeypatch, fast):
    script = Script(Resp(200, NODES))
    api, core = client(monkeypatch, script, timeout=30)
    with api.deadline(5):
        core.list_node()
        with api.deadline(0.2):  # nested: the earlier end wins, and an attempt still gets API_MIN_ATTEMPT_S
            core.list_node()
    core.list_node()
    assert [round(t) for _, _, t in script.sent] == [5, kube.timing.API_MIN_ATTEMPT_S, 30]


def test_a_create_is_not_repeated_blindly(monkeypatch, fast):
    script = Script(read_timeout(), Resp(201, {}))
    api, core = client(monkeypatch, script)
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core.create_namespaced_pod("ns", {**POD, "metadata": {"generateName": "p-"}})
    assert len(script.sent) == 1


POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "p1", "namespace": "ns", "labels": {"gpuconform.dev/run": "r-123"}},
       "spec": {"containers": [{"name": "c", "image": "i"}]}}


def test_a_named_create_whose_first_attempt_went_through_is_taken_as_created(monkeypatch, fast):
    """The first attempt timed out after the server stored the pod; the repeat gets 409 AlreadyExists; the object
    carries our run's labels, so it is ours: success, not an error."""
    script = Script(read_timeout(), Resp(409, {"kind": "Status", "reason": "AlreadyExists"}), Resp(200, POD))
    api, core = client(monkeypatch, script)
    pod = core.create_namespaced_pod("ns", POD)
    assert pod.metadata.name == "p1"
    assert [(m, p) for m, p, _ in script.sent] == [("POST", "api/v1/namespaces/ns/pods"),
                                                    ("POST", "api/v1/namespaces/ns/pods"),
                                                    ("GET", "api/v1/namespaces/ns/pods/p1")]


def test_a_409_for_someone_elses_object_stands(monkeypatch, fast):
    theirs = {**POD, "metadata": {**POD["metadata"], "labels": {"gpuconform.dev/run": "another-run"}}}
    script = Script(read_timeout(), Resp(409, {"kind": "Status", "reason": "AlreadyExists"}), Resp(200, theirs))
    api, core = client(monkeypatch, script)
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod("ns", POD)
    assert e.value.status == 409


def test_a_409_without_an_earlier_ambiguous_attempt_stands(monkeypatch, fast):
    script = Script(Resp(409, {"kind": "Status", "reason": "AlreadyExists"}), Resp(200, POD))
    api, core = client(monkeypatch, script)
    with pytest.raises(ApiException):
        core.create_namespaced_pod("ns", POD)
    assert len(script.sent) == 1


# ------------------------------------------------------------------ naming failures

@pytest.mark.parametrize("exc,code,words", [
    (http(401, "Unauthorized"), "ERROR-AUTH", "rejected the credentials (401"),
    (http(403, RBAC_403), "ERROR-RBAC", "cannot list resource"),
    (http(403, PSA_403), "ERROR-API", "refused by admission (403): pods \"probe\" is forbidden: violates PodSecurity"),
    (http(500, "etcdserver: request timed out"), "ERROR-API", "HTTP 500"),
    (refused(), "ERROR-API", "API server not reachable: connection refused"),
    (urllib3.exceptions.ConnectTimeoutError(None, "connect timed out"), "ERROR-API", "connecting timed out"),
    (read_timeout(), "ERROR-API", "did not answer in time"),
    (urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset")), "ERROR-API",
     "connection to the API server dropped"),
    (ApiException(status=0, reason="SSLError\n[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"), "ERROR-API",
     "TLS handshake"),
])
def test_failures_are_named_with_their_own_code(exc, code, words):
    problem = kube.api_error(exc, "listing nodes")
    assert problem.code == code and words in problem.message and problem.message.startswith("listing nodes: ")


def test_unauthorized_and_unreachable_are_told_apart():
    auth, down = kube.api_error(http(401), "x"), kube.api_error(refused(), "x")
    assert (auth.code, down.code) == ("ERROR-AUTH", "ERROR-API")
    assert "credentials" in auth.message and "credentials" not in down.message and "not reachable" in down.message


# ------------------------------------------------------------------ the watch reports its errors

def v1pod(name: str, rv: str) -> k8s.V1Pod:
    return k8s.V1Pod(metadata=k8s.V1ObjectMeta(name=name, namespace="ns", resource_version=rv),
                     status=k8s.V1PodStatus(phase="Pending"))


class FakeWatch:
    """Stands in for kubernetes.watch.Watch: each stream() plays the next scripted window (events, then an
    optional error)."""

    windows: list = []

    def __init__(self, return_type=None):
        self.return_type = return_type

    def stream(self, fn, *args, **kwargs):
        window = FakeWatch.windows.pop(0) if FakeWatch.windows else ([], None)
        events, error = window
        yield from events
        if error is not None:
            raise error
        time.sleep(0.01)

    def stop(self):
        pass


def fake_cluster() -> kube.Cluster:
    return kube.Cluster(k8s.ApiClient(), None, None, "test", 1.0)  # type: ignore[arg-type]


def started(monkeypatch, windows, give_up_s: float = 60.0) -> kube.Watch:
    monkeypatch.setattr(kube.timing, "WATCH_RETRY_S", 0.01)
    monkeypatch.setattr(gwatch.kwatch, "Watch", FakeWatch)
    FakeWatch.windows = list(windows)
    w = kube.Watch(fake_cluster(), lambda *a, **k: None, ("ns",), what="pods-ns", give_up_s=give_up_s)
    return w.start([], "1")


def wait_until(cond, timeout: float = 2.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.005)


def test_a_rejected_credential_stops_the_watch_and_its_readers_raise_it(monkeypatch):
    w = started(monkeypatch, [([], http(401, "Unauthorized"))])
    t0 = time.monotonic()
    w.changed(w.version, timeout=5)  # returns when the watch stops, not after the timeout
    assert time.monotonic() - t0 < 2 and w.failed is not None and not w.healthy
    with pytest.raises(kube.EnvironmentProblem) as e:
        w.raise_if_failed("watching the run's pods in ns")
    assert e.value.code == "ERROR-AUTH" and e.value.message.startswith("watching the run's pods in ns: ")


def test_a_watch_failing_without_a_success_gives_up_and_says_why(monkeypatch):
    w = started(monkeypatch, [([], refused())] * 1000, give_up_s=0.05)
    wait_until(lambda: w.failed is not None)
    with pytest.raises(kube.EnvironmentProblem) as e:
        w.raise_if_failed()
    assert e.value.code == "ERROR-API" and "not reachable" in e.value.message
    assert "stopped" in w.trouble()


def test_a_transient_error_is_visible_until_the_watch_recovers(monkeypatch):
    gate = {"open": False}

    class Gated(FakeWatch):
        def stream(self, fn, *args, **kwargs):
            if not gate["open"]:
                time.sleep(0.01)
                raise refused()
            yield {"type": "ADDED", "object": v1pod("a", "5")}
            time.sleep(0.01)

    monkeypatch.setattr(kube.timing, "WATCH_RETRY_S", 0.01)
    monkeypatch.setattr(gwatch.kwatch, "Watch", Gated)
    w = kube.Watch(fake_cluster(), lambda *a, **k: None, ("ns",), what="pods-ns").start([], "1")
    wait_until(lambda: w.broken_since is not None)
    assert not w.healthy and "has been failing" in w.trouble() and w.failed is None
    gate["open"] = True
    wait_until(lambda: w.get("a") is not None and w.healthy)
    assert w.trouble() == ""
    w.stop()


def test_a_pod_deleted_during_a_wait_is_reported_gone(monkeypatch):
    """The watch's DELETED event is what gpuconform/waits.py's "deleted" decision reads (snapshot's `gone`)."""
    w = started(monkeypatch, [([{"type": "ADDED", "object": v1pod("a", "2")},
                                {"type": "DELETED", "object": v1pod("a", "3")}], None)])
    wait_until(lambda: "a" in w.seen and w.get("a") is None)
    states, gone = w.snapshot(["a", "b"])
    assert states == {"a": None, "b": None} and gone == {"a"}
    w.stop()


def test_a_bookmark_moves_the_watch_on_without_breaking_it(monkeypatch):
    """The client leaves BOOKMARK events undecoded (a dict: kubernetes watch/watch.py unmarshal_event); the apiserver
    sends them about once a minute with allowWatchBookmarks, so a wait longer than that must live through one."""
    bookmark = {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "7"}}}
    w = started(monkeypatch, [([bookmark, {"type": "ADDED", "object": v1pod("a", "8")}], None)])
    wait_until(lambda: w.get("a") is not None)
    assert w.healthy and w.failed is None
    w.stop()


# ------------------------------------------------------------------ through the real client and urllib3

class Server:
    """A local HTTP API server stand-in: `routes` maps a path to a list of (status, body, delay) answered in turn
    (the last one repeats)."""

    def __init__(self, routes: dict[str, list[tuple[int, dict, float]]]):
        import http.server
        import threading

        self.routes, self.hits = routes, []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's naming
                path = self.path.split("?", 1)[0]
                outer.hits.append(path)
                answers = outer.routes.get(path, [(404, {"kind": "Status", "message": "not found"}, 0)])
                status, body, delay = answers.pop(0) if len(answers) > 1 else answers[0]
                time.sleep(delay)
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_DELETE(self):  # noqa: N802 - answered from routes["DELETE <path>"], else 200
                path = self.path.split("?", 1)[0]
                outer.hits.append(f"DELETE {path}")
                status, body, _ = (outer.routes.get(f"DELETE {path}") or [(200, {"kind": "Status"}, 0)])[0]
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def kubeconfig(self, tmp_path) -> str:
        path = tmp_path / "kubeconfig"
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "t",
            "clusters": [{"name": "t", "cluster": {"server": self.url}}],
            "users": [{"name": "t", "user": {"token": "expired-token"}}],
            "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}]}))
        return str(path)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    servers = []

    def make(routes):
        servers.append(Server(routes))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def test_preflight_names_an_expired_token_as_such(server, tmp_path):
    from gpuconform.pytest_plugin import preflight
    from gpuconform.config import load

    srv = server({"/version/": [(401, {"kind": "Status", "message": "Unauthorized", "code": 401}, 0)]})
    with pytest.raises(kube.EnvironmentProblem) as e:
        preflight.connect(load(None, environ={}), srv.kubeconfig(tmp_path), None)
    assert e.value.code == "ERROR-AUTH" and "reading the API server version" in e.value.message
    assert "token expired or the kubeconfig user is wrong" in e.value.message and srv.hits == ["/version/"]


def test_preflight_names_an_unreachable_server_as_such(tmp_path, server, monkeypatch):
    from gpuconform.pytest_plugin import preflight
    from gpuconform.config import load

    monkeypatch.setattr(kube.timing, "API_BACKOFF_BASE_S", 0.01)
    srv = server({})
    kubeconfig = srv.kubeconfig(tmp_path)
    srv.close()  # nothing listens there any more
    with pytest.raises(kube.EnvironmentProblem) as e:
        preflight.connect(load(None, environ={}), kubeconfig, None)
    assert e.value.code == "ERROR-API" and "not reachable: connection refused" in e.value.message


def test_real_client_retries_a_503_and_bounds_a_hanging_server(server, monkeypatch):
    monkeypatch.setattr(kube.timing, "API_BACKOFF_BASE_S", 0.01)
    monkeypatch.setattr(kube.timing, "API_MIN_ATTEMPT_S", 0.05)
    srv = server({"/api/v1/nodes": [(503, {"kind": "Status", "message": "busy"}, 0), (200, NODES, 0)],
                  "/api/v1/nodes/slow": [(200, {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "slow"}},
                                          1.0)]})
    cfg = k8s.Configuration()
    cfg.host, cfg.retries = srv.url, False
    api = kube.CountingApiClient(cfg, kube.RateLimiter(1000, 1000), request_timeout=0.3)
    core = k8s.CoreV1Api(api)
    assert core.list_node().metadata.resource_version == "7" and srv.hits == ["/api/v1/nodes"] * 2
    t0 = time.monotonic()
    with pytest.raises(Exception) as e:
        core.read_node("slow")
    took = time.monotonic() - t0
    assert took < 0.3 * kube.timing.API_CALL_DEADLINE_FACTOR + 0.3, took
    assert kube.api_error(e.value, "reading node slow").code == "ERROR-API"
    assert "did not answer in time" in kube.api_error(e.value, "reading node slow").message


def test_discovery_reads_list_pages_raw_through_the_real_client_and_its_errors_still_raise(server):
    """Inventory._list_all asks for raw pages (`_preload_content=False`): 2xx bodies are decoded by the suite, a
    410 on a continue token is still an ApiException (the LIST starts again), a 403 too (named as before), and
    every connection goes back to the pool."""
    from types import SimpleNamespace

    from gpuconform import pods
    from gpuconform.pytest_plugin import inventory

    def pod(name):
        return {"metadata": {"name": name, "namespace": "t", "creationTimestamp": "2026-12-07T06:00:00Z",
                             "managedFields": [{"manager": "kubectl-create"}]},
                "spec": {"nodeName": "gpu-0", "containers": [{"name": "c", "env": [{"name": "A", "value": "b"}]}]},
                "status": {"phase": "Pending"}}
    first = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "7", "continue": "c1"},
             "items": [pod("p1")]}
    srv = server({"/api/v1/pods": [(200, first, 0), (410, {"kind": "Status", "code": 410, "reason": "Expired",
                                                          "message": "The provided continue parameter is too old"}, 0),
                                   (200, {**first, "metadata": {"resourceVersion": "9", "continue": "c2"}}, 0),
                                   (200, {"kind": "PodList", "metadata": {"resourceVersion": "9"},
                                          "items": [pod("p2")]}, 0)],
                  "/api/v1/nodes": [(403, {"kind": "Status", "code": 403, "reason": "Forbidden",
                                           "message": 'nodes is forbidden: cannot list resource "nodes"'}, 0)]})
    cfg = k8s.Configuration()
    cfg.host, cfg.retries = srv.url, False
    api = kube.CountingApiClient(cfg, kube.RateLimiter(1000, 1000), request_timeout=2.0)
    core = k8s.CoreV1Api(api)
    inv = inventory.Inventory.__new__(inventory.Inventory)
    inv.cluster = SimpleNamespace(api=api, request_timeout=2.0)
    out, rv = inv._list_all(core.list_pod_for_all_namespaces, trim=pods.slim)
    assert srv.hits == ["/api/v1/pods"] * 4 and rv == "9"
    assert out == [{"metadata": {"name": n, "namespace": "t"}, "spec": {"nodeName": "gpu-0", "containers": [
        {"name": "c"}]}, "status": {"phase": "Pending"}} for n in ("p1", "p2")]
    with pytest.raises(ApiException) as e:
        inv._list_all(core.list_node)
    assert e.value.status == 403 and kube.api_error(e.value, "listing nodes").code == "ERROR-RBAC"
    pool = api.rest_client.pool_manager.connection_from_url(srv.url)
    assert pool.num_connections >= 1 and pool.pool.qsize() == pool.pool.maxsize  # none left checked out


# ------------------------------------------------------------------ one way to name a failed call (apierrors.calling)

def test_calling_names_every_failure_of_the_call_inside_and_passes_a_verdict_through():
    from gpuconform.apierrors import calling

    with pytest.raises(kube.EnvironmentProblem) as e:
        with calling("listing nodes"):
            raise ApiException(status=403, reason="Forbidden")
    assert e.value.code == "ERROR-RBAC" and e.value.message.startswith("listing nodes: forbidden (403)")
    assert e.value.__cause__ is None and e.value.__suppress_context__
    with pytest.raises(kube.EnvironmentProblem) as e:
        with calling("reading node n1"):
            raise urllib3.exceptions.MaxRetryError(None, "/api", reason=ConnectionRefusedError("refused"))
    assert e.value.code == "ERROR-API" and e.value.message.startswith("reading node n1: ")
    verdict = kube.EnvironmentProblem("ERROR-TIMEOUT", "already named")
    with pytest.raises(kube.EnvironmentProblem) as e:
        with calling("x"):
            raise verdict
    assert e.value is verdict
    with calling("nothing fails"):
        pass
