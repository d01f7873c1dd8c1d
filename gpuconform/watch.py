"""A LIST+WATCH kept as a cache of objects by name (the run's pods per namespace, every node): every wait reads
from it and is woken by its changes, no wait polls the API. Its errors are never swallowed: a permanent one
(401/403/404), or failing without a success for WATCH_GIVE_UP_S, stops it and `raise_if_failed` raises it named
(ERROR-AUTH / ERROR-RBAC / ERROR-API); while it is failing `healthy` is False and `trouble()` says why, so readers
read the API directly or report the outage instead of timing out on a stale cache."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from kubernetes import watch as kwatch
from kubernetes.client.exceptions import ApiException

from . import timing
from .apierrors import api_error, calling, is_permanent

if TYPE_CHECKING:
    from .kube import Cluster


def to_dict(api: Any, obj: Any) -> dict:
    """API model -> the camelCase dict the API server sent (what gpuconform's pure functions take). Also
    `kube.to_dict`; it lives here because the watch cache is where most objects are converted."""
    return api.sanitize_for_serialization(obj)


@dataclass
class Watch:
    """One LIST+WATCH kept as a cache of objects by name; readers wait on `changed`, never poll the API.

    Transient errors (connection drops, 5xx) re-watch from the last resourceVersion after WATCH_RETRY_S; 410
    Gone relists. 401/403/404, or `give_up_s` of failures without one success, stop the watch and keep the
    error in `failed`: `changed` returns at once and `raise_if_failed` raises it, named by `api_error`."""

    cluster: "Cluster"
    list_fn: Callable[..., Any]
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    what: str = "objects"
    objects: dict[str, dict] = field(default_factory=dict)
    seen: dict[str, dict] = field(default_factory=dict)  # last state of every object ever seen (also after deletion)
    # name -> wall time the watch first saw it, saw it end (phase Succeeded/Failed), saw it deleted
    seen_at: dict[str, float] = field(default_factory=dict)
    ended_at: dict[str, float] = field(default_factory=dict)
    gone_at: dict[str, float] = field(default_factory=dict)
    version: int = 0  # bumped on every change; `changed` waits for it to move
    cond: threading.Condition = field(default_factory=threading.Condition)
    stopped: bool = False
    error: BaseException | None = None  # the last transient error (kept for diagnostics)
    failed: BaseException | None = None  # a permanent error: the cache is no longer kept up to date
    broken_since: float | None = None  # monotonic time of the first failure since the last success
    give_up_s: float = timing.WATCH_GIVE_UP_S
    # objects of a namespaced kind listed across namespaces (ResourceClaims) are keyed "namespace/name": two
    # namespaces may hold objects of one name
    namespaced: bool = False
    # the model the events decode to, where the client cannot derive it from the LIST's type (its
    # V1ResourceClaimList holds ResourceV1ResourceClaim: the client renamed the model, and its watch would look
    # for V1ResourceClaim and fail every event)
    item_type: str | None = None

    def key(self, meta: Any) -> str:
        """The cache key of an object's metadata (a dict or the client's model)."""
        get = meta.get if isinstance(meta, dict) else (lambda k: getattr(meta, k, None))
        return f"{get('namespace')}/{get('name')}" if self.namespaced else get("name")

    def start(self, initial: list[dict] | None = None, resource_version: str | None = None) -> "Watch":
        """Starts the watch thread; `initial` + `resource_version` reuse a LIST the caller already made."""
        if initial is not None and resource_version:
            for o in initial:
                self.objects[self.key(o["metadata"])] = self.seen[self.key(o["metadata"])] = o
        self.thread = threading.Thread(target=self._run, args=(resource_version if initial is not None else None,),
                                       name=f"gpuconform-watch-{self.what}", daemon=True)
        self.thread.start()
        return self

    def _ok(self) -> None:
        self.broken_since = None

    def _failing(self, e: BaseException) -> bool:
        """Records a failure; True when the watch gives up (permanent, or failing for give_up_s)."""
        self.error = e
        now = time.monotonic()
        if self.broken_since is None:
            self.broken_since = now
        if is_permanent(e) or now - self.broken_since >= self.give_up_s:
            with self.cond:
                self.failed = e
                self.stopped = True
                self.cond.notify_all()
            return True
        return False

    def _run(self, rv: str | None) -> None:
        while not self.stopped:
            try:
                if rv is None:
                    lst = self.list_fn(*self.args, _request_timeout=self.cluster.request_timeout, **self.kwargs)
                    with self.cond:
                        fresh = {self.key(o.metadata): to_dict(self.cluster.api, o) for o in lst.items}
                        self.objects = fresh
                        self.seen.update(fresh)
                        self.version += 1
                        self.cond.notify_all()
                    rv = lst.metadata.resource_version
                    self._ok()
                w = kwatch.Watch(return_type=self.item_type)
                for ev in w.stream(self.list_fn, *self.args, resource_version=rv,
                                   timeout_seconds=timing.WATCH_WINDOW_S, allow_watch_bookmarks=True,
                                   _request_timeout=timing.WATCH_WINDOW_S + timing.WATCH_CLIENT_SLACK_S, **self.kwargs):
                    if self.stopped:
                        w.stop()
                        break
                    self._ok()
                    obj = ev["object"]
                    if ev["type"] == "BOOKMARK":  # the client leaves a bookmark undecoded: a dict (kubernetes
                        rv = obj["metadata"]["resourceVersion"]  # watch/watch.py unmarshal_event); ERROR it raises
                        continue
                    rv = obj.metadata.resource_version
                    with self.cond:
                        now, name = time.time(), self.key(obj.metadata)
                        self.seen_at.setdefault(name, now)
                        if ev["type"] == "DELETED":
                            self.objects.pop(name, None)
                            self.gone_at.setdefault(name, now)
                        else:
                            self.objects[name] = self.seen[name] = to_dict(self.cluster.api, obj)
                            if (self.seen[name].get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                                self.ended_at.setdefault(name, now)
                        self.version += 1
                        self.cond.notify_all()
                else:
                    self._ok()  # the server ended the window normally
            except ApiException as e:
                if e.status == 410:  # resourceVersion too old: relist
                    rv = None
                    continue
                if self._failing(e):
                    return
                time.sleep(timing.WATCH_RETRY_S)
            except Exception as e:  # noqa: BLE001 - connection drops: rewatch from the last version
                if self._failing(e):
                    return
                time.sleep(timing.WATCH_RETRY_S)

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()

    @property
    def healthy(self) -> bool:
        """Up to date as far as it knows: not failed and no failure since its last success."""
        return self.failed is None and self.broken_since is None

    def raise_if_failed(self, doing: str | None = None) -> None:
        """Raises the watch's permanent error, named (ERROR-AUTH, ERROR-RBAC, ERROR-API), when it has one."""
        if self.failed is not None:
            raise api_error(self.failed, doing or f"watching {self.what}")

    def trouble(self) -> str:
        """The ongoing failure in words ('' when healthy), for timeout messages."""
        if self.failed is not None:
            return f"the watch on {self.what} stopped: {api_error(self.failed, 'watch').message}"
        if self.broken_since is not None and self.error is not None:
            return (f"the watch on {self.what} has been failing for {time.monotonic() - self.broken_since:.0f}s: "
                    f"{api_error(self.error, 'watch').message}")
        return ""

    def get(self, name: str) -> dict | None:
        with self.cond:
            return self.objects.get(name)

    def items(self) -> list[dict]:
        """Every object in the cache now."""
        with self.cond:
            return list(self.objects.values())

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


def pod_watch(cluster: "Cluster", namespace: str, selector: str) -> Watch:
    """The watch over one namespace's pods carrying `selector`, started from a LIST made here (so a pod created
    after this returns is seen by the watch, also if it is deleted at once). Raises the LIST's error, named."""
    with calling(f"listing the run's pods in {namespace}"):
        lst = cluster.core.list_namespaced_pod(namespace, label_selector=selector,
                                               _request_timeout=cluster.request_timeout)
    initial = [to_dict(cluster.api, p) for p in lst.items]
    return Watch(cluster, cluster.core.list_namespaced_pod, (namespace,), {"label_selector": selector},
                 what=f"pods-{namespace}").start(initial, lst.metadata.resource_version)
