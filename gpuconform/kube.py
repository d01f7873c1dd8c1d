"""Kubernetes API access: client construction, a client-side rate limit, named retry policies, request
counting, and a single watch over the run's own pods that every wait reads from.

Two kinds of "not yet" are kept apart (as grpc psm-interop does): a *transient API error* (429, 5xx,
connection reset) is retried by `api_retry` with a bounded number of attempts, honouring Retry-After; a
*condition not met yet* (pod still Pending) is waited for on the watch cache with a named timeout, and never
retried past a terminal state.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit

import tenacity
import urllib3
from kubernetes import client as k8s
from kubernetes import config as kconfig
from kubernetes import watch as kwatch
from kubernetes.client.exceptions import ApiException

from . import timing
from .reasons import EnvironmentProblem

# Tokens must never reach logs: the client's and urllib3's debug logging print headers.
for _name in ("kubernetes", "kubernetes.client.rest", "urllib3", "urllib3.connectionpool"):
    logging.getLogger(_name).setLevel(logging.WARNING)

log = logging.getLogger("gpuconform.api")


class RedactSecrets(logging.Filter):
    """Defence in depth for the suite's own debug log: bearer tokens and JWTs are masked in every record."""

    PATTERNS = (re.compile(r"(?i)(bearer\s+)[^\s'\"]+"), re.compile(r"eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]+"))

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        for p in self.PATTERNS:
            msg = p.sub(lambda m: (m.group(1) if m.groups() else "") + "<redacted>", msg)
        record.msg, record.args = msg, None
        return True


log.addFilter(RedactSecrets())

TRANSIENT_STATUS = {429, 500, 502, 503, 504}


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


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        return exc.status in TRANSIENT_STATUS
    return isinstance(exc, (urllib3.exceptions.ProtocolError, urllib3.exceptions.MaxRetryError,
                            urllib3.exceptions.ReadTimeoutError, ConnectionError))


def _retry_after(state: tenacity.RetryCallState) -> float:
    exc = state.outcome.exception() if state.outcome else None
    if isinstance(exc, ApiException) and exc.headers:
        ra = exc.headers.get("Retry-After")
        if ra and str(ra).isdigit():
            return min(float(ra), timing.API_RETRY_AFTER_MAX_S)
    return min(timing.API_BACKOFF_BASE_S * 2 ** (state.attempt_number - 1), timing.API_BACKOFF_MAX_S)


def api_retry(attempts: int = timing.API_RETRY_ATTEMPTS) -> tenacity.Retrying:
    """Retries transient API errors only (429 with Retry-After, 5xx, connection resets); never auth errors."""
    if attempts < 1:
        raise ValueError("a retry policy needs an attempt limit")
    return tenacity.Retrying(retry=tenacity.retry_if_exception(_is_transient),
                             stop=tenacity.stop_after_attempt(attempts), wait=_retry_after, reraise=True)


