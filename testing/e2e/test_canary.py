"""Credentials: a token in the kubeconfig never reaches the report, JUnit XML, JSON summary or logs, and a
token the API server rejects is named as such.

The suite runs as a ServiceAccount (bound to the shipped ClusterRoles) whose freshly issued token is the
canary, with DEBUG logging captured and shown live, and a check forced to fail (scheduleP99 = 0s: scheduling
always takes > 0 s, while start times have 1 s resolution and can all be 0) so evidence and captured logs are
attached. Every artefact and both output streams are searched for the token and for any 16-character piece of
it. Needs `make cluster-up`.
"""

from __future__ import annotations

import secrets

import pytest
from bedtools import KUBECONFIG, as_list, identity_objects, kubectl, run_pytest, token_kubeconfig

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not KUBECONFIG.exists(),
                                                  reason="local cluster not running (make cluster-up)")]


def test_kubeconfig_token_appears_in_no_output(tmp_path):
    ns = sa = f"gc-canary-{secrets.token_hex(3)}"
    objs = identity_objects(ns, sa)
    kubectl("apply", "-f", "-", input=as_list(objs))
    try:
        token = token_kubeconfig(tmp_path / "kubeconfig", ns, sa)
        out = run_pytest(
            "tests", "-k", "latency or advertised",
            "--gpuconform-config", "localcluster/gpuconform.yaml", "--k8s-kubeconfig", str(tmp_path / "kubeconfig"),
            "--gpuconform-set", "burst.samples=1", "--gpuconform-set", "thresholds.scheduleP99=0s",
            "--log-level=DEBUG", "-o", "log_cli=true", "--log-cli-level=DEBUG", "-rA", "--showlocals",
            "--html", str(tmp_path / "report.html"), "--self-contained-html",
            "--junitxml", str(tmp_path / "junit.xml"), "--gpuconform-summary", str(tmp_path / "summary.json"),
            kubeconfig=tmp_path / "kubeconfig")
    finally:
        kubectl("delete", "--wait=false", "-f", "-", input=as_list(objs), check=False)
    assert out.returncode == 1, f"expected the forced latency failure:\n{out.stdout[-3000:]}\n{out.stderr[-2000:]}"
    assert "DEBUG" in out.stdout and "gpuconform.api" in out.stdout, "debug logging was not on"
    texts = {"stdout": out.stdout, "stderr": out.stderr,
             **{f: (tmp_path / f).read_text() for f in ("report.html", "junit.xml", "summary.json")}}
    # A JWT's header and payload are public claims (base64 of the issuer, the ServiceAccount's name, ...): text
    # naming the account, base64-encoded in the report, can repeat them. Its signature is what grants access, and
    # every leak of the token carries it: the fragments come from the signature (from the whole of any other token).
    secret = token.rsplit(".", 1)[1] if token.count(".") == 2 else token
    pieces = {secret[i:i + 16] for i in range(0, len(secret) - 16, 8)}
    assert any(p in (tmp_path / "kubeconfig").read_text() for p in pieces), "positive control: the search works"
    leaks = {name: sorted({p for p in pieces if p in text})[:3] for name, text in texts.items()}
    leaks = {k: v for k, v in leaks.items() if v}
    assert not leaks, f"token fragments found in {sorted(leaks)}"


def test_a_rejected_token_is_named_as_such_in_one_line_with_exit_7(tmp_path):
    """A kubeconfig whose token the API server rejects (401): pre-flight ends the run with one [ERROR-AUTH] line
    naming the credentials (not "unreachable"), exit 7, nothing created, and the token in no output."""
    import yaml

    admin = yaml.safe_load(KUBECONFIG.read_text())
    token = "gc-bogus-" + secrets.token_hex(16)
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "bogus",
        "clusters": [{"name": "bed", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": "bogus", "user": {"token": token}}],
        "contexts": [{"name": "bogus", "context": {"cluster": "bed", "user": "bogus"}}]}))
    before = kubectl("get", "namespaces", "-l", "app.kubernetes.io/part-of=gpuconform", "-o", "name")
    out = run_pytest("tests", "--gpuconform-config", "localcluster/gpuconform.yaml",
                     "--k8s-kubeconfig", str(tmp_path / "kubeconfig"), kubeconfig=tmp_path / "kubeconfig", timeout=120)
    text = out.stdout + out.stderr
    assert out.returncode == 7, text[-3000:]
    lines = [ln for ln in text.splitlines() if "pre-flight failed" in ln]
    assert len(lines) == 1 and "[ERROR-AUTH]" in lines[0] and "rejected the credentials (401" in lines[0], text[-3000:]
    assert token not in text
    assert kubectl("get", "namespaces", "-l", "app.kubernetes.io/part-of=gpuconform", "-o", "name") == before
