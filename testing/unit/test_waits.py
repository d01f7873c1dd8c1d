"""The pod wait engine's step function (gpuconform/waits.py) on recorded pod states."""

from gpuconform import pods, waits
from gpuconform import verdicts


def pod(name, phase="Pending", **status):
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"nodeSelector": {"kubernetes.io/hostname": "n1"}},
            "status": {"phase": phase, **status}}


UNSCHEDULABLE = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": "0/4 nodes are available: 1 Insufficient nvidia.com/gpu."}]}
IMAGE = {"containerStatuses": [{"name": "probe", "image": "x", "state": {"waiting": {"reason": "ErrImagePull"}}}]}


def classify(p):
    return verdicts.classify(p, [])


def test_done_when_every_pod_is_there():
    spec = waits.Spec(("a", "b"), "done", 60)
    d = waits.step(spec, waits.Progress(0), {"a": pod("a", "Succeeded"), "b": pod("b", "Succeeded")}, set(), 1,
                   classify)
    assert d.kind == "done" and d.final


def test_running_is_enough_for_until_running_but_not_for_done():
    states = {"a": pod("a", "Running")}
    assert waits.step(waits.Spec(("a",), "running", 60), waits.Progress(0), states, set(), 1, classify).kind == "done"
    d = waits.step(waits.Spec(("a",), "done", 60), waits.Progress(0), states, set(), 1, classify)
    assert d.kind == "wait" and d.wake_at == 60


def test_not_created_yet_waits_then_times_out():
    spec = waits.Spec(("a",), "done", 10)
    assert waits.step(spec, waits.Progress(0), {"a": None}, set(), 5, classify).kind == "wait"
    assert waits.step(spec, waits.Progress(0), {"a": None}, set(), 10, classify).kind == "timeout"


def test_allowed_scheduler_verdict_is_final_at_once():
    """Burst's pod N+1: the scheduler's Unschedulable verdict ends the wait without any grace or timeout."""
    spec = waits.Spec(("extra",), "running", 120, allow=("SKIP-F07-BUSY",))
    d = waits.step(spec, waits.Progress(0), {"extra": pod("extra", **UNSCHEDULABLE)}, set(), 0.1, classify)
    assert d.kind == "allowed" and d.problem.code == "SKIP-F07-BUSY"


def test_problem_on_a_pending_pod_gets_the_grace_then_is_a_verdict():
    spec = waits.Spec(("a",), "done", 120)
    prog = waits.Progress(0)
    states = {"a": pod("a", **IMAGE)}
    d = waits.step(spec, prog, states, set(), 1, classify)
    assert d.kind == "wait" and d.wake_at == 1 + waits.PENDING_GRACE_S
    d = waits.step(spec, prog, states, set(), 1 + waits.PENDING_GRACE_S, classify)
    assert d.kind == "problem" and d.problem.code == "ERROR-F14-IMAGE-PULL"


def test_a_problem_that_clears_restarts_the_grace():
    spec = waits.Spec(("a",), "done", 120)
    prog = waits.Progress(0)
    waits.step(spec, prog, {"a": pod("a", **IMAGE)}, set(), 1, classify)
    waits.step(spec, prog, {"a": pod("a")}, set(), 2, classify)  # pulled after a retry
    d = waits.step(spec, prog, {"a": pod("a", **IMAGE)}, set(), 9.5, classify)
    assert d.kind == "wait"


def test_terminal_problem_is_judged_at_once():
    spec = waits.Spec(("a",), "done", 120)
    p = pod("a", "Failed", reason="UnexpectedAdmissionError", message="Allocate failed")
    d = waits.step(spec, waits.Progress(0), {"a": p}, set(), 0.5, classify)
    assert d.kind == "problem" and d.problem.code == "FAIL-F05-UNEXPECTED-ADMISSION"


def test_deleted_during_the_wait_ends_it():
    spec = waits.Spec(("a",), "done", 120)
    d = waits.step(spec, waits.Progress(0), {"a": None}, {"a"}, 3, classify)
    assert d.kind == "deleted" and "deleted during the wait" in d.problem.message


def test_waiting_on_lists_the_pods_not_there_yet():
    spec = waits.Spec(("a", "b", "c"), "running", 60)
    assert waits.waiting_on(spec, {"a": pod("a", "Running"), "b": None, "c": pod("c")}) == ["b", "c"]


def test_needs_events_only_when_the_scheduler_gave_no_message():
    assert not pods.needs_events(pod("a", **UNSCHEDULABLE))
    assert pods.needs_events(pod("a", conditions=[{"type": "PodScheduled", "status": "False"}]))
    assert not pods.needs_events(pod("a", "Running"))