class CountingApiClient(k8s.ApiClient):
    """ApiClient with the rate limit and the transient-error retry applied to every request, and a count."""

    def __init__(self, configuration: k8s.Configuration, limiter: RateLimiter, attempts: int = 5):
        super().__init__(configuration)
        self.limiter, self.attempts = limiter, attempts
        self.requests = 0
        # pods/log and */proxy requests: the apiserver serves these long-running non-watch requests outside API
        # Priority and Fairness, so server-side APF counts do not include them.
        self.long_running = 0
        self._count_lock = threading.Lock()

    def call_api(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        path = urlsplit(url).path  # logged and classified without the query string
        long_running = path.endswith("/log") or "/proxy" in path

        def once() -> Any:
            self.limiter.acquire()
            with self._count_lock:
                self.requests += 1
                self.long_running += long_running
                n = self.requests
            t0 = time.monotonic()
            try:
                out = super(CountingApiClient, self).call_api(method, url, *args, **kwargs)
            except ApiException as e:
                log.debug("API #%d %s %s -> HTTP %s in %.3fs", n, method, path, e.status, time.monotonic() - t0)
                raise
            # Only the method and the path: never headers, query values or bodies.
            log.debug("API #%d %s %s -> ok in %.3fs", n, method, path, time.monotonic() - t0)
            return out
        return api_retry(self.attempts)(once)


@dataclass
class Cluster:
    api: CountingApiClient
    core: k8s.CoreV1Api
    batch: k8s.BatchV1Api
    apps: k8s.AppsV1Api
    authz: k8s.AuthorizationV1Api
    source: str  # "kubeconfig /path (context x)" | "in-cluster service account"
    request_timeout: float

    def kubelet_get(self, node: str, path: str) -> str:
        """GET /api/v1/nodes/NODE/proxy/PATH (kubelet metrics, configz) as text."""
        # Raw body: the generated client would parse JSON (configz) and hand back its Python repr.
        resp = self.core.connect_get_node_proxy_with_path(node, path, _request_timeout=self.request_timeout,
                                                          _preload_content=False)
        return resp.data.decode("utf-8", errors="replace")


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
    cfg.connection_pool_maxsize = max(pool, 4)  # one connection per concurrent check, watches apart
    api = CountingApiClient(cfg, RateLimiter(qps, burst))
    return Cluster(api, k8s.CoreV1Api(api), k8s.BatchV1Api(api), k8s.AppsV1Api(api), k8s.AuthorizationV1Api(api),
                   source, request_timeout)


def api_error(exc: BaseException, doing: str) -> EnvironmentProblem:
    """One clear environment error for a failed API call (status, reason, what we were doing)."""
    if isinstance(exc, ApiException):
        what = {401: "credentials rejected (401)", 403: "forbidden (403)"}.get(exc.status, f"HTTP {exc.status}")
        body = (exc.body or "")[:300] if isinstance(exc.body, str) else ""
        code = "ENV-RBAC" if exc.status == 403 else "ENV-API"
        return EnvironmentProblem(code, f"{doing}: {what} {exc.reason or ''} {body}".strip())
    return EnvironmentProblem("ENV-API", f"{doing}: {type(exc).__name__}: {exc}")


def to_dict(api: k8s.ApiClient, obj: Any) -> dict:
    """API model -> the camelCase dict the API server sent (what gpuconform's pure functions take)."""
    return api.sanitize_for_serialization(obj)


# ------------------------------------------------------------------ watches (the run's pods, the GPU nodes)

TERMINAL = ("Succeeded", "Failed")
PERMANENT_STATUS = {401, 403, 404}  # a watch that gets these stops retrying and reports the error


@dataclass
class Watch:
    """One LIST+WATCH kept as a cache of objects by name; readers wait on `changed`, never poll the API.

    Transient errors (connection drops, 5xx) re-watch from the last resourceVersion after a second; 410 Gone
    relists; 401/403/404 stop the watch and keep the error in `failed`, which every waiter raises."""

    cluster: Cluster
    list_fn: Callable[..., Any]
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    what: str = "objects"
    objects: dict[str, dict] = field(default_factory=dict)
    seen: dict[str, dict] = field(default_factory=dict)  # last state of every object ever seen (also after deletion)
    version: int = 0  # bumped on every change; `changed` waits for it to move
    cond: threading.Condition = field(default_factory=threading.Condition)
    stopped: bool = False
    error: BaseException | None = None  # the last transient error (kept for diagnostics)
    failed: BaseException | None = None  # a permanent error: the cache is no longer kept up to date

    def start(self, initial: list[dict] | None = None, resource_version: str | None = None) -> "Watch":
        """Starts the watch thread; `initial` + `resource_version` reuse a LIST the caller already made."""
        if initial is not None and resource_version:
            for o in initial:
                self.objects[o["metadata"]["name"]] = self.seen[o["metadata"]["name"]] = o
        self.thread = threading.Thread(target=self._run, args=(resource_version if initial is not None else None,),
                                       name=f"gpuconform-watch-{self.what}", daemon=True)
        self.thread.start()
        return self

    def _run(self, rv: str | None) -> None:
        while not self.stopped:
            try:
                if rv is None:
                    lst = self.list_fn(*self.args, _request_timeout=self.cluster.request_timeout, **self.kwargs)
                    with self.cond:
                        fresh = {o.metadata.name: to_dict(self.cluster.api, o) for o in lst.items}
                        self.objects = fresh
                        self.seen.update(fresh)
                        self.version += 1
                        self.cond.notify_all()
                    rv = lst.metadata.resource_version
                w = kwatch.Watch()
                for ev in w.stream(self.list_fn, *self.args, resource_version=rv,
                                   timeout_seconds=timing.WATCH_WINDOW_S, allow_watch_bookmarks=True,
                                   _request_timeout=timing.WATCH_WINDOW_S + timing.WATCH_CLIENT_SLACK_S, **self.kwargs):
                    if self.stopped:
                        w.stop()
                        break
                    obj = ev["object"]
                    rv = obj.metadata.resource_version
                    if ev["type"] == "BOOKMARK":
                        continue
                    with self.cond:
                        if ev["type"] == "DELETED":
                            self.objects.pop(obj.metadata.name, None)
                        else:
                            self.objects[obj.metadata.name] = self.seen[obj.metadata.name] = to_dict(self.cluster.api, obj)
                        self.version += 1
                        self.cond.notify_all()
            except ApiException as e:
                if e.status == 410:  # resourceVersion too old: relist
                    rv = None
                    continue
                self.error = e
                if e.status in PERMANENT_STATUS:
                    with self.cond:
                        self.failed = e
                        self.stopped = True
                        self.cond.notify_all()
                    return
                time.sleep(timing.WATCH_RETRY_S)
            except Exception as e:  # noqa: BLE001 - connection drops: rewatch from the last version
                self.error = e
                time.sleep(timing.WATCH_RETRY_S)

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()

    def get(self, name: str) -> dict | None:
        with self.cond:
            return self.objects.get(name)

    def changed(self, since: int, timeout: float) -> int:
        """Blocks until the cache changed after version `since`, the watch stopped, or `timeout` passed."""
        with self.cond:
            self.cond.wait_for(lambda: self.version != since or self.stopped, timeout=max(timeout, 0.0))
            return self.version

    def snapshot(self, names: tuple[str, ...] | list[str]) -> tuple[dict[str, dict | None], set[str]]:
        """The named objects now, and those seen earlier but deleted since."""
        with self.cond:
            return ({n: self.objects.get(n) for n in names},
                    {n for n in names if n in self.seen and n not in self.objects})


def pod_watch(cluster: Cluster, namespace: str, selector: str) -> Watch:
    """The watch over one namespace's pods carrying `selector` (started)."""
    return Watch(cluster, cluster.core.list_namespaced_pod, (namespace,), {"label_selector": selector},
                 what=f"pods-{namespace}").start()


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
