"""`make cleanup`'s liveness rule (gpuconform/cleanup.py decide/plan): namespaces as the API serves them plus the
time now -> delete or keep, and why."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from gpuconform import cleanup, timing

NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


def ns(name: str, *, heartbeat: timedelta | None = None, ended: timedelta | None = None,
       created: timedelta = timedelta(minutes=10), phase: str = "Active") -> dict:
    notes = {}
    if heartbeat is not None:
        notes[cleanup.HEARTBEAT] = cleanup.stamp(NOW - heartbeat)
    if ended is not None:
        notes[cleanup.ENDED] = cleanup.stamp(NOW - ended)
    # creationTimestamp as the Python client serialises it (isoformat with an offset)
    return {"metadata": {"name": name, "annotations": notes, "creationTimestamp": (NOW - created).isoformat(),
                         "labels": {"app.kubernetes.io/part-of": "gpuconform"}},
            "status": {"phase": phase}}


def test_a_live_run_is_kept():
    d = cleanup.decide(ns("gpuconform-a", heartbeat=timedelta(seconds=20)), NOW)
    assert not d.delete and "alive" in d.why and "20s ago" in d.why


def test_a_run_whose_heartbeat_stopped_is_deleted():
    d = cleanup.decide(ns("gpuconform-a", heartbeat=timedelta(seconds=timing.HEARTBEAT_STALE_S + 1)), NOW)
    assert d.delete and "no heartbeat for" in d.why


def test_the_stale_limit_is_the_boundary():
    at = cleanup.decide(ns("a", heartbeat=timedelta(seconds=timing.HEARTBEAT_STALE_S)), NOW)
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


def test_without_a_heartbeat_the_age_decides():
    young = cleanup.decide(ns("old-version-a", created=timedelta(minutes=30)), NOW)
    old = cleanup.decide(ns("old-version-b", created=timedelta(seconds=timing.NO_HEARTBEAT_MAX_AGE_S + 60)), NOW)
    assert not young.delete and "older suite version" in young.why and "--force" in young.why
    assert old.delete and "older suite version" in old.why


def test_a_heartbeat_from_a_clock_ahead_of_ours_counts_as_alive():
    d = cleanup.decide(ns("gpuconform-a", heartbeat=timedelta(seconds=-40)), NOW)
    assert not d.delete


def test_an_unreadable_heartbeat_falls_back_to_the_age():
    n = ns("gpuconform-a", created=timedelta(hours=3))
    n["metadata"]["annotations"][cleanup.HEARTBEAT] = "yesterday"
    assert cleanup.decide(n, NOW).delete
    n["metadata"].pop("creationTimestamp")
    d = cleanup.decide(n, NOW)
    assert not d.delete and "cannot tell" in d.why


def test_plan_lists_deletions_first_with_a_reason_each():
    out = cleanup.plan([ns("b-live", heartbeat=timedelta(seconds=3)), ns("a-dead", heartbeat=timedelta(hours=1)),
                        ns("c-ended", ended=timedelta(minutes=2))], NOW)
    assert [(d.namespace, d.delete) for d in out] == [("a-dead", True), ("c-ended", True), ("b-live", False)]
    assert all(d.why for d in out)


def test_stamps_round_trip_in_utc():
    t = datetime(2025, 3, 1, 13, 0, 0, tzinfo=timezone(timedelta(hours=1)))
    assert cleanup.stamp(t) == "2025-03-01T12:00:00Z"
    assert cleanup.parse_time("2025-03-01T12:00:00Z") == NOW
    assert cleanup.parse_time("2025-03-01T12:00:00+00:00") == NOW
    assert cleanup.parse_time("") is None and cleanup.parse_time(None) is None


def test_the_command_deletes_only_what_is_not_alive_and_says_why(tmp_path, capsys):
    """`make cleanup` against a local stand-in API server: three namespaces, one of them a live run's."""
    from test_kube import Server

    now = datetime.now(timezone.utc)
    items = [{"metadata": {"name": n, "annotations": a, "creationTimestamp": cleanup.stamp(now - timedelta(hours=2)),
                           "labels": {"app.kubernetes.io/part-of": "gpuconform"}}, "status": {"phase": "Active"}}
             for n, a in [("gpuconform-live", {cleanup.HEARTBEAT: cleanup.stamp(now - timedelta(seconds=10))}),
                          ("gpuconform-dead", {cleanup.HEARTBEAT: cleanup.stamp(now - timedelta(hours=1))}),
                          ("gpuconform-gone", {cleanup.ENDED: cleanup.stamp(now)})]]
    srv = Server({"/api/v1/namespaces": [(200, {"kind": "NamespaceList", "apiVersion": "v1", "metadata": {},
                                                "items": items}, 0)],
                  "DELETE /api/v1/namespaces/gpuconform-gone": [(404, {"kind": "Status", "code": 404}, 0)]})
    try:
        assert cleanup.main(["--kubeconfig", srv.kubeconfig(tmp_path)]) == 0
    finally:
        srv.close()
    out = capsys.readouterr().out
    assert "delete gpuconform-dead: no heartbeat for 60m (limit 5m): its run is gone" in out
    assert "keep   gpuconform-live: its run is alive" in out
    assert "gone   gpuconform-gone" in out and "deleted 1 namespace(s), kept 1" in out
    assert [h for h in srv.hits if h.startswith("DELETE")] == ["DELETE /api/v1/namespaces/gpuconform-dead",
                                                               "DELETE /api/v1/namespaces/gpuconform-gone"]
