"""Every reason code a verdict function can yield has a unit test from recorded inputs, and every recorded input
says where it came from.

The codes a check can raise are the ones its verdict functions yield (gpuconform/verdicts/, and what they call:
nodes.GpuNode.skip_reason, probes.CUDA_CAUSES); the pod verdicts are tested in test_pods.py, the wait engine
(waits.py) in test_waits.py."""

from __future__ import annotations

import re
from pathlib import Path

from recorded import SAMPLES

from gpuconform.reasons import REASONS

ROOT = Path(__file__).resolve().parents[2]
VERDICT_SOURCES = [*sorted((ROOT / "gpuconform" / "verdicts").glob("*.py")),
                   *(ROOT / "gpuconform" / f for f in ("nodes.py", "probes.py"))]
TESTS = sorted([*Path(__file__).parent.glob("test_verdicts*.py"), Path(__file__).parent / "test_pods.py"])
CODE = re.compile(r'"((?:FAIL|ERROR|SKIP|NOTCHECKED)-[A-Z0-9-]+)"')


def codes_in(paths) -> set[str]:
    return {c for p in paths for c in CODE.findall(p.read_text()) if c in REASONS}


def test_verdict_functions_yield_known_codes_only():
    found = {c for p in VERDICT_SOURCES for c in CODE.findall(p.read_text())}
    assert found and found <= set(REASONS), found - set(REASONS)


def test_every_code_a_verdict_can_yield_has_a_recorded_input_test():
    yielded = codes_in(VERDICT_SOURCES)
    tested = codes_in(p for p in TESTS if p.name != Path(__file__).name)
    # a floor against an empty scan; the codes verdicts never yield come from apierrors and the wait engine
    assert len(yielded) >= 26, sorted(yielded)
    assert yielded <= tested, f"no unit test asserts {sorted(yielded - tested)}"


def test_every_sample_says_where_it_came_from():
    files = sorted(f for f in SAMPLES.iterdir() if f.suffix in (".txt", ".yaml"))
    assert len(files) >= 25
    for f in files:
        head = []
        for line in f.read_text().splitlines():
            if not line.startswith("# "):
                break
            head.append(line)
        assert head and head[0].startswith("# source: "), f.name
        assert any(h.startswith("# what: ") for h in head), f.name
