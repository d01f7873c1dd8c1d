"""How long the HTML audit report takes to render in headless Chromium, and a synthetic report at scale to try.

    python testing/report_render.py FILE              # seconds until FILE is loaded and its results table drawn
    python testing/report_render.py --synthetic 1000  # build a real pytest-html report for 1,000 GPU nodes, measure

`render_seconds(path)` opens the page in a fresh headless Chromium (DevTools protocol, testing/e2e/chromium.py) and
returns the page's own clock (`performance.now()`, zero at navigation start) at the first animation frame after
the load event has fired and pytest-html's results table has the rows it draws on opening (it builds that table
with JavaScript from a JSON blob while the page loads); the page is polled every 20 ms, so a figure may be that
much late. Chromium's start-up is not counted. Used by the scale benchmark; figures are printed, never asserted.

`--synthetic N` writes a throw-away test module with 12 of the suite's 15 check names, each parametrised over N
node names in three pools, and runs it with `python -m pytest -p fixtures.plugin --html ... --self-contained-html`, so
the page comes from the real plugin and report hooks (results, reason codes, MUST statements, fix hints, the
pytest-html table with one row per node and check). A few nodes fail, error or are skipped (deterministic). What a
cluster run adds to the summary from its Run object (GPU nodes, certified nodes, node pools, latency samples) is
filled in by a conftest between the plugin's summary and pytest-html's page.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "testing" / "e2e"))
from chromium import chromium  # noqa: E402

# Loaded, and (on a pytest-html page) its results table built: app.js replaces #results-table with one tbody per
# test (or one "no results" tbody) in a single step.
_READY_JS = """(() => document.readyState === 'complete' && (!document.getElementById('data-container')
    || document.querySelectorAll('#results-table tbody.results-table-row').length > 0))()"""
# Wait for the next frame (style, layout and paint of what is there), then read the page's clock.
_FRAME_JS = "new Promise(r => requestAnimationFrame(() => setTimeout(() => r(performance.now()), 0)))"
_NAV_JS = """(() => { const n = performance.getEntriesByType('navigation')[0];
    return {dom_content_loaded_ms: n.domContentLoadedEventEnd, load_ms: n.loadEventEnd,
            elements: document.getElementsByTagName('*').length,
            result_rows: document.querySelectorAll('#results-table tbody.results-table-row').length}; })()"""


def measure(html_path: str | Path, timeout: float = 180.0) -> dict:
    """Render timings of one page load (seconds since navigation start) and the page's element count."""
    url = Path(html_path).resolve().as_uri()
    with chromium() as browser:
        browser.call("Page.enable")
        browser.call("Page.navigate", url=url)
        end = time.monotonic() + timeout
        # app.js adds ?sort=... to the address with history.pushState
        while not (browser.evaluate("location.href.split(/[?#]/)[0]") == url and browser.evaluate(_READY_JS)):
            if time.monotonic() > end:
                raise TimeoutError(f"{url} not loaded and rendered within {timeout:.0f} s")
            time.sleep(0.02)
        rendered_ms = browser.evaluate(_FRAME_JS, await_promise=True)
        nav = browser.evaluate(_NAV_JS)
    return {"rendered_s": round(rendered_ms / 1000, 3), "load_s": round(nav["load_ms"] / 1000, 3),
            "dom_content_loaded_s": round(nav["dom_content_loaded_ms"] / 1000, 3), "elements": nav["elements"],
            "result_rows": nav["result_rows"]}


def render_seconds(html_path: str | Path) -> float:
    """Seconds from navigation start until FILE has loaded and its results table is drawn (see the module doc)."""
    return measure(html_path)["rendered_s"]


# ---------------------------------------------------------------- a synthetic report at scale

