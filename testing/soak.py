"""`make soak` (`python testing/soak.py [N]`, N=10 by default): N healthy suite runs in a row on the local test
bed, as a user would run them, each followed by a count of what it left in the cluster.

A run passes when pytest exits 0 and every result in its JSON summary passed. Left behind = namespaces of the
suite (label app.kubernetes.io/part-of=gpuconform, still there 60 s after the run: Terminating ones are
given that long to finish) plus pods carrying the run label gpuconform.dev/run in any namespace. Prints one
line per run and the totals (passes, objects left, wall time min/median/max); exits 1 unless every run
passed and nothing was left. Figures are printed, not asserted against a time."""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "e2e"))
from bedtools import kubectl, run_pytest  # noqa: E402

from gpuconform.cleanup import SELECTOR as PART_OF  # noqa: E402 - the suite's namespace label, as make cleanup uses it
from gpuconform.pods import RUN_LABEL  # noqa: E402


def left_behind(settle_s: float = 60) -> list[str]:
    """The suite's namespaces and pods still present; waits up to `settle_s` for Terminating ones to go."""
    deadline = time.monotonic() + settle_s
    while True:
        ns = json.loads(kubectl("get", "namespaces", "-l", PART_OF, "-o", "json"))["items"]
        pods = json.loads(kubectl("get", "pods", "-A", "-l", RUN_LABEL, "-o", "json"))["items"]
        left = ([f"namespace/{n['metadata']['name']} ({n['status'].get('phase')})" for n in ns]
                + [f"pod/{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods])
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(1)


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 10
    if n < 1:
        print(f"soak: N must be at least 1, got {n}", file=sys.stderr)
        return 2
    walls, passed, left_total = [], 0, 0
    with tempfile.TemporaryDirectory(prefix="gpuconform-soak-") as tmp:
        for i in range(1, n + 1):
            summary = Path(tmp) / f"summary-{i}.json"
            t0 = time.monotonic()
            out = run_pytest("tests", "-q", "--gpuconform-config", "localcluster/gpuconform.yaml",
                             "--gpuconform-summary", str(summary), timeout=900)
            wall = time.monotonic() - t0
            walls.append(wall)
            results = json.loads(summary.read_text())["results"] if summary.exists() else []
            bad = [f"{r['check']}[{r['node']}] {r['outcome']} {r['reason'] or ''}".strip()
                   for r in results if r["outcome"] != "passed"]
            ok = out.returncode == 0 and results and not bad
            passed += bool(ok)
            left = left_behind()
            left_total += len(left)
            print(f"run {i}/{n}: exit {out.returncode}, {len(results)} results, "
                  f"{'passed' if ok else 'FAILED'}, wall {wall:.1f}s, left behind {len(left)}"
                  + (f": {', '.join(bad)[:500]}" if bad else "") + (f" [{', '.join(left)[:300]}]" if left else ""),
                  flush=True)
            if not results:
                print(out.stdout[-2000:] + out.stderr[-1000:], flush=True)
    print(f"soak: {passed}/{n} runs passed, {left_total} objects left behind; wall min {min(walls):.1f}s, "
          f"median {statistics.median(walls):.1f}s, max {max(walls):.1f}s")
    return 0 if passed == n and left_total == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