# ---------------------------------------------------------------- the scheduler's dispatch rule

def test_dispatch_rule():
    from collections import namedtuple

    from gpuconform.pytest_plugin.scheduler import next_job as pick

    job = namedtuple("job", "node need at_end spans first", defaults=(False, False, False))

    def next_job(queue, running, cap, bound):
        return pick([job(*q) for q in queue], [job(*r) for r in running], cap, bound)

    cap = {"n1": 4, "n2": 4}
    assert next_job([("n1", 0)], [("n1", "all")], cap, 16) == 0  # no GPU: any time
    assert next_job([("n1", 1)], [("n1", 1)] * 16, cap, 16) is None  # the global bound
    assert next_job([("n1", 2)], [("n1", 1), ("n1", 1)], cap, 16) == 0  # 1 + 1 + 2 <= 4
    assert next_job([("n1", 1)], [("n1", 2), ("n1", 2)], cap, 16) is None  # 2 + 2 + 1 > 4
    assert next_job([("n1", "all")], [("n1", 1)], cap, 16) is None  # all: alone among GPU jobs
    assert next_job([("n1", 1)], [("n1", "all")], cap, 16) is None
    assert next_job([("n1", "all"), ("n1", 1)], [("n1", 1)], cap, 16) is None  # a waiting "all" is not overtaken
    assert next_job([("n1", "all"), ("n2", 1)], [("n1", 1)], cap, 16) == 1  # ... but other nodes go on
    # backfill: a fixed-size job that does not fit yet lets a later one that fits start (two free devices, one
    # held by the latency check's single samples: the two-device isolation check waits, the one-device record
    # check takes the idle device); a waiting "all" job still blocks them
    assert next_job([("n1", 2), ("n1", 1)], [("n1", 1)], {"n1": 2}, 16) == 1
    assert next_job([("n1", 2), ("n1", "all"), ("n1", 1)], [("n1", 1)], {"n1": 2}, 16) is None
    assert next_job([("n1", 2)], [], {"n1": 0}, 16) == 0  # alone on a busy node: starts (and skips itself)
    assert next_job([("n1", 1)], [("n1", 1)], {"n1": 1}, 16) is None
    # at_end: once nothing else of its node is queued or running; it blocks nobody meanwhile
    assert next_job([("n1", 0, True)], [("n1", 0)], cap, 16) is None
    assert next_job([("n1", 0, True), ("n1", 1)], [], cap, 16) == 1
    assert next_job([("n1", 0, True), ("n2", 0, True)], [("n1", 1)], cap, 16) == 1
    assert next_job([("n1", 0, True)], [("n2", "all")], cap, 16) == 0
    assert next_job([("n1", 0, True), ("n1", 0, True)], [], cap, 16) == 0  # two at_end jobs never wait for each other
    assert next_job([("n1", 0, True)], [("n1", 0, True)], cap, 16) == 0
    # spans_run: starts at once, even beside an "all" job; an at_end job does not wait for it; it blocks no one
    assert next_job([("n1", 1, False, True)], [("n1", "all")], cap, 16) == 0
    assert next_job([("n1", 0, True)], [("n1", 1, False, True)], cap, 16) == 0
    assert next_job([("n1", "all")], [("n1", 1, False, True)], cap, 16) == 0
    # first (the rollout rehearsal): no other job of its node starts while it is queued or running, spanning and
    # at_end ones included; other nodes go on
    rehearsal = ("n1", "all", False, False, True)
    assert next_job([rehearsal, ("n1", 1, False, True)], [], cap, 16) == 0
    assert next_job([("n1", 1, False, True), ("n1", 0), ("n1", 0, True)], [rehearsal], cap, 16) is None
    assert next_job([("n1", 1), ("n2", 1)], [rehearsal], cap, 16) == 1
    assert next_job([("n1", 1, False, True)], [], cap, 16) == 0  # once it is done


def test_spanning_jobs_wait_for_the_rest_of_their_node_but_not_for_each_other():
    from collections import namedtuple
    from gpuconform.pytest_plugin.scheduler import rest_of_node_done
    job = namedtuple("job", "node spans")
    access, health, other = job("n1", True), job("n1", True), job("n1", False)
    assert not rest_of_node_done(access, [access, health, other])
    assert rest_of_node_done(access, [access, health]) and rest_of_node_done(health, [access, health])
    assert rest_of_node_done(access, [access, job("n2", False)])  # another node's checks are not its
