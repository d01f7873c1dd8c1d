"""The kubelet read on its own port (gpuconform/kubeletroute.py, gpuconform/pytest_plugin/kubelet.py): which route a
read takes, and that the run's credentials reach a kubelet only over TLS verified against the configured CA, with
the address matched; against a real HTTPS server with certificates made by openssl here."""

from __future__ import annotations

import http.server
import shutil
import ssl
import subprocess
import threading
from pathlib import Path

import pytest
from kubernetes import client as k8s

from gpuconform import kube, kubeletroute
from gpuconform.pytest_plugin.kubelet import Kubelet

TOKEN = "Bearer kubelet-test-token-0123456789"
METRICS = 'kubelet_device_plugin_registration_total{resource_name="nvidia.com/gpu"} 1\n'


# ------------------------------------------------------------------ pure: routes, address, reasons

@pytest.mark.parametrize("access,granted,want", [
    ("auto", {"nodes/metrics": True, "nodes/proxy": True}, ["direct", "proxy"]),
    ("auto", {"nodes/metrics": True}, ["direct"]),
    ("auto", {"nodes/proxy": True}, ["proxy"]),
    ("direct", {"nodes/metrics": True, "nodes/proxy": True}, ["direct"]),
    ("proxy", {"nodes/metrics": True, "nodes/proxy": True}, ["proxy"]),
])
def test_routes_follow_the_access_setting_and_the_grants(access, granted, want):
    assert kubeletroute.routes(access, "metrics", granted) == (want, "")


@pytest.mark.parametrize("access,granted,why", [
    ("auto", {}, "neither nodes/configz nor nodes/proxy granted"),
    ("auto", {"nodes/metrics": True}, "neither nodes/configz nor nodes/proxy granted"),  # metrics is not configz
    ("direct", {"nodes/proxy": True}, "nodes/configz not granted (kubelet.access: direct)"),
    ("proxy", {"nodes/configz": True}, "nodes/proxy not granted (kubelet.access: proxy)"),
])
def test_no_route_says_which_grant_is_missing(access, granted, why):
    assert kubeletroute.routes(access, "configz", granted) == ([], why)


def node(*addresses: tuple[str, str], port: int | None = 10250) -> dict:
    st: dict = {"addresses": [{"type": t, "address": a} for t, a in addresses]}
    if port is not None:
        st["daemonEndpoints"] = {"kubeletEndpoint": {"Port": port}}
    return {"metadata": {"name": "gpu-a"}, "status": st}


def test_the_kubelet_is_reached_at_its_internal_address_and_reported_port():
    n = node(("Hostname", "gpu-a"), ("ExternalIP", "203.0.113.5"), ("InternalIP", "10.0.0.5"), port=10251)
    assert kubeletroute.base_url(n) == "https://10.0.0.5:10251"
    assert kubeletroute.base_url(node(("Hostname", "gpu-a"), port=None)) == "https://gpu-a:10250"
    assert kubeletroute.base_url(node(("InternalIP", "fd00::5"))) == "https://[fd00::5]:10250"
    assert kubeletroute.base_url(node()) is None and kubeletroute.base_url(None) is None


