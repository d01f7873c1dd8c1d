"""How the suite reads a kubelet's /metrics and /configz (pure: no I/O; the reads are gpuconform/pytest_plugin/
kubelet.py's).

Two routes, tried in this order under `kubelet.access: auto` (the default):

- **direct**: a GET to the kubelet's own port (the node's `status.daemonEndpoints.kubeletEndpoint.Port`, at the
  first of its addresses in ADDRESS_ORDER), authorized by the kubelet as `get nodes/metrics` or `get nodes/configz`
  (KubeletFineGrainedAuthz: beta and on in 1.33, GA in 1.36; pkg/kubelet/server/auth.go maps /metrics to
  `metrics` and /configz to `configz` then `proxy`). The run's credentials are sent only over TLS whose serving
  certificate verified against `kubelet.caFile` (default: the CA the API server is trusted with) and whose name or
  IP matched the address: a kubelet with a self-signed serving certificate (no `serverTLSBootstrap`) is not read
  this way, never read unverified.
- **proxy**: the API server's node proxy, `get nodes/proxy` (manifests/optional/rbac-nodes-proxy.yaml): one grant that is
  also exec into any pod on the node, which manifests/rbac-policy.yaml fences to /metrics and /configz. A fallback
  only: for kubelets the runner cannot reach or verify.

`kubelet.access: direct` never uses the proxy; `proxy` never reaches kubelets directly (a runner with no network
path to the nodes' port then pays no connect timeout per node)."""

from __future__ import annotations

from typing import Any

ACCESS = ("auto", "direct", "proxy")
#: the permission each kubelet path is authorized as, on the kubelet's own port
SUBRESOURCE = {"metrics": "nodes/metrics", "configz": "nodes/configz"}
PROXY = "nodes/proxy"
#: the node address a direct read goes to: the first the node reports, in this order (internal before external;
#: the API server's own default, --kubelet-preferred-address-types, starts at Hostname, which a runner outside the
#: cluster often cannot resolve)
ADDRESS_ORDER = ("InternalIP", "InternalDNS", "Hostname", "ExternalIP", "ExternalDNS")
DEFAULT_PORT = 10250


def routes(access: str, path: str, granted: dict[str, bool]) -> tuple[list[str], str]:
    """The routes to try for kubelet `path` ("metrics" | "configz"), in order, and why there is none when the list
    is empty."""
    direct, proxy = bool(granted.get(SUBRESOURCE[path])), bool(granted.get(PROXY))
    out = ([r for r, ok in (("direct", direct), ("proxy", proxy)) if ok] if access == "auto" else
           ["direct"] if access == "direct" and direct else ["proxy"] if access == "proxy" and proxy else [])
    if out:
        return out, ""
    if access == "direct":
        return [], f"{SUBRESOURCE[path]} not granted (kubelet.access: direct)"
    if access == "proxy":
        return [], f"{PROXY} not granted (kubelet.access: proxy)"
    return [], f"neither {SUBRESOURCE[path]} nor {PROXY} granted"


def base_url(node: dict | None) -> str | None:
    """https://ADDRESS:PORT of the node's kubelet, or None when the node reports no address."""
    st = (node or {}).get("status") or {}
    by_type: dict[str, str] = {}
    for a in st.get("addresses") or []:
        if isinstance(a, dict) and a.get("address"):
            by_type.setdefault(str(a.get("type")), str(a["address"]))
    addr = next((by_type[t] for t in ADDRESS_ORDER if t in by_type), None)
    if addr is None:
        return None
    port = ((st.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
    port = port if isinstance(port, int) and 0 < port < 65536 else DEFAULT_PORT
    host = f"[{addr}]" if ":" in addr else addr
    return f"https://{host}:{port}"


def _tls_error(exc: Any) -> str | None:
    """The text of a TLS failure (the client raises it with status 0 and the SSL error as its reason), else None."""
    text = str(getattr(exc, "reason", None) or exc)
    return text if not getattr(exc, "status", None) and ("SSL" in text or "CERTIFICATE" in text.upper()) else None


def transient(exc: Any) -> bool:
    """A transport failure (refused, reset, timed out: a kubelet restarting, a network blip), worth another try
    later in the run; an HTTP answer or a certificate that did not verify will not change."""
    return not getattr(exc, "status", None) and _tls_error(exc) is None


def failure(exc: Any, url: str, path: str, ca_source: str) -> str:
    """Why a direct read of `url` failed, for the check's evidence and its NOTCHECKED message. `exc`: what the
    client raised (an ApiException with an HTTP status, one with status 0 and the TLS error, or a transport
    error)."""
    status = getattr(exc, "status", None)
    body = str(getattr(exc, "body", None) or getattr(exc, "reason", None) or "").strip().replace("\n", " ")[:200]
    if status == 401:
        return (f"the kubelet at {url} did not accept the run's credentials (401): it needs webhook token "
                f"authentication (authentication.webhook.enabled), or a client CA that signed the kubeconfig's "
                f"certificate")
    if status == 403:
        return (f"the kubelet at {url} refused {SUBRESOURCE[path]} (403: {body}); a kubelet without "
                f"KubeletFineGrainedAuthz asks nodes/proxy for /configz")
    if status:
        return f"the kubelet at {url} answered HTTP {status} to /{path}: {body}"
    text = _tls_error(exc)
    if text is not None:
        last = [ln for ln in text.splitlines() if ln.strip()][-1:] or [""]
        return (f"the kubelet's serving certificate at {url} did not verify against {ca_source} "
                f"({last[0].strip()[:160]}), so the run's credentials were not sent: set kubelet.caFile to the CA "
                f"that signs the kubelets' serving certificates (serverTLSBootstrap), or kubelet.access: proxy")
    cause = getattr(exc, "reason", None) if type(exc).__name__ == "MaxRetryError" else exc
    return f"the kubelet at {url} could not be reached ({type(cause).__name__}: {str(cause)[:160]})"
