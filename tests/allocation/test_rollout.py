"""The rollout rehearsal (rollout.mode; docs/rollout.md): a node's device plugin or DRA driver rolls out while GPU
pods run on it and new ones arrive. Deselected unless rollout.mode is set."""

import pytest

from gpuconform import verdicts
from gpuconform.verdicts import rollout


@pytest.mark.rollout
@pytest.mark.gpus("all")
def test_plugin_rollout_keeps_running_gpu_pods_and_admits_new_ones(check):
    """MUST (rollout.mode set): while the DaemonSet that runs the node's device plugin or DRA driver rolls
    (`restart`: the suite restarts it; `observe`: your own upgrade), pods holding every free device but one keep
    the devices they had, checked every second; the small GPU pods sent at the last device meanwhile are not
    rejected by the kubelet; a new plugin pod becomes Ready on the node and the node offers its devices again
    within rollout.timeout; the node offers fewer devices for no longer than thresholds.rolloutWindow; a DRA
    driver's ResourceSlices for the node never vanish (seamless upgrade). Starts before any other check of the
    node; the checks after it judge the new version."""
    check.needs_nvidia_tooling("device visibility from nvidia-smi in the held pods")
    seen = check.rehearse_rollout()
    check.note("rollout", seen.figures())
    check.note("timeline", seen.timeline())
    check.measure("rollout", {"node": check.node, **seen.figures(), "timeline": seen.timeline()})
    check.hand_over(verdicts.folded(rollout.rollout_findings(seen, check.cfg.seconds("thresholds.rolloutWindow"))))