def test_failure_reasons_name_what_to_do():
    e401 = k8s.ApiException(status=401, reason="Unauthorized")
    assert "webhook token authentication" in kubeletroute.failure(e401, "https://n:10250", "metrics", "CA")
    e403 = k8s.ApiException(status=403, reason="Forbidden")
    e403.body = "Forbidden (user=x, verb=get, resource=nodes, subresource(s)=[configz proxy])"
    msg = kubeletroute.failure(e403, "https://n:10250", "configz", "CA")
    assert "refused nodes/configz (403: Forbidden (user=x" in msg and "KubeletFineGrainedAuthz" in msg
    tls = k8s.ApiException(status=0, reason="SSLError\n[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    msg = kubeletroute.failure(tls, "https://n:10250", "metrics", "the API server's CA")
    assert "did not verify against the API server's CA" in msg and "credentials were not sent" in msg
    assert "kubelet.caFile" in msg
    assert "could not be reached (ConnectionRefusedError" in kubeletroute.failure(
        ConnectionRefusedError("refused"), "https://n:10250", "metrics", "CA")


# ------------------------------------------------------------------ real TLS

def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    if not shutil.which("openssl"):
        pytest.fail("openssl is needed to make the test certificates (make deps installs it)")
    d = tmp_path_factory.mktemp("pki")
    for ca in ("ca", "other-ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={ca}",
                 "-keyout", f"{ca}.key", "-out", f"{ca}.crt", cwd=d)
    for name, san in (("kubelet", "IP:127.0.0.1"), ("elsewhere", "IP:127.0.0.2")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", cwd=d)
        (d / f"{name}.ext").write_text(f"subjectAltName={san}\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "1", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=d)
    return d


class FakeKubelet:
    """An HTTPS server standing in for a kubelet's port: answers /metrics, /configz (or `status`), and records
    every Authorization header it was sent."""

    def __init__(self, pki: Path, cert: str, status: int = 200):
        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the stdlib's name
                seen.append((self.path, self.headers.get("Authorization")))
                body = (METRICS if self.path == "/metrics" else '{"kubeletconfig": {}}').encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(pki / f"{cert}.crt", pki / f"{cert}.key")
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def cluster(api_ca: Path) -> kube.Cluster:
    cfg = k8s.Configuration()
    cfg.host, cfg.ssl_ca_cert = "https://127.0.0.1:1", str(api_ca)
    cfg.api_key = {"BearerToken": TOKEN}  # as the kubeconfig loader keys a token
    cfg.retries = False
    api = kube.CountingApiClient(cfg, kube.RateLimiter(100, 100), 5.0)
    c = kube.Cluster(api, None, None, "test", 5.0)  # type: ignore[arg-type]
    c.kubelet_get = lambda node, path: f"via proxy: {path}"  # type: ignore[method-assign]
    return c


def kubelet(pki: Path, port: int, granted: dict, ca_file: str = "", access: str = "auto") -> Kubelet:
    return Kubelet(cluster(pki / "ca.crt"), granted, access, ca_file,
                   node=lambda name: node(("InternalIP", "127.0.0.1"), port=port))


ALL = {"nodes/metrics": True, "nodes/configz": True, "nodes/proxy": True}


def test_a_verified_kubelet_is_read_on_its_port_with_the_runs_token(pki):
    k8let = FakeKubelet(pki, "kubelet")
    try:
        k = kubelet(pki, k8let.port, ALL)
        assert k.get("gpu-a", "metrics") == METRICS
        assert k8let.seen == [("/metrics", TOKEN)]
        assert k.how_read("gpu-a", "metrics") == (f"on the kubelet's port, https://127.0.0.1:{k8let.port} (serving "
                                                  f"certificate verified against the API server's CA)")
    finally:
        k8let.close()


@pytest.mark.parametrize("cert,ca_file,why", [
    ("kubelet", "other-ca.crt", "did not verify against kubelet.caFile"),  # signed by a CA the run does not trust
    ("elsewhere", "", "did not verify against the API server's CA"),  # the trusted CA, another address
])
def test_an_unverified_kubelet_never_gets_the_token_and_the_proxy_is_the_fallback(pki, cert, ca_file, why):
    k8let = FakeKubelet(pki, cert)
    try:
        k = kubelet(pki, k8let.port, ALL, str(pki / ca_file) if ca_file else "")
        assert k.get("gpu-a", "metrics") == "via proxy: metrics"
        assert k8let.seen == []  # no request: the handshake failed before any header was sent
        how = k.how_read("gpu-a", "metrics")
        assert how.startswith("through the API server's node proxy (nodes/proxy); not on the kubelet's port: ")
        assert why in how and "credentials were not sent" in how
        # not tried again on that node this run
        assert k.get("gpu-a", "metrics") == "via proxy: metrics" and k8let.seen == []
    finally:
        k8let.close()


def test_without_the_proxy_grant_an_unverified_kubelet_is_not_read_and_says_why(pki):
    k8let = FakeKubelet(pki, "kubelet")
    try:
        k = kubelet(pki, k8let.port, {"nodes/metrics": True}, str(pki / "other-ca.crt"))
        assert k.get("gpu-a", "metrics") is None and k8let.seen == []
        how = k.how_read("gpu-a", "metrics")
        assert how.startswith("not read: the kubelet's serving certificate at https://127.0.0.1:") and \
            how.endswith("; nodes/proxy not granted")
    finally:
        k8let.close()


def test_a_kubelet_that_refuses_configz_is_read_through_the_proxy(pki):
    k8let = FakeKubelet(pki, "kubelet", status=403)
    try:
        k = kubelet(pki, k8let.port, ALL)
        assert k.get("gpu-a", "configz") == "via proxy: configz"
        assert k8let.seen == [("/configz", TOKEN)]
        assert "refused nodes/configz (403" in k.how_read("gpu-a", "configz")
    finally:
        k8let.close()


def test_an_unreachable_kubelet_and_access_proxy(pki):
    k8let = FakeKubelet(pki, "kubelet")
    port = k8let.port
    k8let.close()  # nothing listens there now
    k = kubelet(pki, port, {"nodes/metrics": True})
    assert k.get("gpu-a", "metrics") is None
    assert "could not be reached" in k.how_read("gpu-a", "metrics")
    k = kubelet(pki, port, ALL, access="proxy")  # never tries the port
    assert k.get("gpu-a", "metrics") == "via proxy: metrics"
    assert k.how_read("gpu-a", "metrics") == "through the API server's node proxy (nodes/proxy)"


def test_an_unreachable_kubelet_is_tried_again_later_a_refusing_one_is_not(pki, monkeypatch):
    k8let = FakeKubelet(pki, "kubelet")
    port = k8let.port
    k8let.close()
    k = kubelet(pki, port, {"nodes/metrics": True})
    assert k.get("gpu-a", "metrics") is None
    clock = [0.0]
    monkeypatch.setattr("gpuconform.pytest_plugin.kubelet.time.monotonic", lambda: clock[0])
    k._retry_at[("gpu-a", "metrics")] = 10.0  # as if it failed at 10 - KUBELET_RETRY_S
    clock[0] = 9.0
    assert k.get("gpu-a", "metrics") is None and ("gpu-a", "metrics") in k.direct_failed  # not tried yet
    clock[0] = 10.0
    calls = []
    monkeypatch.setattr(k.cluster, "kubelet_direct", lambda client, url, connect_s: calls.append(url) or METRICS)
    assert k.get("gpu-a", "metrics") == METRICS and calls == [f"https://127.0.0.1:{port}/metrics"]
    tls = k8s.ApiException(status=0, reason="SSLError\n[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    assert kubeletroute.transient(ConnectionRefusedError("refused"))
    assert not kubeletroute.transient(tls) and not kubeletroute.transient(k8s.ApiException(status=403))
