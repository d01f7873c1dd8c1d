"""Stand-in cluster pieces for the child pytest runs of the pytester tests: one page per LIST, no watch, and a
Run over an in-memory cluster (the child's conftest supplies the CoreV1 stand-in). No request leaves the process.
Children import it as `testing.plugin.standin` (their PYTHONPATH is the repository)."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace
from typing import Any, Callable

import kubernetes.client as k8s
import urllib3

from gpuconform import kube


def pages(items: list) -> Callable[..., Any]:
    """A LIST call that returns `items` in one page, as the client does: raw (urllib3's response, body unread) for
    `_preload_content=False`, else as a model list."""
    def fn(limit=None, _continue=None, _request_timeout=None, _preload_content=True, **kw):
        if not _preload_content:
            body = json.dumps({"metadata": {"resourceVersion": "1"}, "items": items}).encode()
            return urllib3.HTTPResponse(body=io.BytesIO(body), status=200, preload_content=False)
        return SimpleNamespace(items=items, metadata=SimpleNamespace(_continue=None, resource_version="1"))
    return fn


class NoWatch:
    """kube.Watch without a server: started, never reporting."""

    def __init__(self, *a: Any, **k: Any):
        self.initial: list[dict] = []

    def start(self, initial: list[dict] | None = None, *a: Any, **k: Any) -> "NoWatch":
        self.initial = initial or []
        return self

    def items(self) -> list[dict]:
        return self.initial

    healthy = True

    def stop(self) -> None:
        pass


def run_start(core: Any, run_id: str) -> classmethod:
    """A replacement for run.Run.start: the Run over `core`, every optional permission granted."""
    def start(cls, cfg, kubeconfig, context, _run_id):
        api = kube.CountingApiClient(k8s.Configuration(), kube.RateLimiter(1000, 1000))
        cluster = kube.Cluster(api, core, None, "stand-in cluster", 1.0)
        return cls(cfg, cluster, run_id, "v1.34.0", {"nodes/proxy": True, "resourceslices": True,
                                                    "deviceclasses": True})
    return classmethod(start)
