"""`make rehearse [N=1] [MODE=upgrade|restart]` (`python testing/rehearse.py [N] [--mode upgrade|restart]`): N
clean rollout rehearsals on the local test bed, as a user would run them (the rehearsal's check only, on every GPU
node: NVIDIA's plugin on the device-plugin node, the DRA driver on the DRA node).

- `upgrade` (the default): the suite runs with `--gpuconform-rollout observe` and the bed plays the user's upgrade
  once the nodes are held (`cluster.py upgrade-during-run`): NVIDIA's plugin rolls to its other release (v0.19.3 ->
  v0.18.2 -> v0.19.3 ...: a real upgrade, then a real downgrade, each built from NVIDIA's Go module) and the DRA
  driver's DaemonSet restarts. The bed is left at the release it started with.
- `restart`: the suite restarts both DaemonSets itself (`--gpuconform-rollout restart`), same release.

Prints each rehearsal's figures per node (the JSON summary's `rollout`) and, over all of them, the window's and the
hand-over's median and max, the held pods' device checks and the probe pods rejected. Exits 1 unless every
rehearsal passed. Figures are printed, not asserted against a time."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "e2e"))
from bedtools import ROOT, STATE, bed, run_pytest  # noqa: E402

RELEASES = ("v0.19.3", "v0.18.2")  # localcluster/nvidia.py TAG, PREV_TAG


def spread(values: list[float]) -> str:
    vals = [v for v in values if v is not None]
    return f"p50 {statistics.median(vals):.1f}s, max {max(vals):.1f}s" if vals else "none measured"


def current_release() -> str:
    return json.loads((STATE / "state.json").read_text()).get("plugin_version") or RELEASES[0]


def rehearse(i: int, n: int, mode: str, summary: Path, figures: dict[str, list[dict]]) -> bool:
    upgrade = None
    if mode == "upgrade":
        was = current_release()
        to = RELEASES[1] if was == RELEASES[0] else RELEASES[0]
        print(f"rehearsal {i}/{n}: NVIDIA's plugin {was} -> {to}, the DRA driver restarted", flush=True)
        log = (STATE / "logs" / "upgrade-during-run.log").open("a")
        upgrade = subprocess.Popen([sys.executable, str(ROOT / "localcluster" / "cluster.py"), "upgrade-during-run", to],
                                   stdout=log, stderr=subprocess.STDOUT)
    out = run_pytest("tests", "-q", "-k", "rollout", "--gpuconform-config", "localcluster/gpuconform.yaml",
                     "--gpuconform-rollout", "observe" if mode == "upgrade" else "restart",
                     "--gpuconform-summary", str(summary), timeout=900)
    bed_ok = True
    if upgrade is not None:
        try:
            bed_ok = upgrade.wait(timeout=300) == 0
        except subprocess.TimeoutExpired:
            upgrade.kill()
            bed_ok = False
        if not bed_ok:
            print(f"  the bed's upgrade failed: {STATE / 'logs' / 'upgrade-during-run.log'}")
    data = json.loads(summary.read_text()) if summary.exists() else {}
    bad = [f"{r['node']}: {r['reason']}: {r['message'][:300]}" for r in data.get("results", [])
           if r["outcome"] != "passed"]
    ok = out.returncode == 0 and bool(data.get("results")) and not bad and bed_ok
    for f in data.get("rollout", []):
        figures.setdefault(f["node"], []).append(f)
        hand = "n/a" if f["handover_s"] is None else f"{f['handover_s']}s"
        print(f"rehearsal {i}/{n} {f['node']} ({f['daemonset']}): window {f['window_s']}s, hand-over {hand}, "
              f"devices {f['devices_before']} -> min {f['devices_min']}, {f['held_pods']} held pod(s) "
              f"{f['held_rounds']} checks, {f['probe_pods']} probe pod(s) {f['probe_rejected']} rejected")
    print(f"rehearsal {i}/{n}: exit {out.returncode}, {'passed' if ok else 'FAILED'}"
          + "".join(f"\n  {b}" for b in bad) + ("" if data else f"\n{out.stdout[-2000:]}"), flush=True)
    return ok


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="rehearse", description=__doc__.split("\n\n")[0])
    ap.add_argument("n", nargs="?", type=int, default=1, help="how many rehearsals (default 1)")
    ap.add_argument("--mode", choices=("upgrade", "restart"), default="upgrade")
    args = ap.parse_args(argv)
    if args.n < 1:
        ap.error(f"N must be at least 1, got {args.n}")
    figures: dict[str, list[dict]] = {}
    start = current_release()
    passed = 0
    try:
        with tempfile.TemporaryDirectory(prefix="gpuconform-rehearse-") as tmp:
            for i in range(1, args.n + 1):
                passed += rehearse(i, args.n, args.mode, Path(tmp) / f"summary-{i}.json", figures)
    finally:
        if current_release() != start:  # leave the bed at the release it started with
            bed("plugin-version", start)
    for node, fs in figures.items():
        print(f"{node}: {len(fs)} rehearsal(s); window {spread([f['window_s'] for f in fs])}; hand-over "
              f"{spread([f['handover_s'] for f in fs])}; held pods' device checks "
              f"{sum(f['held_rounds'] for f in fs)}; probe pods rejected {sum(f['probe_rejected'] for f in fs)} "
              f"of {sum(f['probe_pods'] for f in fs)}")
    print(f"{passed}/{args.n} rehearsals passed ({args.mode})")
    return 0 if passed == args.n else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
