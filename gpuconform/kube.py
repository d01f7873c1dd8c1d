"""Kubernetes API access: client construction, a client-side rate limit, request counting, and the one place
that sends a request (`CountingApiClient.call_api`), so every call gets:

- a request timeout: `timeouts.apiRequest` unless the call sets its own (no call site can forget it);
- a deadline: all attempts and the waits between them end within API_CALL_DEADLINE_FACTOR x that timeout, each
  attempt gets at most the time left (gpuconform/timing.py), and `deadline()` bounds a whole phase (cleanup);
- retries only where gpuconform/apierrors.py's `should_retry` says repeating is safe (Retry-After honoured), and
  a named create that an earlier attempt already made is taken as created (409 AlreadyExists resolved);
- permanent errors (401, 403, 404, 409, 422, TLS) raised at once; `api_error` names them (ERROR-AUTH, ERROR-RBAC,
  ERROR-API).

Two kinds of "not yet" are kept apart (as grpc psm-interop does): a *transient API error* is retried here; a
*condition not met yet* (pod still Pending) is waited for on a watch cache (gpuconform/watch.py) with a named
timeout, and never retried past a terminal state.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator
from urllib.parse import quote, urlsplit

import tenacity
from kubernetes import client as k8s
from kubernetes import config as kconfig

from . import timing
from .apierrors import (TRANSIENT_STATUS, _cause, api_error, calling, created_name, http_error, is_permanent, maybe_sent,
                        rbac_denied, retry_after, should_retry, status_message)
from .reasons import EnvironmentProblem
from .redaction import RedactSecrets, remember
from .watch import Watch, pod_watch, to_dict

# What callers use as kube.X (the error names and the watch live in their own modules).
__all__ = ["Cluster", "CountingApiClient", "EnvironmentProblem", "RateLimiter", "Watch", "api_error", "calling", "connect",
           "created_name", "describe", "is_permanent", "pod_watch", "rbac_denied", "retry_after", "should_retry",
           "status_message", "to_dict"]

# Tokens must never reach logs: the client's and urllib3's debug logging print headers.
for _name in ("kubernetes", "kubernetes.client.rest", "urllib3", "urllib3.connectionpool"):
    logging.getLogger(_name).setLevel(logging.WARNING)

log = logging.getLogger("gpuconform.api")


# Defence in depth for the suite's own debug log, and for the root logger, where the kubernetes client logs an
# exec credential plugin's failure with the plugin's stderr (config/kube_config.py `logging.error(str(e))`).
log.addFilter(RedactSecrets())
logging.getLogger().addFilter(RedactSecrets())


class RateLimiter:
    """Token bucket: `qps` sustained, `burst` at once (client-go's defaults are 5/10)."""

    def __init__(self, qps: float, burst: int):
        self.qps, self.burst = qps, burst
        self.tokens = float(burst)
        self.last = time.monotonic()
        self.lock = threading.Lock()

    def acquire(self) -> None:
        while True:
            with self.lock:
                now = time.monotonic()
                self.tokens = min(self.burst, self.tokens + (now - self.last) * self.qps)
                self.last = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    return
                wait = (1 - self.tokens) / self.qps
            time.sleep(wait)


def _wait(state: tenacity.RetryCallState) -> float:
    exc = state.outcome.exception() if state.outcome else None
    ra = retry_after(exc) if exc is not None else None
    if ra is not None:
        return ra
    return min(timing.API_BACKOFF_BASE_S * 2 ** (state.attempt_number - 1), timing.API_BACKOFF_MAX_S)


def api_retry(retry: Callable[[BaseException], bool], deadline_s: float,
              attempts: int = timing.API_RETRY_ATTEMPTS) -> tenacity.Retrying:
    """Attempts until success, a permanent error, `attempts`, or `deadline_s` (the next wait would pass it)."""
    if attempts < 1 or deadline_s <= 0:
        raise ValueError("a retry policy needs an attempt limit and a deadline")
    return tenacity.Retrying(retry=tenacity.retry_if_exception(retry),
                             stop=tenacity.stop_after_attempt(attempts) | tenacity.stop_before_delay(deadline_s),
                             wait=_wait, reraise=True)


def _seconds(timeout: Any) -> float | None:
    """A request timeout as seconds: a number, or the sum of a (connect, read) pair."""
    if isinstance(timeout, (int, float)) and timeout > 0:
        return float(timeout)
    if isinstance(timeout, tuple) and len(timeout) == 2:
        return float(sum(timeout))
    return None


class CountingApiClient(k8s.ApiClient):
    """ApiClient that sends every request with a timeout, under the rate limit, with `should_retry`'s retries
    bounded by a deadline, and counts the requests."""

    def __init__(self, configuration: k8s.Configuration, limiter: RateLimiter, request_timeout: float = 30.0,
                 attempts: int = timing.API_RETRY_ATTEMPTS):
        super().__init__(configuration)
        self.limiter, self.attempts, self.request_timeout = limiter, attempts, request_timeout
        self.requests = 0
        # pods/log and */proxy requests: the apiserver serves these long-running non-watch requests outside API
        # Priority and Fairness, so server-side APF counts do not include them.
        self.long_running = 0
        self._count_lock = threading.Lock()
        self._local = threading.local()  # the deadline() in force on this thread

    @contextlib.contextmanager
    def deadline(self, seconds: float) -> Iterator[None]:
        """Every call this thread makes inside the block ends within `seconds` from now (attempts and retries
        included; an attempt started late still gets API_MIN_ATTEMPT_S): for bounded phases such as the run's
        cleanup (timeouts.cleanup)."""
        prev = getattr(self._local, "until", None)
        until = time.monotonic() + seconds
        self._local.until = until if prev is None else min(prev, until)
        try:
            yield
        finally:
            self._local.until = prev

    def call_api(self, method: str, url: str, header_params: dict | None = None, body: Any = None,
                 post_params: Any = None, _request_timeout: Any = None) -> Any:
        path = urlsplit(url).path  # logged and classified without the query string
        long_running = path.endswith("/log") or "/proxy" in path
        timeout = _request_timeout if _seconds(_request_timeout) else self.request_timeout  # the default
        deadline_s = (_seconds(timeout) or self.request_timeout) * timing.API_CALL_DEADLINE_FACTOR
        name = created_name(method, path, body)
        t0 = time.monotonic()
        until = getattr(self._local, "until", None)
        if until is not None:  # a deadline() block: never past it
            deadline_s = max(min(deadline_s, until - t0), timing.API_MIN_ATTEMPT_S)
        state = {"ambiguous": False}  # an earlier attempt may have been acted on (a named create's 409 is ours)

        def once() -> Any:
            self.limiter.acquire()
            left = deadline_s - (time.monotonic() - t0)
            this = timeout if isinstance(timeout, tuple) else max(min(timeout, left), timing.API_MIN_ATTEMPT_S)
            with self._count_lock:
                self.requests += 1
                self.long_running += long_running
                n = self.requests
            t1 = time.monotonic()
            try:
                resp = super(CountingApiClient, self).call_api(method, url, header_params, body, post_params,
                                                               _request_timeout=this)
            except Exception as e:
                # Only the method and the path: never headers, query values or bodies.
                log.debug("API #%d %s %s -> %s in %.3fs", n, method, path, type(_cause(e)).__name__,
                          time.monotonic() - t1)
                state["ambiguous"] |= maybe_sent(e)
                raise
            if 200 <= resp.status <= 299:
                log.debug("API #%d %s %s -> %s in %.3fs", n, method, path, resp.status, time.monotonic() - t1)
                return resp
            log.debug("API #%d %s %s -> HTTP %s in %.3fs", n, method, path, resp.status, time.monotonic() - t1)
            # Raised here (the generated client raises only after call_api returns), so 429/5xx are retried.
            resp.read()
            err = http_error(resp)
            if err.status == 409 and name and state["ambiguous"]:
                mine = self._created_earlier(url, header_params, body, name, this)
                if mine is not None:
                    log.debug("API #%d POST %s: 409 on a repeat; %s was created by the earlier attempt", n, path, name)
                    return mine
            state["ambiguous"] |= err.status in TRANSIENT_STATUS and err.status != 429 and retry_after(err) is None
            raise err

        def retry(e: BaseException) -> bool:
            return should_retry(method, path, e, named_create=name is not None)

        return api_retry(retry, deadline_s, self.attempts)(once)

    def _created_earlier(self, url: str, header_params: dict | None, body: dict, name: str, timeout: Any) -> Any:
        """After 409 on a repeated create: the object, when it carries every label of the one we sent."""
        parts = urlsplit(url)
        get_url = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}/{quote(name, safe='')}"
        headers = {k: v for k, v in (header_params or {}).items() if k.lower() != "content-type"}
        try:
            resp = super().call_api("GET", get_url, headers, None, None, _request_timeout=timeout)
            resp.read()
        except Exception:  # noqa: BLE001 - could not tell: the 409 stands
            return None
        if resp.status != 200:
            return None
        try:
            labels = (json.loads(resp.data).get("metadata") or {}).get("labels") or {}
        except ValueError:
            return None
        want = (body.get("metadata") or {}).get("labels") or {}
        return resp if want and all(labels.get(k) == v for k, v in want.items()) else None


