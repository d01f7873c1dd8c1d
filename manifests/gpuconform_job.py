#!/usr/bin/env python3
"""gpuconform-job: runs the conformance suite inside a Kubernetes Job and keeps its reports retrievable.

Installed in the suite image as /usr/local/bin/gpuconform-job (manifests/Dockerfile, localcluster/imagebuild.py)
and used as the command of manifests/suite-job.yaml. What it does:

1. runs `python3 -m pytest -p no:cacheprovider` in /opt/gpuconform (its pytest.ini names the installed checks,
   gpuconform.checks; in the local bed's image, pyproject.toml names tests/) with the report options
   (report.html, junit.xml, summary.json in $GPUCONFORM_REPORT_DIR, default /reports) plus the arguments it is
   given (e.g. `-m "not node_probe"`, `--gpuconform-set thresholds.startP99=8s`); SIGTERM/SIGINT are passed on,
   so the suite deletes what it created before the pod goes;
2. writes the suite's exit code to $GPUCONFORM_REPORT_DIR/exit-code (the pod turns Ready: reports are complete)
   and prints one line `GPUCONFORM_SUMMARY {...}` with summary.json, so `kubectl logs` always has the verdict;
3. stays alive for the retrieval window ($GPUCONFORM_RETRIEVAL_WINDOW seconds, default 900; 0 = none) so the
   reports can be copied out of the pod's `reports` container (`kubectl cp -c reports`, `kubectl exec -c reports
   ... cat`), ending early when a file named `done` appears in the report directory or on SIGTERM;
4. exits with the suite's exit code (0 all certified, 1 violations/errors, 6 nothing certified, 7 pre-flight
   failed, ... see README.md), so the Job is Complete or Failed accordingly.

`gpuconform-job --hold` is the pod's `reports` sidecar: it only waits for SIGTERM (the kubelet sends it once the
suite's container has exited). It shares the report directory and has no ServiceAccount token, so whoever fetches
the reports (`kubectl cp`, `kubectl exec`) never enters the container that holds the suite's credentials.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SUITE_DIR = "/opt/gpuconform"


def say(msg: str) -> None:
    print(f"[gpuconform-job {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def hold() -> int:
    """The reports sidecar: nothing to do but be there until the pod ends. A handler is needed: as PID 1 in its
    container a signal without one is ignored, and the pod would wait out its grace period."""
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.append(signum))
    signal.signal(signal.SIGINT, lambda signum, frame: stop.append(signum))
    while not stop:
        time.sleep(1)
    return 0


def main(args: list[str]) -> int:
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if args == ["--hold"]:
        return hold()
    reports = Path(os.environ.get("GPUCONFORM_REPORT_DIR", "/reports"))
    window = float(os.environ.get("GPUCONFORM_RETRIEVAL_WINDOW", "900"))
    reports.mkdir(parents=True, exist_ok=True)
    for stale in ("exit-code", "done", "summary.json"):
        (reports / stale).unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
           f"--html={reports / 'report.html'}", "--self-contained-html", f"--junitxml={reports / 'junit.xml'}",
           f"--gpuconform-summary={reports / 'summary.json'}", *args]
    say("running: python3 " + " ".join(cmd[1:]))
    proc = subprocess.Popen(cmd, cwd=SUITE_DIR if Path(SUITE_DIR).is_dir() else None)
    stopping: list[int] = []

    def forward(signum: int, frame: object) -> None:
        stopping.append(signum)
        if proc.poll() is None:
            proc.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    rc = proc.wait()
    if rc < 0:  # killed by a signal: report it the way a shell would
        rc = 128 - rc
    (reports / "exit-code").write_text(f"{rc}\n")
    summary = reports / "summary.json"
    try:
        print("GPUCONFORM_SUMMARY " + json.dumps(json.loads(summary.read_text()), separators=(",", ":")), flush=True)
    except (OSError, ValueError) as e:
        say(f"no summary.json ({e}); the suite stopped before writing it (see the lines above)")
    files = sorted(p.name for p in reports.iterdir() if p.is_file())
    say(f"suite exited {rc}; reports in {reports}: {', '.join(files)}")
    if stopping or window <= 0:
        return rc
    pod = os.environ.get("HOSTNAME", "<pod>")
    say(f"fetch within {window:.0f}s: kubectl cp -c reports <namespace>/{pod}:{reports} ./gpuconform-reports ; "
        f"then end the pod early with: kubectl exec -n <namespace> -c reports {pod} -- touch {reports}/done")
    deadline = time.monotonic() + window
    while time.monotonic() < deadline and not stopping and not (reports / "done").exists():
        time.sleep(1)
    say("retrieval " + ("confirmed (done)" if (reports / "done").exists() else
                        "window interrupted" if stopping else "window over") + f"; exiting {rc}")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
