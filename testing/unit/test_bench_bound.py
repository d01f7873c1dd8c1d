"""The schedule's lower bound `make bench` prints (gpuconform/schedule.py), over a synthetic pod timeline shaped
like a healthy bed run: one 4-GPU node, the pods the suite's checks make there, 1 s server timestamps."""

from __future__ import annotations

import pytest

from gpuconform.schedule import Bound, Part, lifetime, lower_bound

NODE = "gpu-node"
T0 = 1_000_000.0


def pod(name: str, check: str, created: float, started: float | None = None, finished: float | None = None,
        node: str = NODE) -> dict:
    return {"pod": f"{name}-{node}", "namespace": "gpuconform-r1", "node": node if started is not None else "",
            "check": check, "phase": None, "created": T0 + created,
            "scheduled": None if started is None else T0 + created,
            "started": None if started is None else T0 + started,
            "finished": None if finished is None else T0 + finished}


# What a run records: GPU checks beside each other, then the three that hold every GPU, one after another. The
# burst's holders and its extra pod are deleted while running or Pending: the timeline has no end for them.
TIMELINE = [
    pod("access", "access", 0, 1),  # run-long pod, deleted at the end: no end recorded, holds one GPU only
    pod("vectoradd", "vector-add", 0, 1, 2),
    pod("iso0", "isolation", 0, 1, 2),
    pod("iso2", "isolation", 0, 1, 3),
    pod("lat-s0", "latency", 0, 1, 1),
    pod("lat-s1", "latency", 1, 5, 5),  # a slow single sample: beside other checks, not in the bound
    pod("record", "kubelet-record", 3, 4),
    pod("node-probe-record", "node-probe", 4, 5, 6),
    *(pod(f"burst{i}", "burst", 7, 8 + (i == 2)) for i in range(3)),  # burst2 started last: 2 s
    pod("burst-extra", "burst", 10),  # Pending (no node), deleted
    pod("numa", "numa", 20, 21, 23),
    *(pod(f"lat-b{i}", "latency", 24, 25, 25 + i) for i in range(3)),  # lat-b2: 3 s
]


def test_lifetime_is_creation_to_the_recorded_end_or_the_last_timestamp():
    assert lifetime(pod("numa", "numa", 20, 21, 23)) == (3.0, True)
    assert lifetime(pod("burst0", "burst", 7, 8)) == (1.0, False)  # deleted while running: to its start
    assert lifetime(pod("burst-extra", "burst", 10)) == (0.0, False)


def test_bound_sums_the_slowest_pod_of_each_all_gpu_check_plus_cleanup():
    b = lower_bound(TIMELINE, cleanup_s=4.5)
    assert b == Bound(NODE, (Part("burst", "burst2-gpu-node", 2.0, False), Part("numa", "numa-gpu-node", 3.0, True),
                             Part("latency", "lat-b2-gpu-node", 3.0, True)), 4.5)
    assert b.seconds == pytest.approx(12.5)


def test_the_busiest_node_bounds_the_run():
    other = [pod("numa", "numa", 0, 1, 11, node="big"), pod("burst0", "burst", 0, 1, node="big")]
    b = lower_bound(TIMELINE + other, cleanup_s=1.0)
    assert (b.node, b.seconds) == ("big", 13.0)  # numa 11 s + burst 1 s + cleanup
    assert lower_bound(TIMELINE + other[1:], cleanup_s=1.0).node == NODE


def test_no_all_gpu_pods_leaves_the_cleanup():
    b = lower_bound([p for p in TIMELINE if p["check"] not in ("burst", "numa", "latency")], cleanup_s=2.0)
    assert (b.parts, b.seconds) == ((), 2.0)
    assert lower_bound([], cleanup_s=0.0).seconds == 0.0


def test_a_pod_deleted_while_running_holds_its_device_until_the_watch_saw_it_gone():
    held = {**pod("burst0", "burst", 7, 8), "gone": T0 + 12}
    assert lifetime(held) == (5.0, True)
    finished = {**pod("numa", "numa", 20, 21, 23), "gone": T0 + 30}
    assert lifetime(finished) == (3.0, True)  # its containers' finish frees the device, not the later deletion