CHECKS = [
    ("test_plugin_pod_is_ready_and_not_crash_looping", "every GPU node runs a Ready device-plugin pod that is not "
     "crash-looping (restarts within plugin.maxRestarts)."),
    ("test_gpu_resource_is_in_node_capacity", "a GPU node's capacity and allocatable list each of its GPU resources "
     "with a non-zero count."),
    ("test_kubelet_counts_the_plugin_registration", "the kubelet's kubelet_device_plugin_registration_total for each "
     "of the node's GPU resources is at least 1."),
    ("test_plugin_socket_exists_in_device_plugins_dir", "the plugin serves one socket per resource in "
     "/var/lib/kubelet/device-plugins."),
    ("test_gpu_operator_validation_passed_on_the_node", "the GPU operator's validator pod on the node is Ready."),
    ("test_advertised_gpus_match_the_hardware", "the node advertises count x max(replicas, 1) of its resource, as "
     "its labels say."),
    ("test_vector_add_succeeds_through_the_plugin", "a CUDA vector-add pod requesting one GPU runs to Test PASSED."),
    ("test_pods_see_exactly_the_gpus_they_request", "a pod sees exactly the GPUs it requested, no more."),
    ("test_burst_allocates_every_free_gpu_once_and_one_more_waits", "a burst of pods gets every free device exactly "
     "once and one more pod stays Pending."),
    ("test_kubelet_topology_and_cpu_manager_policies_are_as_expected", "the kubelet runs the expected topology and "
     "CPU manager policies."),
    ("test_guaranteed_gpu_pod_gets_cpus_and_gpu_on_one_numa_node", "a Guaranteed GPU pod gets its CPUs and GPUs on "
     "one NUMA node."),
    ("test_gpu_pod_start_latency_is_under_thresholds", "GPU pod scheduling and start latencies stay under the "
     "configured thresholds."),
]
POOLS = [("a100", "nvidia.com/gpu x8 (plain)", 6), ("h100mig", "nvidia.com/mig-1g.10gb x56 (MIG mixed)", 3),
         ("l4ts", "nvidia.com/gpu.shared x4 (time-slicing, renamed)", 1)]

_TEST_MODULE = '''"""Generated by testing/report_render.py --synthetic: {n} nodes x {k} checks."""
import json
from pathlib import Path

import pytest

from gpuconform.reasons import EnvironmentProblem, Violation, skip_reason

SPEC = json.loads(Path(__file__).with_name("synthetic.json").read_text())
NODES = SPEC["nodes"]


def _verdict(check, node, record_property):
    record_property("node", node)
    bad = SPEC["bad"].get(check + "|" + node)
    if bad is None:
        return
    kind, code, message = bad
    if kind == "failed":
        raise Violation(code, message)
    if kind == "error":
        raise EnvironmentProblem(code, message)
    pytest.skip(skip_reason(code, message))
'''

_TEST_FUNC = '''

@pytest.mark.parametrize("node", NODES)
def {check}(node, record_property):
    """MUST: {must}"""
    _verdict("{check}", node, record_property)
'''

_CONFTEST = '''"""Fills in what a cluster run takes from its Run object (between the plugin's summary and pytest-html's page)."""
import json
from pathlib import Path

from fixtures.summary import SUMMARY_KEY
from gpuconform import reasons

SPEC = json.loads(Path(__file__).with_name("synthetic.json").read_text())


def pytest_sessionfinish(session):
    s = session.config.stash.get(SUMMARY_KEY, None)
    if s is None:
        return
    nodes = SPEC["nodes"]
    per_node = {n: [] for n in nodes}
    for r in s["results"]:
        if r["node"] in per_node:
            per_node[r["node"]].append((r["outcome"], r["reason"]))
    certified = [n for n, outs in per_node.items() if reasons.certified(outs)]
    s.update({"run_id": "synthetic", "gpu_nodes": nodes, "certified_nodes": certified,
              "node_pools": SPEC["node_pools"], "latency": SPEC["latency"],
              "coverage": {"certified_fraction": round(len(certified) / len(nodes), 3), "gate": 1.0}})
    Path(SPEC["summary_out"]).write_text(json.dumps({k: v for k, v in s.items() if k != "baseline_comparison"},
                                                    default=str))
'''


