"""The rollout rehearsal's verdicts (gpuconform/verdicts/rollout.py) on recorded shapes of what a node went
through: each finding shown to fire on its fault and to stay quiet on a healthy rollout."""

from gpuconform.probes import Gpu
from gpuconform.verdicts.allocation import Seen
from gpuconform.verdicts.rollout import (ENDING, NOT_READY, READY, Held, Probe, Rollout, Sample, probe_outcome,
                                         rollout_findings)

A, B = "GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-bbbbbbbb-0000-0000-0000-000000000000"


def seen(*uuids):
    return Seen("held", 1, [f"/dev/nvidia{i}" for i, _ in enumerate(uuids)], [Gpu(i, "GPU", u) for i, u in
                                                                              enumerate(uuids)])


def healthy(**kw):
    r = Rollout("n1", "nvidia/nvidia-device-plugin", "restart", 4, ("plugin-old",),
                samples=[Sample(0.0, 4, (("plugin-old", READY),)), Sample(1.0, 4, (("plugin-old", ENDING),)),
                         Sample(2.0, 4, (("plugin-new", READY),)), Sample(3.0, 4, (("plugin-new", READY),))],
                held=[Held("hold0", ((1, seen(A)), (2, seen(A)), (3, seen(A))))],
                probes=[Probe("roll1", 0.0, "ran", pending_s=1.0), Probe("roll2", 3.0, "ran", pending_s=1.0)],
                new_pod="plugin-new", handover_s=1.0)
    for k, v in kw.items():
        setattr(r, k, v)
    return r


def codes(r, window=30.0):
    return [f.code for f in rollout_findings(r, window)]


def test_a_healthy_rollout_passes_and_its_figures_are_kept():
    r = healthy()
    assert codes(r) == []
    f = r.figures()
    # the hand-over (no plugin pod serving from 1 s to 2 s) is the window
    assert (f["window_s"], f["handover_s"], f["probe_rejected"], f["completed"]) == (1.0, 1.0, 0, True)
    assert [row["plugin pods"] for row in r.timeline()][:2] == ["plugin-old (Ready)", "plugin-old (ending)"]
    assert [row["down"] for row in r.timeline()] == [False, True, False, False]


def test_a_held_pod_that_loses_or_changes_its_device_fails_naming_the_round():
    lost = healthy(held=[Held("hold0", ((1, seen(A)), (2, seen()), (3, seen(A))))])
    [f] = rollout_findings(lost, 30)
    assert f.code == "FAIL-ROLLOUT-ACCESS-LOST" and "check 2" in f.message and "no GPU" in f.message
    assert codes(healthy(held=[Held("hold0", ((1, seen(A)), (2, seen(B))))])) == ["FAIL-ROLLOUT-ACCESS-LOST"]
    assert codes(healthy(held=[Held("hold0", ((1, seen(A)),), running_at_end=False)])) == ["FAIL-ROLLOUT-ACCESS-LOST"]
    assert codes(healthy(held=[Held("hold0", ())])) == ["ERROR-TIMEOUT"]


def rejected(t):
    return Probe(f"roll{t:g}", t, "rejected", "UnexpectedAdmissionError", "Allocate failed due to device plugin "
                 "GetPreferredAllocation rpc failed")


def test_a_rejection_in_the_hand_over_is_its_cost_one_while_a_plugin_serves_fails():
    # in the hand-over (the kubelet rejects, for good, what it admits with no plugin endpoint): judged by its length
    assert codes(healthy(probes=[rejected(1.0), Probe("roll2", 4.0, "ran", pending_s=1.0)])) == []
    assert healthy(probes=[rejected(1.0)]).figures()["probe_rejected_in_window"] == 1
    # a plugin pod Ready and every device offered, yet the kubelet cannot allocate (a new pod's socket removed by
    # the old one as it ended: seen with NVIDIA's plugin under maxSurge)
    serving = healthy(probes=[rejected(6.0), rejected(9.0), Probe("roll3", 12.0, "ran", pending_s=1.0)],
                      samples=[Sample(float(t), 4, (("plugin-new", READY),)) for t in range(0, 14)])
    [f] = rollout_findings(serving, 30)
    assert f.code == "FAIL-ROLLOUT-ADMISSION" and "2 of 3" in f.message and "GetPreferredAllocation" in f.message


def test_a_rollout_that_does_not_pass_the_node_is_stuck():
    stuck = healthy(new_pod="", timed_out=True, new_pod_state="Running; plugin waiting CrashLoopBackOff: back-off")
    [f] = rollout_findings(stuck, 30)
    assert f.code == "FAIL-ROLLOUT-STUCK" and "CrashLoopBackOff" in f.message
    short = healthy(timed_out=True, samples=[Sample(0.0, 4), Sample(5.0, 2)])
    assert [f.code for f in rollout_findings(short, 30)] == ["FAIL-ROLLOUT-STUCK"]
    assert "offered 2 device(s)" in rollout_findings(short, 30)[0].message