@dataclass
class Cluster:
    api: CountingApiClient
    core: k8s.CoreV1Api
    authz: k8s.AuthorizationV1Api
    source: str  # "kubeconfig /path (context x)" | "in-cluster service account"
    request_timeout: float
    # the RBAC subject the run binds its reads to in each run namespace (preflight.check_permissions), or None
    # where the identity holds them already
    run_binding: dict | None = None

    @property
    def apps(self) -> k8s.AppsV1Api:
        """DaemonSets (the rollout rehearsal only): built on first use, since importing an API group's client builds
        its models (about 0.25 s for apps/v1) and most runs never read one."""
        return k8s.AppsV1Api(self.api)

    def kubelet_get(self, node: str, path: str) -> str:
        """GET /api/v1/nodes/NODE/proxy/PATH (kubelet metrics, configz) as text."""
        # Raw body: the generated client would parse JSON (configz) and hand back its Python repr.
        resp = self.core.connect_get_node_proxy_with_path(node, path, _request_timeout=self.request_timeout,
                                                          _preload_content=False)
        return resp.data.decode("utf-8", errors="replace")

    def kubelet_client(self, ca_file: str | None) -> "CountingApiClient":
        """A client for kubelets' own port (gpuconform/kubeletroute.py): the run's credentials (its token or client
        certificate), sent only after the kubelet's serving certificate verified against `ca_file` (None: the CA
        the API server is trusted with) and matched the address. Two attempts per read (a pooled connection the
        kubelet dropped as it restarted), no more: a kubelet that cannot be read directly is read through the node
        proxy instead where that is granted."""
        cfg = copy.deepcopy(self.api.configuration)
        if ca_file:
            cfg.ssl_ca_cert, cfg.ca_cert_data = ca_file, None
        cfg.verify_ssl, cfg.tls_server_name = True, None
        cfg.assert_hostname = None  # the default: the certificate must name the address connected to
        return CountingApiClient(cfg, self.api.limiter, self.request_timeout, attempts=2)

    def kubelet_direct(self, client: "CountingApiClient", url: str, connect_s: float) -> str:
        """GET `url` on a kubelet's own port as text (raises the client's errors unclassified: the caller says
        why the kubelet was not read, gpuconform/kubeletroute.py failure)."""
        headers = {"Accept": "text/plain, application/json"}
        # refreshed where the source does (in-cluster, exec); the kubeconfig loader keys it "BearerToken" in the client this pins, "authorization" in older ones
        token = client.configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
        if token:
            headers["Authorization"] = token
        resp = client.call_api("GET", url, headers, _request_timeout=(connect_s, self.request_timeout))
        resp.read()
        return resp.data.decode("utf-8", errors="replace")

    def pod_log(self, namespace: str, name: str, container: str | None = None, tail: int | None = None,
                previous: bool = False, timestamps: bool = False) -> str:
        """A container's log as text. Read raw and decoded here: the generated client decodes strictly, so one
        byte that is not UTF-8 (a binary write, a cut multi-byte character) would lose the whole log as ERROR-API;
        such bytes become U+FFFD and the rest of the log is kept."""
        resp = self.core.read_namespaced_pod_log(name, namespace, container=container, tail_lines=tail,
                                                 previous=previous, timestamps=timestamps,
                                                 _request_timeout=self.request_timeout,
                                                 _preload_content=False)
        return decode_log(resp.data)