def synthetic_spec(n: int, latency_pods: int = 5, nodes_proxy: bool = True) -> dict:
    """Node names, pools, the (check, node) results that are not a pass, and latency samples; deterministic."""
    nodes, pools = [], {}
    weights = [p for name, desc, w in POOLS for p in [(name, desc)] * w]
    for i in range(n):
        short, desc = weights[i % len(weights)]
        name = f"gpu-{short}-{i:04d}"
        nodes.append(name)
        pools[name] = desc
    bad: dict[str, list[str]] = {}
    for i, node in enumerate(nodes):
        if i % 97 == 13:
            bad[f"test_advertised_gpus_match_the_hardware|{node}"] = [
                "failed", "GPU-F04-OVERADVERTISED", f"{node}: nvidia.com/gpu capacity 16, expected 8 from "
                "nvidia.com/gpu.count=8 x replicas 1 (sharing.timeSlicing.replicas=2 in the plugin config?)"]
        if i % 149 == 7:
            bad[f"test_vector_add_succeeds_through_the_plugin|{node}"] = [
                "error", "GPU-F14-IMAGE-PULL", f"{node}: pod vectoradd-{i} ImagePullBackOff: "
                "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0: dial tcp: lookup nvcr.io: i/o timeout"]
        if i % 211 == 50:
            for check in ("test_vector_add_succeeds_through_the_plugin", "test_pods_see_exactly_the_gpus_they_request",
                          "test_burst_allocates_every_free_gpu_once_and_one_more_waits",
                          "test_guaranteed_gpu_pod_gets_cpus_and_gpu_on_one_numa_node",
                          "test_gpu_pod_start_latency_is_under_thresholds"):
                bad[f"{check}|{node}"] = ["skipped", "ENV-NODE-NOT-READY", f"{node} is cordoned (unschedulable)"]
        if i % 331 == 100:
            bad[f"test_gpu_pod_start_latency_is_under_thresholds|{node}"] = [
                "failed", "GPU-LATENCY-THRESHOLD", f"{node}: startP99 12.4 s > 10 s (n=5, p99 is the maximum)"]
        if not nodes_proxy:
            for check, what in (("test_kubelet_counts_the_plugin_registration", "kubelet metrics"),
                                ("test_kubelet_topology_and_cpu_manager_policies_are_as_expected", "kubelet configz")):
                bad[f"{check}|{node}"] = ["skipped", "ENV-NOT-CHECKED", f"nodes/proxy not granted: {what} not checked"]
    latency = []
    for i, node in enumerate(nodes[: n if latency_pods else 0]):
        pods = [{"pod": f"lat-s{j}-{node}", "schedule_s": 0.01 + 0.001 * ((i + j) % 7),
                 "start_s": 1.0 + 0.25 * ((i * 7 + j) % 5), "scheduled_from_event": True} for j in range(latency_pods)]
        starts = sorted(p["start_s"] for p in pods)
        scheds = sorted(p["schedule_s"] for p in pods)
        note = "p99 is the maximum (n < 100)"
        latency.append({"node": node, "pods": pods,
                        "schedule": {"n": len(pods), "p50": scheds[len(pods) // 2], "p95": scheds[-1],
                                     "p99": scheds[-1], "max": scheds[-1], "note": note},
                        "start": {"n": len(pods), "p50": starts[len(pods) // 2], "p95": starts[-1], "p99": starts[-1],
                                  "max": starts[-1], "note": note},
                        "allocate": {"n": len(pods), "mean_s": 0.0004, "p99_bucket_le_s": 0.005}})
    return {"nodes": nodes, "node_pools": pools, "bad": bad, "latency": latency}


def build_synthetic(n: int, out_dir: str | Path, latency_pods: int = 5, nodes_proxy: bool = True,
                    pytest_args: tuple[str, ...] = ()) -> Path:
    """Runs the generated suite for N nodes; returns the path of its self-contained report.html (summary.json
    next to it)."""
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gc-synthetic-") as tmp:
        work = Path(tmp)
        spec = synthetic_spec(n, latency_pods, nodes_proxy)
        spec["summary_out"] = str(out / "summary.json")
        (work / "synthetic.json").write_text(json.dumps(spec))
        (work / "conftest.py").write_text(_CONFTEST)
        (work / "test_synthetic.py").write_text(
            _TEST_MODULE.format(n=n, k=len(CHECKS))
            + "".join(_TEST_FUNC.format(check=c, must=m) for c, m in CHECKS))
        (work / "pytest.ini").write_text("[pytest]\n")  # rootdir here, away from the repo's addopts
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               "KUBECONFIG": str(work / "no-such-kubeconfig")}
        env = {k: v for k, v in env.items() if not k.startswith("GPUCONFORM_")}
        res = subprocess.run([sys.executable, "-m", "pytest", "-p", "fixtures.plugin", "-p", "no:cacheprovider",
                              "-q", "--no-header", "--tb=no", "--html", str(out / "report.html"),
                              "--self-contained-html", *pytest_args, "test_synthetic.py"],
                             cwd=work, env=env, capture_output=True, text=True, timeout=1800)
        if not (out / "report.html").exists():
            raise RuntimeError(f"pytest exited {res.returncode} without a report:\n{res.stdout[-3000:]}\n"
                               f"{res.stderr[-3000:]}")
    return out / "report.html"


def fragment_bytes(summary: dict) -> dict[str, int]:
    """Sizes of the gpuconform fragments (UTF-8 bytes) that the page gets for this summary."""
    from gpuconform import report

    results, nodes, pools = summary.get("results", []), summary.get("gpu_nodes", []), summary.get("node_pools")
    lat, thr = summary.get("latency") or [], summary.get("thresholds") or {}
    frags = {"pool summary": report.pool_summary_html(results, nodes, summary.get("certified_nodes"), pools),
             "matrix": report.matrix_html(results, nodes, pools),
             "latency": report.latency_cdf_svg(lat, thr) + report.phase_breakdown_svg(lat)
             + report.percentile_table_html(lat, thr)}
    return {k: len(v.encode()) for k, v in frags.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", nargs="?", help="an HTML report to open")
    ap.add_argument("--synthetic", type=int, metavar="N", help="build a report for N synthetic GPU nodes first")
    ap.add_argument("--out", default=str(ROOT / "reports" / "scale"), help="where --synthetic writes "
                    "report.html and summary.json (default reports/scale)")
    ap.add_argument("--latency-pods", type=int, default=5, help="latency samples per node in --synthetic (default 5)")
    ap.add_argument("--no-nodes-proxy", action="store_true", help="--synthetic: nodes/proxy not granted, so two "
                    "checks are 'not checked' on every node")
    ap.add_argument("--pytest-arg", action="append", default=[], metavar="ARG",
                    help="extra argument for the --synthetic pytest run (repeatable), e.g. -o render_collapsed=all")
    ap.add_argument("--runs", type=int, default=3, help="page loads to time; the median is reported (default 3)")
    args = ap.parse_args(argv)
    if bool(args.file) == bool(args.synthetic):
        ap.error("give either FILE or --synthetic N")
    path = Path(args.file) if args.file else None
    if args.synthetic:
        t0 = time.monotonic()
        path = build_synthetic(args.synthetic, args.out, args.latency_pods, not args.no_nodes_proxy,
                               tuple(args.pytest_arg))
        print(f"built {path} for {args.synthetic} nodes x {len(CHECKS)} checks in {time.monotonic() - t0:.0f} s")
        summary = json.loads((path.parent / "summary.json").read_text())
        print("gpuconform fragments (bytes): " + ", ".join(f"{k} {v:,}" for k, v in
                                                            fragment_bytes(summary).items()))
    assert path is not None
    runs = [measure(path) for _ in range(max(args.runs, 1))]
    runs.sort(key=lambda m: m["rendered_s"])
    med = runs[len(runs) // 2]
    print(f"{path}: {path.stat().st_size:,} bytes, {med['elements']:,} elements, {med['result_rows']:,} result rows; "
          f"load event {med['load_s']:.2f} s, rendered {med['rendered_s']:.2f} s after navigation start "
          f"(median of {len(runs)}: {', '.join(format(m['rendered_s'], '.2f') for m in runs)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
