"""The run's end survives a second signal (issue 18), in a child pytest over a stand-in cluster.

The child's run makes both its namespaces, then SIGTERM arrives (the run ends: pytest stops, the end deletes
them); a second SIGTERM (or Ctrl-C) arrives while the end deletes the first namespace. Before, that second
signal raised KeyboardInterrupt out of the end: no namespace deleted and no summary written. Now the end goes
on, deletes both, the summary is written, and the child says it ignored the signal.

The child's conftest replaces Run.start with a Run over an in-memory cluster (no nodes, no pods, no watch) whose
namespace calls are written to calls.jsonl: no request leaves the process.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "docs" / "summary.schema.json").read_text())

CONFTEST = '''
import json
import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

from gpuconform.pytest_plugin import inventory, run
from gpuconform import kube
from testing.plugin.standin import NoWatch, pages, run_start

CALLS = Path("calls.jsonl").resolve()
SECOND = getattr(signal, {second!r})


def record(*call):
    with CALLS.open("a") as f:
        f.write(json.dumps(call) + "\\n")


class Core:
    list_node = staticmethod(pages([]))
    list_pod_for_all_namespaces = staticmethod(pages([]))

    def create_namespace(self, body):
        record("create", body["metadata"]["name"])

    def patch_namespace(self, name, body, **kw):
        record("patch", name)

    def delete_namespace(self, name, **kw):
        if not CALLS.read_text().count('"delete"'):  # the first deletion: the second signal arrives now
            os.kill(os.getpid(), SECOND)
            time.sleep(0.2)
        record("delete", name)


kube.Watch = NoWatch
run.Run.start = run_start(Core(), "sig-run")
inventory.k8s.ResourceV1Api = lambda api: SimpleNamespace(list_resource_slice=pages([]))
'''

TEST = '''
import os
import signal
import time


from gpuconform.pytest_plugin.plugin import conformance


def test_interrupted(request):
    run = conformance(request.config).run_or_exit()
    run.spaces.ensure()
    run.spaces.ensure(privileged=True)
    os.kill(os.getpid(), signal.SIGTERM)  # the run ends
    time.sleep(30)
'''


@pytest.mark.parametrize("second", ["SIGTERM", "SIGINT"])
def test_a_second_signal_during_the_end_neither_stops_the_deletion_nor_the_summary(pytester, monkeypatch, second):
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    for var in [v for v in os.environ if v.startswith("GPUCONFORM_")]:
        monkeypatch.delenv(var)
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(CONFTEST.format(second=second))
    pytester.makepyfile(test_sig=TEST)
    res = pytester.runpytest_subprocess("-p", "gpuconform.pytest_plugin.plugin", "-p", "no:cacheprovider",
                                        "--gpuconform-summary", "out.json", timeout=60)
    out = res.stdout.str() + res.stderr.str()
    calls = [tuple(json.loads(ln)) for ln in (pytester.path / "calls.jsonl").read_text().splitlines()]
    assert [c for c in calls if c[0] == "delete"] == [("delete", "gpuconform-sig-run"),
                                                      ("delete", "gpuconform-sig-run-node")], out[-3000:]
    assert f"{second} while the run ends: ignored" in out, out[-3000:]
    summary = json.loads((pytester.path / "out.json").read_text())
    jsonschema.validate(summary, SCHEMA)
    assert summary["run_id"] == "sig-run" and summary["cleanup_s"] is not None
    assert res.ret == pytest.ExitCode.INTERRUPTED == summary["exit_status"]
