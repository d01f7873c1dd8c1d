"""The one redaction rule (gpuconform/redaction.py, issue 18): tokens, URL credentials and configured secrets never
reach what the suite writes; the two rules that used to disagree (report.redact and Config.redacted) are one."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from kubernetes import client as k8s, config as kconfig

from gpuconform.pytest_plugin import scrub
from gpuconform import config as gconfig, kube, redaction, auditpage  # noqa: F401 - kube installs the log filters

JWT = "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6Z3B1In0.c2lnbmF0dXJlLXNpZw"
GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
# (hostile text, the secret that must not survive, what must survive)
TEXTS = [
    ("header_params = {'authorization': 'Bearer abc.def-123'}", "abc.def-123", "'authorization': 'Bearer <redacted>'"),
    (f"token in a message: {JWT} end", JWT, "end"),
    (f"GIT_URL=https://bot:{GHP}@github.com/org/repo.git", GHP, "github.com/org/repo.git"),
    ("https://deploy-token@gitlab.example.com/g/r.git", "deploy-token", "gitlab.example.com/g/r.git"),
    (f"exec: process returned 1. error: refreshing {GHP} failed", GHP, "failed"),
    ("exec plugin: --password=hunter2hunter2 --user=me", "hunter2hunter2", "--user=me"),
    ('{"apiKey": "k-123456789"}', "k-123456789", '"apiKey": "<redacted>"'),
]


@pytest.fixture(autouse=True)
def _fresh():
    redaction.forget_all()
    yield
    redaction.forget_all()


@pytest.mark.parametrize("text,secret,kept", TEXTS)
def test_scrub_hides_credentials_and_keeps_the_rest(text, secret, kept):
    out = redaction.scrub(text)
    assert secret not in out and "<redacted>" in out and kept in out
    assert redaction.scrub(out) == out  # twice reads as once


def test_a_remembered_token_of_any_shape_is_scrubbed():
    assert redaction.scrub("opaque s3cr3t-static-token-0123") == "opaque s3cr3t-static-token-0123"
    redaction.remember("Bearer s3cr3t-static-token-0123")
    assert redaction.scrub("x s3cr3t-static-token-0123 y") == "x <redacted> y"
    redaction.remember("short")  # too short to scrub without redacting ordinary words
    assert redaction.scrub("short") == "short"


def test_connect_remembers_the_kubeconfig_token(tmp_path: Path):
    kc = tmp_path / "kc.yaml"
    kc.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
                  "users: [{name: u, user: {token: opaque-static-token-42}}]\n"
                  "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n")
    kube.connect(str(kc), None, 5, 10, 1.0)
    assert redaction.scrub("sent opaque-static-token-42") == "sent <redacted>"


def test_one_rule_for_the_config_dump_and_config_redacted():
    cfg = gconfig.load(None, {"images.pullSecrets": "[regcred, mirror-cred]"}, environ={})
    assert not hasattr(auditpage, "redact")  # the report's config dump and the summary's use this very rule
    out = cfg.redacted()
    assert out == redaction.redact(cfg.data)
    assert out["images"]["pullSecrets"] == ["<redacted>", "<redacted>"]  # as the config reference says
    assert cfg.get("images.pullSecrets") == ["regcred", "mirror-cred"]  # the config itself untouched


def test_text_only_redaction_keeps_keys_that_are_names():
    summary = {"left_out_nodes": {"key-node-1": {"why": "cordoned"}}, "node_pools": {"token-ring-0": "a"},
               "results": [{"message": f"API said: Bearer {JWT}"}]}
    out = redaction.redact(summary, secret_keys=())
    assert out["left_out_nodes"] == summary["left_out_nodes"] and out["node_pools"] == summary["node_pools"]
    assert JWT not in out["results"][0]["message"]


def test_exec_credential_plugin_stderr_on_the_root_logger_is_scrubbed(tmp_path: Path, caplog):
    kc = tmp_path / "kc.yaml"
    kc.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
                  "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: sh, "
                  f"args: ['-c', 'echo \"refresh failed for https://bot:{GHP}@idp.example.com token={GHP}\" >&2; "
                  "exit 1'], interactiveMode: Never}}}]\n"
                  "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n")
    with caplog.at_level(logging.ERROR):
        kconfig.load_kube_config(config_file=str(kc), client_configuration=k8s.Configuration())
    exec_records = [r for r in caplog.records if "exec:" in r.getMessage()]
    assert exec_records and all(r.name == "root" for r in exec_records)  # where the client logs it
    assert GHP not in caplog.text and "idp.example.com" in caplog.text


def test_pytest_metadata_environment_table_is_redacted():
    metadata = {"Python": "3.11.9", "GIT_URL": f"https://bot:{GHP}@github.com/org/repo.git",
                "CI_JOB_TOKEN": "glcbt-64_abcdefghijklmnop", "Plugins": {"html": "4.2.0"}}
    same = metadata
    scrub.scrub_metadata(metadata)
    assert metadata is same  # pytest-html reads this very dict
    assert metadata["GIT_URL"] == "https://<redacted>@github.com/org/repo.git"
    assert metadata["CI_JOB_TOKEN"] == "<redacted>" and metadata["Plugins"] == {"html": "4.2.0"}


def test_a_report_is_scrubbed_in_its_traceback_sections_and_properties():
    class Report:
        longrepr = f"E   ApiException: Authorization: Bearer {JWT}\n\x1b[2J"
        sections = [("Captured log call", f"ERROR root:kube_config.py exec: https://u:{GHP}@h")]
        user_properties = [("message", f"bad token {JWT}"), ("expected", 4)]

    r = Report()
    scrub.scrub_report(r)
    text = str(r.longrepr) + str(r.sections) + str(r.user_properties)
    assert JWT not in text and GHP not in text and "\x1b" not in text
    assert ("expected", 4) in r.user_properties


def test_a_coded_skip_reads_as_pytest_skip_does_without_a_python_class():
    class Report:
        longrepr = ("/runner/work/tests/topology/test_topology.py", 8,
                    "gpuconform.pytest_plugin.handover.Skip: [NOTCHECKED-DRA-PATH] gpu-node-dra: not on DRA")
        sections: list = []
        user_properties: list = []

    r = Report()
    scrub.scrub_report(r)
    assert r.longrepr[2] == "Skipped: [NOTCHECKED-DRA-PATH] gpu-node-dra: not on DRA"
    r.longrepr = ("f.py", 1, "Skipped: [SKIP-F07-BUSY] x")
    scrub.scrub_report(r)
    assert r.longrepr[2] == "Skipped: [SKIP-F07-BUSY] x"


def test_the_html_environment_table_is_escaped_once_for_pytest_html_s_markup():
    from gpuconform.pytest_plugin import html_report

    class Report:
        title = ""
        data = {"environment": {"CI_JOB_TOKEN": "<redacted>", "Plugins": {"a&b": "1 < 2"}}}

        def set_data(self, key, value):
            self.data[key] = value

    r = Report()
    html_report.pytest_html_report_title(r)
    assert r.title == html_report.TITLE
    assert r.data["environment"] == {"CI_JOB_TOKEN": "&lt;redacted&gt;", "Plugins": {"a&amp;b": "1 &lt; 2"}}