def test_the_window_is_no_plugin_serving_or_fewer_devices_offered():
    up = (("plugin-new", READY),)
    r = healthy(samples=[Sample(0.0, 4, up), Sample(1.0, 0, up), Sample(30.0, 2, up), Sample(90.0, 4, up),
                         Sample(91.0, 4, up)], probes=[rejected(2.0)])
    assert r.windows() == [(1.0, 90.0)] and r.window_s() == 89.0
    [f] = rollout_findings(r, 30)
    assert f.code == "FAIL-ROLLOUT-WINDOW" and "89s" in f.message and "rejected 1 GPU pod(s) meanwhile" in f.message
    assert codes(r, window=120) == []
    slow = healthy(samples=[Sample(0.0, 4, (("old", ENDING),)), Sample(25.0, 4, (("new", NOT_READY),)),
                            Sample(40.0, 4, up)])
    assert slow.windows() == [(0.0, 40.0)] and codes(slow) == ["FAIL-ROLLOUT-WINDOW"]
    assert healthy(samples=[Sample(0.0, None, up), Sample(1.0, 4, up)]).windows() == []  # unreadable is not fewer
    assert healthy(before=None, samples=[Sample(0.0, 1, up)]).windows() == []


def test_dra_slices_gone_during_the_rollout_fail_and_no_count_is_not_zero():
    up = (("driver", READY),)
    samples = [Sample(0.0, 4, up, slices=2), Sample(1.0, 0, up, slices=0), Sample(2.0, 4, up, slices=2)]
    [f] = rollout_findings(healthy(samples=samples), 30)
    assert f.code == "FAIL-DRA-SLICES-WIPED" and "from 1s to 1s" in f.message
    assert codes(healthy(samples=[Sample(0.0, 4, up, slices=2), Sample(1.0, 4, up, slices=1)])) == []
    assert codes(healthy(samples=[Sample(0.0, 4, up), Sample(1.0, 4, up)])) == []  # the device-plugin path: None


def test_observe_mode_without_a_rollout_is_an_error_not_a_pass():
    assert codes(healthy(seen=False)) == ["ERROR-ROLLOUT-NOT-SEEN"]


def test_probe_outcomes_from_pod_status():
    rejected = {"status": {"phase": "Failed", "reason": "UnexpectedAdmissionError", "message": "Allocate failed"}}
    assert probe_outcome(rejected) == ("rejected", "UnexpectedAdmissionError", "Allocate failed")
    ran = {"status": {"phase": "Succeeded", "containerStatuses": [
        {"state": {"terminated": {"startedAt": "2026-12-06T00:00:01Z", "exitCode": 0}}}]}}
    assert probe_outcome(ran)[0] == "ran"
    assert probe_outcome({"status": {"phase": "Pending"}})[0] == "pending"
    assert probe_outcome({"status": {"phase": "Failed", "containerStatuses": [
        {"state": {"waiting": {"reason": "CreateContainerError"}}}]}})[0] == "failed"


def test_a_restart_starts_once_when_every_rehearsed_node_is_held():
    import threading

    from gpuconform.pytest_plugin.rollout import Gate

    gate, started, cancelled = Gate(), [], threading.Event()
    gate.expect(3)
    gate.leave("n3")  # its check ended before it held anything (busy, NotReady)
    results = {}

    def node(name):
        results[name] = gate.arrive("ns/plugin", name, lambda: started.append(name), 5, cancelled)

    threads = [threading.Thread(target=node, args=(n,)) for n in ("n1", "n2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(started) == 1 and results == {"n1": True, "n2": True}
    # a node held after the restart began is told so: the rollout may have passed it already
    assert gate.arrive("ns/plugin", "n4", lambda: started.append("n4"), 5, cancelled) is False
    assert len(started) == 1


def test_a_probe_pod_given_a_held_gpu_after_the_rollout_fails_naming_both_pods():
    # the new version re-registered the GPUs under other IDs (NVIDIA's deviceIDStrategy uuid -> index): the kubelet
    # counts the held pod's GPU free and hands it to the probe pod
    clash = healthy(probes=[Probe("roll1", 0.0, "ran", pending_s=1.0, gpus=(B,)),
                            Probe("roll2", 3.0, "ran", pending_s=1.0, gpus=(A,))])
    [f] = rollout_findings(clash, 30)
    assert f.code == "FAIL-ROLLOUT-DEVICES-REASSIGNED"
    assert "roll2" in f.message and A in f.message and "hold0" in f.message and "roll1" not in f.message
    assert clash.figures()["probe_reassigned"] == 1
    # a probe pod on the free GPU is what a healthy rollout gives
    assert codes(healthy(probes=[Probe("roll1", 3.0, "ran", pending_s=1.0, gpus=(B,))])) == []


def test_a_kubelet_restart_during_the_rollout_fails_and_an_unread_start_time_judges_nothing():
    [f] = rollout_findings(healthy(kubelet_started=(1000.0, 1042.0)), 30)
    assert f.code == "FAIL-ROLLOUT-KUBELET-RESTART" and "1000 -> 1042" in f.message and "1 held" in f.message
    assert codes(healthy(kubelet_started=(1000.0, 1000.0))) == []
    assert codes(healthy(kubelet_started=(None, 1042.0))) == []
    assert healthy().figures()["kubelet_restarted"] is None
    assert healthy(kubelet_started=(1000.0, 1042.0)).figures()["kubelet_restarted"] is True
