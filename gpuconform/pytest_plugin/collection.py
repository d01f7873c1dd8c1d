"""Collection: a check runs once per discovered GPU node (its `gpu_node` parameter, ids = node names), and the
items are trimmed to what applies (no GPU operator configured: its check is deselected)."""

from __future__ import annotations

from typing import Callable

import pytest

from gpuconform.catalog import DRA_ONLY
from gpuconform.config import Config
from gpuconform.reasons import skip_reason

NO_GPU_NODES = ("no GPU node to certify (none found, or every one left out: the report's 'GPU nodes left out' "
                "says why)")


def parametrize(metafunc: pytest.Metafunc, names: list[str] | None) -> None:
    """One call per GPU node; `names` None: the run could not start (the session ends at modifyitems, with one
    line: pytest turns an exit raised inside a collector into a collection error with a traceback)."""
    if names is None:
        metafunc.parametrize("gpu_node", [])
    elif names:
        metafunc.parametrize("gpu_node", names, ids=names)
    else:
        metafunc.parametrize("gpu_node", [pytest.param(None, marks=pytest.mark.skip(
            reason=skip_reason("SKIP-NODE-NOT-READY", NO_GPU_NODES)))], ids=["no-gpu-nodes"])


def deselect(config: pytest.Config, cfg: Config, items: list[pytest.Item],
             on_dra: Callable[[str], bool] = lambda node: False) -> None:
    """Drops the checks that do not apply: the GPU operator's without operator.namespace; the rollout rehearsal
    without rollout.mode; a DRA-only check
    (catalog.DRA_ONLY) on a node whose GPUs no DRA driver serves (`on_dra`: the node's path)."""
    def off(i: pytest.Item) -> bool:
        if not cfg.get("operator.namespace") and i.get_closest_marker("gpu_operator"):
            return True
        if not cfg.get("rollout.mode") and i.get_closest_marker("rollout"):
            return True
        node = getattr(i, "callspec", None) and i.callspec.params.get("gpu_node")
        return getattr(i, "originalname", "") in DRA_ONLY and not (node and on_dra(node))

    dropped = [i for i in items if off(i)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if not off(i)]
