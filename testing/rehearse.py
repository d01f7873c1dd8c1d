"""`make rehearse` (`python testing/rehearse.py [N]`, N=1 by default): N clean rollout rehearsals on the local test
bed, as a user would run them (`--gpuconform-rollout restart`, the rehearsal's check only, on every GPU node: NVIDIA's
plugin on the device-plugin node, the DRA driver on the DRA node). Prints each rehearsal's figures per node (the
JSON summary's `rollout`) and, over all of them, the window's and the hand-over's median and max, the held pods'
device checks and the probe pods rejected. Exits 1 unless every rehearsal passed. Figures are printed, not
asserted against a time."""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "e2e"))
from bedtools import run_pytest  # noqa: E402


def spread(values: list[float]) -> str:
    vals = [v for v in values if v is not None]
    return f"p50 {statistics.median(vals):.1f}s, max {max(vals):.1f}s" if vals else "none measured"


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 1
    if n < 1:
        print(f"rehearse: N must be at least 1, got {n}", file=sys.stderr)
        return 2
    figures: dict[str, list[dict]] = {}
    passed = 0
    with tempfile.TemporaryDirectory(prefix="gpuconform-rehearse-") as tmp:
        for i in range(1, n + 1):
            summary = Path(tmp) / f"summary-{i}.json"
            out = run_pytest("tests", "-q", "-k", "rollout", "--gpuconform-config", "localcluster/gpuconform.yaml",
                             "--gpuconform-rollout", "restart", "--gpuconform-summary", str(summary), timeout=900)
            data = json.loads(summary.read_text()) if summary.exists() else {}
            bad = [f"{r['node']}: {r['reason']}: {r['message'][:300]}" for r in data.get("results", [])
                   if r["outcome"] != "passed"]
            ok = out.returncode == 0 and data.get("results") and not bad
            passed += bool(ok)
            for f in data.get("rollout", []):
                figures.setdefault(f["node"], []).append(f)
                hand = "n/a" if f["handover_s"] is None else f"{f['handover_s']}s"
                print(f"rehearsal {i}/{n} {f['node']} ({f['daemonset']}): window {f['window_s']}s, hand-over "
                      f"{hand}, devices {f['devices_before']} -> min {f['devices_min']}, "
                      f"{f['held_pods']} held pod(s) {f['held_rounds']} checks, {f['probe_pods']} probe pod(s) "
                      f"{f['probe_rejected']} rejected")
            print(f"rehearsal {i}/{n}: exit {out.returncode}, {'passed' if ok else 'FAILED'}"
                  + "".join(f"\n  {b}" for b in bad) + ("" if data else f"\n{out.stdout[-2000:]}"))
    for node, fs in figures.items():
        print(f"{node}: {len(fs)} rehearsal(s); window {spread([f['window_s'] for f in fs])}; hand-over "
              f"{spread([f['handover_s'] for f in fs])}; held pods' device checks "
              f"{sum(f['held_rounds'] for f in fs)}; probe pods rejected {sum(f['probe_rejected'] for f in fs)} "
              f"of {sum(f['probe_pods'] for f in fs)}")
    print(f"{passed}/{n} rehearsals passed")
    return 0 if passed == n else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