def decode_log(data: bytes | str) -> str:
    """Log bytes as text: UTF-8 with every invalid byte replaced (U+FFFD), never an error."""
    return data if isinstance(data, str) else data.decode("utf-8", errors="replace")


def read_json(resp: Any) -> Any:
    """The decoded JSON body of a call made with `_preload_content=False` (urllib3's response, its body not read
    yet: a non-2xx answer was raised as ApiException before it came back), its connection back in the pool. Its
    `read()`, not `.data`, which would keep the bytes on the response."""
    try:
        data = resp.read()
    finally:
        release = getattr(resp, "release_conn", None)
        if release is not None:
            release()
    return json.loads(data)


def connect(kubeconfig: str | None, context: str | None, qps: float, burst: int, request_timeout: float,
            pool: int = 16) -> Cluster:
    """Builds the client: explicit kubeconfig > $KUBECONFIG > in-cluster service account > ~/.kube/config."""
    cfg = k8s.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path:
        kconfig.load_kube_config(config_file=path, context=context, client_configuration=cfg)
        source = f"kubeconfig {path}" + (f" (context {context})" if context else "")
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        kconfig.load_incluster_config(client_configuration=cfg)
        source = "in-cluster service account"
    else:
        kconfig.load_kube_config(context=context, client_configuration=cfg)
        source = "kubeconfig ~/.kube/config" + (f" (context {context})" if context else "")
    cfg.debug = False
    # the credentials, whatever their shape (a static kubeconfig token need not look like a JWT), are scrubbed
    # from everything the suite writes, --showlocals tracebacks of the client's frames included
    for value in (*(cfg.api_key or {}).values(), cfg.password):
        remember(value)
    cfg.connection_pool_maxsize = max(pool, 4)  # one connection per concurrent check, watches apart
    # One retry layer with one deadline: urllib3's own retries (3 by default, each with a full timeout) are off,
    # and its errors reach should_retry unwrapped.
    cfg.retries = False
    api = CountingApiClient(cfg, RateLimiter(qps, burst), request_timeout)
    return Cluster(api, k8s.CoreV1Api(api), k8s.AuthorizationV1Api(api),
                   source, request_timeout)


def describe(pod: dict | None) -> str:
    """One line: phase, conditions not True, container waiting/terminated reasons."""
    if pod is None:
        return "not created yet"
    st = pod.get("status", {})
    parts = [st.get("phase", "?")]
    if st.get("reason"):
        parts.append(f"reason={st['reason']}")
    for c in st.get("conditions", []) or []:
        if c.get("status") != "True" and c.get("reason"):
            parts.append(f"{c['type']}={c['status']}({c['reason']}: {(c.get('message') or '')[:160]})")
    for cs in st.get("containerStatuses", []) or []:
        s = cs.get("state", {})
        if s.get("waiting"):
            parts.append(f"{cs['name']} waiting {s['waiting'].get('reason')}: {(s['waiting'].get('message') or '')[:160]}")
        if s.get("terminated"):
            t = s["terminated"]
            parts.append(f"{cs['name']} terminated {t.get('reason')} exit={t.get('exitCode')}")
    return "; ".join(parts)
