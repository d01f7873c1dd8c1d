"""`make cleanup` (`python -m gpuconform.cleanup [--force] [--dry-run]`): deletes the namespaces of gpuconform
runs that are no longer alive, and says what it deletes and what it leaves, and why.

Ours first (`run_of`): it lists the namespaces labelled app.kubernetes.io/part-of=gpuconform, but that label is
generic (kustomize `labels:` over manifests/ puts it on gpuconform-system itself, and any team may use it), so a
namespace is a run's only when it also carries the run label gpuconform.dev/run=<run id> and its name is the one
a run gives it, gpuconform-<run id> or gpuconform-<run id>-node (gpuconform/pytest_plugin/namespaces.py ensure). Any other is
left alone and named, --force or not.

Liveness (`decide`, a pure function unit-tested in testing/unit/test_cleanup.py): a run stamps its namespaces
with a heartbeat annotation (gpuconform.dev/heartbeat, an RFC 3339 UTC time) when it creates them and
refreshes it every HEARTBEAT_EVERY_S (gpuconform/pytest_plugin/namespaces.py); when it ends keeping a namespace for inspection
(keepNamespaceOnFailure) it stamps gpuconform.dev/ended. A run's namespace

- being deleted already (Terminating) is left alone;
- with --force is deleted;
- without a readable heartbeat is kept: a run stamps one when it creates the namespace, so nothing says this
  one was made by a run that is gone (--force deletes it);
- stamped `ended` is deleted (its run is over);
- with a heartbeat older than HEARTBEAT_STALE_S is deleted (its run was killed or lost the cluster); a newer
  one means the run is alive: kept.

Times are the API server's, never a runner's or this machine's (issue 29, review 2026-12b R3: a runner 6 minutes
slow stamped heartbeats that looked 6 minutes old, and its live run was deleted): the heartbeat's time is when the
API server stored the write of the annotation (`heartbeat_at`: the managedFields entry that owns it, which the
server stamps), and now is the `Date` of the API server's answer to the listing (`server_time`). Only where the
server recorded no such entry is the annotation's own time (the runner's clock) read, and the reason says so;
only where the answer has no `Date` is this machine's clock used, and the command says so.
HEARTBEAT_STALE_S (10 missed beats) is the limit. Exit status: 0, or 7 when the cluster cannot be read (as
pre-flight).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass
from datetime import datetime, timezone

from . import timing
from .pods import HEARTBEAT, PART_OF, RUN_LABEL, SUITE

ENDED = "gpuconform.dev/ended"
SELECTOR = f"{PART_OF}={SUITE}"
PREFIX = "gpuconform-"  # a run's namespaces: PREFIX + run id, and that + NODE_SUFFIX (gpuconform/pytest_plugin/namespaces.py)
NODE_SUFFIX = "-node"
# A run id as it can appear in a namespace name (a DNS label: lower-case letters, digits, '-' inside), e.g. the
# default 20250301-120000-a1b2c3 (gpuconform/pytest_plugin/session.py) or one given with --gpuconform-run-id.
RUN_ID = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


@dataclass(frozen=True)
class Decision:
    namespace: str
    delete: bool
    why: str
    ours: bool = True  # False: not a gpuconform run's namespace (left alone whatever the flags)


def namespace_names(run_id: str) -> tuple[str, str]:
    """The names a run gives its namespaces: (restricted, privileged node-probe)."""
    return PREFIX + run_id, PREFIX + run_id + NODE_SUFFIX


def run_of(ns: dict) -> tuple[str | None, str]:
    """(the run id, "") when the namespace is a gpuconform run's: part-of label, run label holding a run id, and
    the name a run with that id gives its namespaces; else (None, why not)."""
    meta = ns.get("metadata") or {}
    name, labels = meta.get("name") or "", meta.get("labels") or {}
    if labels.get(PART_OF) != SUITE:
        return None, f"no {PART_OF}={SUITE} label"
    run = labels.get(RUN_LABEL)
    if not run:
        return None, f"no {RUN_LABEL} label: not a run's namespace"
    if not isinstance(run, str) or not RUN_ID.fullmatch(run):
        return None, f"its {RUN_LABEL} label {run!r} is not a run id"
    if name not in namespace_names(run):
        return None, (f"its name does not match its {RUN_LABEL} label {run!r} (a run's namespaces are "
                      f"{' and '.join(namespace_names(run))})")
    return run, ""


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


def heartbeat_at(ns: dict) -> tuple[datetime | None, str]:
    """When the run last wrote its heartbeat annotation, and by which clock: the API server's time of that write
    (the `time` of the managedFields entry that owns the annotation; the server sets it on every write that changes
    the object), else the annotation's own value (the runner's clock), else None."""
    meta = ns.get("metadata") or {}
    key = f"f:{HEARTBEAT}"
    times = [parse_time(m.get("time")) for m in meta.get("managedFields") or []
             if key in (((m.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:annotations") or {})]
    known = [t for t in times if t is not None]
    if known:
        return max(known), "by the API server's clock"
    return parse_time((meta.get("annotations") or {}).get(HEARTBEAT)), "by the run's own clock (no server time of it)"


def server_time(headers: object) -> datetime | None:
    """The API server's clock from a response's `Date` header (RFC 7231, whole seconds), or None."""
    from email.utils import parsedate_to_datetime

    value = headers.get("Date") if hasattr(headers, "get") else None
    if not isinstance(value, str):
        return None
    try:
        t = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def _ago(seconds: float) -> str:
    s = int(max(seconds, 0))
    return f"{s}s" if s < 120 else f"{s // 60}m" if s < 7200 else f"{s // 3600}h{(s % 3600) // 60:02d}m"


def decide(ns: dict, now: datetime, force: bool = False,
           stale_after_s: float = timing.HEARTBEAT_STALE_S) -> Decision:
    """Delete or keep one namespace (a dict as the API serves it), and why. Only a run's own namespace (`run_of`)
    is ever deleted, --force included. `now` is the API server's time (`server_time`); the heartbeat's is too where
    the server recorded it (`heartbeat_at`)."""
    meta = ns.get("metadata") or {}
    name = meta.get("name", "?")
    notes = meta.get("annotations") or {}
    run, not_ours = run_of(ns)
    if run is None:
        return Decision(name, False, f"not a gpuconform run's namespace: {not_ours}", ours=False)
    if (ns.get("status") or {}).get("phase") == "Terminating":
        return Decision(name, False, "already being deleted")
    if force:
        return Decision(name, True, "--force")
    beat = parse_time(notes.get(HEARTBEAT))
    if beat is None:
        seen = "no" if notes.get(HEARTBEAT) is None else f"an unreadable ({str(notes[HEARTBEAT])[:40]!r})"
        return Decision(name, False, f"{seen} heartbeat annotation ({HEARTBEAT}), which a run stamps at creation: "
                                     f"nothing says its run is gone; --force deletes it")
    ended = parse_time(notes.get(ENDED))
    if ended is not None:
        return Decision(name, True, f"its run ended {_ago((now - ended).total_seconds())} ago (kept for inspection)")
    beat_at, clock = heartbeat_at(ns)
    age = (now - (beat_at or beat)).total_seconds()
    if age > stale_after_s:
        return Decision(name, True, f"no heartbeat for {_ago(age)} (limit {_ago(stale_after_s)}): its run is gone "
                                    f"({clock})")
    return Decision(name, False, f"its run is alive (heartbeat {_ago(age)} ago {clock}); --force deletes it anyway")


def plan(namespaces: list[dict], now: datetime, force: bool = False,
         stale_after_s: float = timing.HEARTBEAT_STALE_S) -> list[Decision]:
    return sorted((decide(ns, now, force, stale_after_s) for ns in namespaces),
                  key=lambda d: (not d.delete, not d.ours, d.namespace))


def main(argv: list[str] | None = None) -> int:
    from kubernetes.client.exceptions import ApiException

    from . import kube

    ap = argparse.ArgumentParser(prog="python -m gpuconform.cleanup",
                                 description="delete the namespaces of gpuconform runs that are no longer alive "
                                             "(heartbeat older than %ds, or ended); only namespaces named and labelled as a run's; "
                                             "--force: live runs' too" %
                                             timing.HEARTBEAT_STALE_S)
    ap.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    ap.add_argument("--context")
    ap.add_argument("--force", action="store_true", help="delete live runs' namespaces too, and runs' namespaces "
                                                          "without a heartbeat (never another's namespace)")
    ap.add_argument("--dry-run", action="store_true", help="print the decisions, delete nothing")
    ap.add_argument("--stale-after", type=float, default=timing.HEARTBEAT_STALE_S, metavar="SECONDS",
                    help="a run whose last heartbeat write (the API server's time) is older than this is gone "
                         f"(default %(default)g; a run beats every {timing.HEARTBEAT_EVERY_S:g} s)")
    a = ap.parse_args(argv)
    if a.stale_after <= 0:
        ap.error(f"--stale-after must be a positive number of seconds, got {a.stale_after:g}")
    try:
        cluster = kube.connect(a.kubeconfig, a.context, 5, 10, 30)
    except Exception as e:  # noqa: BLE001 - kubeconfig problems come in many types
        print(f"cleanup: [ERROR-API] cannot build a Kubernetes client: {type(e).__name__}: {e}", file=sys.stderr)
        return 7
    try:
        found, _, headers = cluster.core.list_namespace_with_http_info(label_selector=SELECTOR)
    except Exception as e:  # noqa: BLE001
        problem = kube.api_error(e, f"listing gpuconform namespaces ({cluster.source})")
        print(f"cleanup: [{problem.code}] {problem.message}", file=sys.stderr)
        return 7
    mine = datetime.now(timezone.utc)
    now = server_time(headers)
    if now is None:
        print("note   the API server's answer has no Date: ages are by this machine's clock")
    elif abs((now - mine).total_seconds()) > 5:
        print(f"note   this machine's clock is {abs((now - mine).total_seconds()):.0f}s "
              f"{'behind' if now > mine else 'ahead of'} the API server's: ages are by the server's")
    decisions = plan([kube.to_dict(cluster.api, n) for n in found.items], now or mine, a.force, a.stale_after)
    deleted, kept, foreign = [], [], []
    for d in decisions:
        if not d.ours:
            print(f"leave  {d.namespace}: {d.why}")
            foreign.append(d.namespace)
            continue
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
    print(f"deleted {len(deleted)} namespace(s), kept {len(kept)}, left {len(foreign)} alone (not a run's)"
          + (" (dry run)" if a.dry_run else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
