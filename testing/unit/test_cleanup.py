"""`make cleanup`'s rules (gpuconform/cleanup.py run_of/decide/plan): namespaces as the API serves them plus the
time now -> not ours (left alone), or delete or keep, and why. The foreign namespaces are recorded as they are
met: the suite's own gpuconform-system as kustomize `labels:` over manifests/ labels it, a tools namespace made
from a copy of a run namespace, another team's namespace that uses the part-of label."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest

from gpuconform import cleanup, timing

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


RUN = "20250301-110000-a1b2c3"  # a run id as gpuconform/pytest_plugin/session.py makes them
PART_OF = {"app.kubernetes.io/part-of": "gpuconform"}


def ns(name: str = f"gpuconform-{RUN}", *, heartbeat: timedelta | None = None, ended: timedelta | None = None,
       created: timedelta = timedelta(minutes=10), phase: str = "Active", run: str | None = None,
       labels: dict | None = None) -> dict:
    """A namespace as a run makes it (gpuconform/pytest_plugin/namespaces.py): the run label holds the id its name carries
    (`run` overrides it; `labels` replaces the labels)."""
    notes = {}
    if heartbeat is not None:
        notes[cleanup.HEARTBEAT] = cleanup.stamp(NOW - heartbeat)
    if ended is not None:
        notes[cleanup.ENDED] = cleanup.stamp(NOW - ended)
    if run is None:
        run = name.removeprefix("gpuconform-").removesuffix("-node")
    # creationTimestamp as the Python client serialises it (isoformat with an offset)
    return {"metadata": {"name": name, "annotations": notes, "creationTimestamp": (NOW - created).isoformat(),
                         "labels": labels if labels is not None else {**PART_OF, "gpuconform.dev/run": run}},
            "status": {"phase": phase}}


def test_a_live_run_is_kept():
    d = cleanup.decide(ns("gpuconform-a", heartbeat=timedelta(seconds=20)), NOW)
    assert not d.delete and "alive" in d.why and "20s ago" in d.why


def test_a_run_whose_heartbeat_stopped_is_deleted():
    d = cleanup.decide(ns("gpuconform-a", heartbeat=timedelta(seconds=timing.HEARTBEAT_STALE_S + 1)), NOW)
    assert d.delete and "no heartbeat for" in d.why


def test_the_stale_limit_is_the_boundary():
    at = cleanup.decide(ns(heartbeat=timedelta(seconds=timing.HEARTBEAT_STALE_S)), NOW)
    assert not at.delete


def test_an_ended_run_kept_for_inspection_is_deleted_at_once():
    d = cleanup.decide(ns("gpuconform-a", heartbeat=timedelta(seconds=5), ended=timedelta(seconds=5)), NOW)
    assert d.delete and "ended" in d.why


def test_force_deletes_a_live_run():
    d = cleanup.decide(ns("gpuconform-a", heartbeat=timedelta(seconds=5)), NOW, force=True)
    assert d.delete and d.why == "--force"


def test_a_namespace_being_deleted_is_left_alone_even_with_force():
    d = cleanup.decide(ns("gpuconform-a", heartbeat=timedelta(hours=5), phase="Terminating"), NOW, force=True)
    assert not d.delete and "already being deleted" in d.why


def test_without_a_heartbeat_only_force_deletes_whatever_its_age():
    """Before: deleted once an hour old. A run stamps the heartbeat when it creates the namespace, so without
    one nothing says a run made it and is gone."""
    for created in (timedelta(minutes=30), timedelta(days=3)):
        d = cleanup.decide(ns(created=created), NOW)
        assert not d.delete and d.ours and "no heartbeat annotation" in d.why and "--force" in d.why
        assert cleanup.decide(ns(created=created), NOW, force=True).delete


def test_a_heartbeat_from_a_clock_ahead_of_ours_counts_as_alive():
    d = cleanup.decide(ns("gpuconform-a", heartbeat=timedelta(seconds=-40)), NOW)
    assert not d.delete


def test_an_unreadable_heartbeat_counts_as_none():
    n = ns("gpuconform-a", created=timedelta(hours=3))
    n["metadata"]["annotations"][cleanup.HEARTBEAT] = "yesterday"
    d = cleanup.decide(n, NOW)
    assert not d.delete and "unreadable ('yesterday') heartbeat" in d.why
    assert cleanup.decide(n, NOW, force=True).delete


def test_plan_lists_deletions_first_with_a_reason_each():
    out = cleanup.plan([ns("gpuconform-b-live", heartbeat=timedelta(seconds=3)),
                        ns("gpuconform-a-dead", heartbeat=timedelta(hours=1)),
                        ns("gpuconform-system", labels=PART_OF, created=timedelta(days=3)),
                        ns("gpuconform-c-ended", heartbeat=timedelta(seconds=3), ended=timedelta(minutes=2))], NOW)
    assert [(d.namespace, d.delete, d.ours) for d in out] == [
        ("gpuconform-a-dead", True, True), ("gpuconform-c-ended", True, True), ("gpuconform-b-live", False, True),
        ("gpuconform-system", False, False)]
    assert all(d.why for d in out)


# ---------------------------------------------------------------- only a run's own namespaces (issue 18)

# manifests/namespace.yaml's namespace after kustomize `labels:` (or commonLabels) over manifests/: the part-of
# label on the namespace that holds the suite's ServiceAccount, Job and ConfigMap; made days ago, no heartbeat.
SYSTEM = ns("gpuconform-system", created=timedelta(days=3), labels={
    **PART_OF, "app.kubernetes.io/name": "gpuconform", "pod-security.kubernetes.io/enforce": "restricted"})
# A tools namespace made from a copy of a run's namespace (`kubectl get ns gpuconform-<run> -o yaml`, renamed):
# run label, stale heartbeat and all; only its name is not the run's.
TOOLS = ns("gpuconform-tools", run=RUN, heartbeat=timedelta(days=2), created=timedelta(days=2))
# Another team's namespace that uses the part-of label, stamped `ended` by their own tooling.
TEAM = ns("team-a-prod", labels={**PART_OF, "gpuconform.dev/run": "team-a"}, heartbeat=timedelta(hours=2),
          ended=timedelta(hours=2), created=timedelta(days=30))
# A run's namespace whose run label names another run (a hand-edited copy, or a label changed after the fact).
MISMATCH = ns(f"gpuconform-{RUN}", run="20250301-110000-ffffff", heartbeat=timedelta(hours=1))
# A run label that no run id can be (label values allow upper case, '_' and '.'; names do not).
ODD_LABEL = ns("gpuconform-Tools_v1", run="Tools_v1", heartbeat=timedelta(hours=1))
FOREIGN = {"gpuconform-system": SYSTEM, "gpuconform-tools": TOOLS, "team-a-prod": TEAM,
           "mismatched run label": MISMATCH, "odd run label": ODD_LABEL}


@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
@pytest.mark.parametrize("case", list(FOREIGN))
def test_a_namespace_that_is_not_a_runs_is_left_alone_even_with_force(case, force):
    """Before: selected by the part-of label alone, and deleted (no heartbeat for an hour, a stale heartbeat, or
    `ended`; any of them with --force)."""
    d = cleanup.decide(FOREIGN[case], NOW, force=force)
    assert not d.delete and not d.ours and d.why.startswith("not a gpuconform run's namespace: "), d


def test_what_is_not_a_runs_says_why():
    why = {k: cleanup.decide(v, NOW).why for k, v in FOREIGN.items()}
    assert "no gpuconform.dev/run label" in why["gpuconform-system"]
    assert f"does not match its gpuconform.dev/run label '{RUN}'" in why["gpuconform-tools"]
    assert f"gpuconform-{RUN} and gpuconform-{RUN}-node" in why["gpuconform-tools"]
    assert "does not match" in why["mismatched run label"]
    assert "'Tools_v1' is not a run id" in why["odd run label"]
    assert "no app.kubernetes.io/part-of=gpuconform label" in cleanup.decide(
        ns(labels={"gpuconform.dev/run": RUN}), NOW).why


@pytest.mark.parametrize("name", [f"gpuconform-{RUN}", f"gpuconform-{RUN}-node", "gpuconform-live-3f9a1c"])
def test_a_runs_own_stale_namespaces_are_still_deleted(name):
    d = cleanup.decide(ns(name, heartbeat=timedelta(hours=1)), NOW)
    assert d.ours and d.delete and "no heartbeat for 60m" in d.why
    assert cleanup.run_of(ns(name))[0] == name.removeprefix("gpuconform-").removesuffix("-node")


def test_stamps_round_trip_in_utc():
    t = datetime(2025, 3, 1, 13, 0, 0, tzinfo=timezone(timedelta(hours=1)))
    assert cleanup.stamp(t) == "2025-03-01T12:00:00Z"
    assert cleanup.parse_time("2025-03-01T12:00:00Z") == NOW
    assert cleanup.parse_time("2025-03-01T12:00:00+00:00") == NOW
    assert cleanup.parse_time("") is None and cleanup.parse_time(None) is None


@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
def test_the_command_deletes_only_what_is_not_alive_and_says_why(tmp_path, capsys, force):
    """`make cleanup` against a local stand-in API server: a live run's namespace, a dead one's, an ended one's,
    one without a heartbeat, and gpuconform-system as kustomize labels it (listed by the part-of label)."""
    from test_kube import Server

    now = datetime.now(timezone.utc)
    runs = {"gpuconform-live": {cleanup.HEARTBEAT: cleanup.stamp(now - timedelta(seconds=10))},
            "gpuconform-dead": {cleanup.HEARTBEAT: cleanup.stamp(now - timedelta(hours=1))},
            "gpuconform-gone": {cleanup.HEARTBEAT: cleanup.stamp(now), cleanup.ENDED: cleanup.stamp(now)},
            "gpuconform-bare-node": {}}
    items = [{"metadata": {"name": n, "annotations": a, "creationTimestamp": cleanup.stamp(now - timedelta(hours=2)),
                           "labels": {"app.kubernetes.io/part-of": "gpuconform",
                                      "gpuconform.dev/run": n.removeprefix("gpuconform-").removesuffix("-node")}},
              "status": {"phase": "Active"}} for n, a in runs.items()]
    items.append({"metadata": {"name": "gpuconform-system", "creationTimestamp": cleanup.stamp(now - timedelta(days=3)),
                               "labels": {"app.kubernetes.io/part-of": "gpuconform"}}, "status": {"phase": "Active"}})
    srv = Server({"/api/v1/namespaces": [(200, {"kind": "NamespaceList", "apiVersion": "v1", "metadata": {},
                                                "items": items}, 0)],
                  "DELETE /api/v1/namespaces/gpuconform-gone": [(404, {"kind": "Status", "code": 404}, 0)]})
    try:
        assert cleanup.main(["--kubeconfig", srv.kubeconfig(tmp_path)] + (["--force"] if force else [])) == 0
    finally:
        srv.close()
    out = capsys.readouterr().out
    assert ("leave  gpuconform-system: not a gpuconform run's namespace: no gpuconform.dev/run label: not a run's "
            "namespace") in out
    assert "gone   gpuconform-gone" in out
    deletes = sorted(h for h in srv.hits if h.startswith("DELETE"))
    if force:
        assert "deleted 3 namespace(s), kept 0, left 1 alone (not a run's)" in out
        assert deletes == [f"DELETE /api/v1/namespaces/gpuconform-{n}" for n in ("bare-node", "dead", "gone", "live")]
        return
    assert "delete gpuconform-dead: no heartbeat for 60m (limit 5m): its run is gone" in out
    assert "keep   gpuconform-live: its run is alive" in out
    assert "keep   gpuconform-bare-node: no heartbeat annotation" in out
    assert "deleted 1 namespace(s), kept 2, left 1 alone (not a run's)" in out
    assert deletes == ["DELETE /api/v1/namespaces/gpuconform-dead", "DELETE /api/v1/namespaces/gpuconform-gone"]


# ---------------------------------------------------------------- server time, not a runner's (issue 29, R3)

def beaten(name: str, *, annotation: timedelta, server: timedelta | None, now: datetime = NOW) -> dict:
    """A run's namespace whose heartbeat annotation says `annotation` ago (the runner's clock) and whose last
    heartbeat write the API server stored `server` ago (managedFields, as the Python client serialises it)."""
    n = ns(name)
    n["metadata"]["annotations"][cleanup.HEARTBEAT] = cleanup.stamp(now - annotation)
    if server is not None:
        n["metadata"]["managedFields"] = [
            {"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "OpenAPI-Generator", "operation": "Update",
             "time": (now - server).isoformat(),
             "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, f"f:{cleanup.HEARTBEAT}": {}},
                                         "f:labels": {".": {}, "f:kubernetes.io/metadata.name": {}}}}},
            {"apiVersion": "v1", "fieldsType": "FieldsV1", "manager": "kubectl-label", "operation": "Update",
             "time": (now - timedelta(days=2)).isoformat(), "fieldsV1": {"f:metadata": {"f:labels": {"f:x": {}}}}}]
    return n


def test_a_slow_runners_live_run_is_kept():
    """The review's repro: a runner 6 minutes slow stamps heartbeats that read 6 minutes old; the API server
    stored the last one 20 s ago. Was deleted ('no heartbeat for 6m')."""
    d = cleanup.decide(beaten(f"gpuconform-{RUN}", annotation=timedelta(minutes=6), server=timedelta(seconds=20)), NOW)
    assert not d.delete, d.why
    assert d.why == "its run is alive (heartbeat 20s ago by the API server's clock); --force deletes it anyway"


def test_a_dead_run_whose_runner_was_ahead_is_deleted():
    """A runner 3 hours ahead stamped a heartbeat 'in the future'; the server stored it an hour ago: gone (was kept
    until --force)."""
    d = cleanup.decide(beaten(f"gpuconform-{RUN}", annotation=timedelta(hours=-2), server=timedelta(hours=1)), NOW)
    assert d.delete and d.why == "no heartbeat for 60m (limit 5m): its run is gone (by the API server's clock)"


def test_without_the_servers_record_the_annotation_decides_and_says_whose_clock():
    d = cleanup.decide(beaten(f"gpuconform-{RUN}", annotation=timedelta(minutes=6), server=None), NOW)
    assert d.delete and d.why.endswith("(by the run's own clock (no server time of it))")
    at, clock = cleanup.heartbeat_at(beaten("x", annotation=timedelta(minutes=6), server=timedelta(seconds=5)))
    assert at == NOW - timedelta(seconds=5) and clock == "by the API server's clock"


def test_server_time_reads_the_date_header():
    assert cleanup.server_time({"Date": "Sat, 01 Mar 2025 12:00:00 GMT"}) == NOW
    assert cleanup.server_time({"Date": "yesterday"}) is None
    assert cleanup.server_time({}) is None and cleanup.server_time(None) is None


def test_the_command_judges_by_the_servers_date_not_this_machines_clock(tmp_path, capsys, monkeypatch):
    """This machine's clock 10 minutes behind the API server's (its Date header): a run whose server-stored beat is
    8 minutes old by the server is gone, though this machine's clock would call it 'in the future'; one 30 s old
    is alive."""
    import http.server

    from test_kube import Server

    server_now = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(minutes=10)
    monkeypatch.setattr(http.server.BaseHTTPRequestHandler, "date_time_string",
                        lambda self, timestamp=None: server_now.strftime("%a, %d %b %Y %H:%M:%S GMT"))
    items = [beaten("gpuconform-old", annotation=timedelta(minutes=8), server=timedelta(minutes=8), now=server_now),
             beaten("gpuconform-live", annotation=timedelta(minutes=10), server=timedelta(seconds=30), now=server_now)]
    srv = Server({"/api/v1/namespaces": [(200, {"kind": "NamespaceList", "apiVersion": "v1", "metadata": {},
                                                "items": items}, 0)]})
    try:
        assert cleanup.main(["--kubeconfig", srv.kubeconfig(tmp_path)]) == 0
    finally:
        srv.close()
    out = capsys.readouterr().out
    assert re.search(r"note   this machine's clock is (599|600)s behind the API server's: ages are by the server's", out)
    assert "delete gpuconform-old: no heartbeat for 8m (limit 5m): its run is gone (by the API server's clock)" in out
    assert "keep   gpuconform-live: its run is alive (heartbeat 30s ago by the API server's clock)" in out
    assert sorted(h for h in srv.hits if h.startswith("DELETE")) == ["DELETE /api/v1/namespaces/gpuconform-old"]
