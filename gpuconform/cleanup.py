"""`make cleanup` (`python -m gpuconform.cleanup [--force] [--dry-run]`): deletes the namespaces of gpuconform
runs that are no longer alive, and says what it deletes and what it leaves, and why.

Liveness (`decide`, a pure function unit-tested in testing/unit/test_cleanup.py): a run stamps its namespaces
with a heartbeat annotation (gpuconform.dev/heartbeat, an RFC 3339 UTC time) when it creates them and
refreshes it every HEARTBEAT_EVERY_S (fixtures/namespaces.py); when it ends keeping a namespace for inspection
(keepNamespaceOnFailure) it stamps gpuconform.dev/ended. A namespace labelled app.kubernetes.io/part-of=gpuconform

- being deleted already (Terminating) is left alone;
- with --force is deleted;
- stamped `ended` is deleted (its run is over);
- with a heartbeat older than HEARTBEAT_STALE_S is deleted (its run was killed or lost the cluster); a newer
  one means the run is alive: kept;
- without a heartbeat (a suite version before heartbeats) is deleted once older than NO_HEARTBEAT_MAX_AGE_S.

Times are compared with this machine's clock; HEARTBEAT_STALE_S (10 missed beats) absorbs modest clock skew
between the run's machine and this one. Exit status: 0, or 7 when the cluster cannot be read (as pre-flight).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from datetime import datetime, timezone

from . import timing
from .pods import PART_OF, SUITE

HEARTBEAT = "gpuconform.dev/heartbeat"
ENDED = "gpuconform.dev/ended"
SELECTOR = f"{PART_OF}={SUITE}"


@dataclass(frozen=True)
class Decision:
    namespace: str
    delete: bool
    why: str


def stamp(t: datetime | None = None) -> str:
    """A time as the annotations carry it: RFC 3339 in UTC, whole seconds."""
    return (t or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 time (annotation or creationTimestamp as the client serialises it), or None."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        t = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def _ago(seconds: float) -> str:
    s = int(max(seconds, 0))
    return f"{s}s" if s < 120 else f"{s // 60}m" if s < 7200 else f"{s // 3600}h{(s % 3600) // 60:02d}m"


def decide(ns: dict, now: datetime, force: bool = False, stale_after_s: float = timing.HEARTBEAT_STALE_S,
           no_heartbeat_max_age_s: float = timing.NO_HEARTBEAT_MAX_AGE_S) -> Decision:
    """Delete or keep one gpuconform namespace (a dict as the API serves it), and why."""
    meta = ns.get("metadata") or {}
    name = meta.get("name", "?")
    notes = meta.get("annotations") or {}
    if (ns.get("status") or {}).get("phase") == "Terminating":
        return Decision(name, False, "already being deleted")
    if force:
        return Decision(name, True, "--force")
    ended = parse_time(notes.get(ENDED))
    if ended is not None:
        return Decision(name, True, f"its run ended {_ago((now - ended).total_seconds())} ago (kept for inspection)")
    beat = parse_time(notes.get(HEARTBEAT))
    if beat is not None:
        age = (now - beat).total_seconds()
        if age > stale_after_s:
            return Decision(name, True, f"no heartbeat for {_ago(age)} (limit {_ago(stale_after_s)}): its run is gone")
        return Decision(name, False, f"its run is alive (heartbeat {_ago(age)} ago); --force deletes it anyway")
    created = parse_time(meta.get("creationTimestamp"))
    if created is None:
        return Decision(name, False, "no heartbeat and no creation time: cannot tell; --force deletes it")
    age = (now - created).total_seconds()
    if age > no_heartbeat_max_age_s:
        return Decision(name, True, f"no heartbeat (older suite version), created {_ago(age)} ago")
    return Decision(name, False, f"no heartbeat (older suite version), created {_ago(age)} ago: kept until "
                    f"{_ago(no_heartbeat_max_age_s)} old; --force deletes it")


def plan(namespaces: list[dict], now: datetime, force: bool = False) -> list[Decision]:
    return sorted((decide(ns, now, force) for ns in namespaces), key=lambda d: (not d.delete, d.namespace))


def main(argv: list[str] | None = None) -> int:
    from kubernetes.client.exceptions import ApiException

    from . import kube

    ap = argparse.ArgumentParser(prog="python -m gpuconform.cleanup",
                                 description="delete the namespaces of gpuconform runs that are no longer alive "
                                             "(heartbeat older than %ds, or ended); --force: every one" %
                                             timing.HEARTBEAT_STALE_S)
    ap.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    ap.add_argument("--context")
    ap.add_argument("--force", action="store_true", help="delete live runs' namespaces too")
    ap.add_argument("--dry-run", action="store_true", help="print the decisions, delete nothing")
    a = ap.parse_args(argv)
    try:
        cluster = kube.connect(a.kubeconfig, a.context, 5, 10, 30)
    except Exception as e:  # noqa: BLE001 - kubeconfig problems come in many types
        print(f"cleanup: [ENV-API] cannot build a Kubernetes client: {type(e).__name__}: {e}", file=sys.stderr)
        return 7
    try:
        found = cluster.core.list_namespace(label_selector=SELECTOR)
    except Exception as e:  # noqa: BLE001
        problem = kube.api_error(e, f"listing gpuconform namespaces ({cluster.source})")
        print(f"cleanup: [{problem.code}] {problem.message}", file=sys.stderr)
        return 7
    decisions = plan([kube.to_dict(cluster.api, n) for n in found.items], datetime.now(timezone.utc), a.force)
    deleted, kept = [], []
    for d in decisions:
        if not d.delete:
            print(f"keep   {d.namespace}: {d.why}")
            kept.append(d.namespace)
            continue
        if a.dry_run:
            print(f"would delete {d.namespace}: {d.why}")
            continue
        try:
            cluster.core.delete_namespace(d.namespace, propagation_policy="Background")
            print(f"delete {d.namespace}: {d.why}")
            deleted.append(d.namespace)
        except ApiException as e:
            if e.status == 404:
                print(f"gone   {d.namespace}: deleted meanwhile")
                continue
            print(f"failed {d.namespace}: {kube.api_error(e, 'deleting it').message}")
        except Exception as e:  # noqa: BLE001 - report and go on with the others
            print(f"failed {d.namespace}: {kube.api_error(e, 'deleting it').message}")
    print(f"deleted {len(deleted)} namespace(s), kept {len(kept)}" + (" (dry run)" if a.dry_run else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
