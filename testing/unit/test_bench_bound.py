"""The schedule's lower bound `make bench` prints (gpuconform/schedule.py), over a synthetic pod timeline shaped
like a healthy bed run: one 4-GPU node, the pods the suite's checks make there, times on the runner's clock."""

from __future__ import annotations

import pytest

from gpuconform.schedule import Bound, Part, freed, lower_bound

NODE = "gpu-node"
T0 = 1_000_000.0


def pod(name: str, check: str, seen: float, ended: float | None = None, gone: float | None = None,
        node: str = NODE, devices: int = 0, started: bool = True) -> dict:
    return {"pod": f"{name}-{node}", "namespace": "gpuconform-r1", "node": node, "check": check, "phase": None,
            "devices": devices, "created": T0 + int(seen), "scheduled": None,
            "started": T0 + int(seen) + 1 if started else None, "finished": None, "seen": T0 + seen,
            "ended": None if ended is None else T0 + ended, "gone": None if gone is None else T0 + gone}


# What a run records: GPU checks beside each other, then the three that hold every GPU one after another (the
# latency check's single samples first, beside the others). The burst's holders are deleted while running.
TIMELINE = [
    pod("access", "access", 0.2, None, 14.0),  # the run-long pod: holds one GPU only, not in the bound
    pod("vectoradd", "vector-add", 0.3, 1.5, 3.0),
    pod("iso0", "isolation", 0.3, 1.4, 3.0),
    pod("lat-s0", "latency", 0.4, 1.6, 9.0),
    pod("lat-s1", "latency", 2.0, 3.1, 9.0),
    pod("record", "kubelet-record", 3.0, None, 6.0),
    *(pod(f"lat-b{i}", "latency", 6.5, 7.5 + i * 0.1, 9.0) for i in range(3)),  # lat-b2 ended last: 7.7
    *(pod(f"burst{i}", "burst", 9.1, None, 10.5 + (i == 2)) for i in range(3)),  # burst2 gone last: 11.5
    pod("burst-extra", "burst", 9.2, None, 10.4),  # Pending, deleted
    pod("numa", "numa", 11.6, 12.9, 14.2),
]


def test_a_pods_device_is_free_when_its_containers_ended_or_it_was_gone():
    assert freed(pod("numa", "numa", 11.6, 12.9, 14.2)) == T0 + 12.9  # not the later deletion
    assert freed(pod("burst0", "burst", 9.1, None, 10.5)) == T0 + 10.5
    assert freed(pod("burst-extra", "burst", 9.2)) is None


def test_bound_sums_the_span_of_each_all_gpu_check_plus_cleanup():
    b = lower_bound(TIMELINE, cleanup_s=4.5)
    assert b.node == NODE and [p.check for p in b.parts] == ["latency", "burst", "numa"]  # in the run's order
    lat, burst, numa = b.parts
    assert (burst.first, burst.last) == ("burst0-gpu-node", "burst2-gpu-node")
    assert burst.seconds == pytest.approx(2.4) and numa.seconds == pytest.approx(1.3)
    assert (lat.first, lat.last) == ("lat-s0-gpu-node", "lat-b2-gpu-node") and lat.seconds == pytest.approx(7.3)
    assert b.seconds == pytest.approx(2.4 + 1.3 + 7.3 + 4.5)


def test_the_busiest_node_bounds_the_run():
    other = [pod("numa", "numa", 0.0, 11.0, node="big"), pod("burst0", "burst", 0.0, None, 1.0, node="big")]
    b = lower_bound(TIMELINE + other, cleanup_s=1.0)
    assert (b.node, b.seconds) == ("big", pytest.approx(13.0))  # numa 11 s + burst 1 s + cleanup
    assert lower_bound(TIMELINE + other[1:], cleanup_s=1.0).node == NODE


def test_no_all_gpu_pods_leaves_the_cleanup():
    b = lower_bound([p for p in TIMELINE if p["check"] not in ("burst", "numa", "latency")], cleanup_s=2.0)
    assert b == Bound("", (), 2.0)
    assert lower_bound([], cleanup_s=0.0).seconds == 0.0
    assert Part("numa", "a", "b", 1.0).seconds == 1.0


def small_node(gpus: int) -> list[dict]:
    """A node of `gpus` devices where the access check holds one for the whole run: the latency check's single
    samples (one device each), the isolation check (two), then the burst of every free device and its extra pod,
    which waits Pending and so holds nothing."""
    return [pod("access", "access", 0.2, None, 20.0, devices=1),
            *(pod(f"lat-s{i}", "latency", 0.5 + 2 * i, 2.0 + 2 * i, 9.0, devices=1) for i in range(3)),
            *(pod(f"lat-b{i}", "latency", 6.5, 8.0, 9.0, devices=1) for i in range(gpus - 1)),
            pod("iso2", "isolation", 8.2, 11.0, 12.0, devices=2), pod("iso0", "isolation", 8.2, 10.5, 12.0),
            *(pod(f"burst{i}", "burst", 11.2, None, 12.5, devices=1) for i in range(gpus - 1)),
            pod("burst-extra", "burst", 11.3, None, 12.4, devices=1, started=False)]


def test_a_check_holding_every_device_left_by_the_run_long_pod_is_in_the_bound():
    """On 3 devices, the access check holding one, the isolation check's two are all the run could use: no single
    sample of the latency check can run beside it, so its span counts. On 4 devices one more could have."""
    b = lower_bound(small_node(3), cleanup_s=1.0)
    assert [(p.check, p.why) for p in b.parts] == [
        ("latency", "takes every free device"), ("isolation", "held every device the run could use here"),
        ("burst", "takes every free device")]
    assert b.parts[1].seconds == pytest.approx(11.0 - 8.2)
    assert [p.check for p in lower_bound(small_node(4), cleanup_s=1.0).parts] == ["latency", "burst"]


def test_a_one_device_check_beside_a_latency_sample_is_not_counted():
    """On 3 devices the vector-add pod (one) ran beside the access pod and the latency check's first sample: the
    sample belongs to a check already counted, so vector-add held every device left by the run-long pod only
    together with it, and is not counted (its span lies inside the latency check's)."""
    timeline = small_node(3) + [pod("vectoradd", "vector-add", 0.5, 1.9, 3.0, devices=1)]
    assert [p.check for p in lower_bound(timeline, cleanup_s=1.0).parts] == ["latency", "isolation", "burst"]
