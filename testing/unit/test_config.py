"""config: defaults, file/env/CLI layering, validation errors that name their source, redaction."""

from __future__ import annotations

import pytest

from gpuconform import config as gconfig
from gpuconform.config import ConfigError, env_name, load, parse_duration


def write(tmp_path, text: str, name: str = "gpuconform.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_defaults_load():
    c = load(None, environ={})
    assert c.get("resourceName") == "nvidia.com/gpu"
    assert c.seconds("thresholds.startP99") == 10.0
    assert c.seconds("thresholds.scheduleP99") == 5.0
    assert c.get("limits.maxGpusPerNode") == 8
    assert c.sources == {}
    assert c.data == gconfig.DEFAULTS and c.data is not gconfig.DEFAULTS


def test_defaults_are_not_mutated_by_a_load(tmp_path):
    load(write(tmp_path, "nodes:\n  selector: a=b\nmig:\n  profiles:\n    mig-1g.5gb: 7\n"), environ={})
    assert gconfig.DEFAULTS["nodes"]["selector"] == ""
    assert gconfig.DEFAULTS["mig"]["profiles"] == {}


def test_file_values_and_sources(tmp_path):
    p = write(tmp_path, "thresholds:\n  startP99: 8s\nlimits:\n  maxGpusPerNode: 2\nmig:\n  profiles:\n    mig-1g.5gb: 7\n")
    c = load(p, environ={})
    assert c.seconds("thresholds.startP99") == 8.0
    assert c.get("limits.maxGpusPerNode") == 2
    assert c.get("mig.profiles") == {"mig-1g.5gb": 7}
    assert c.sources["thresholds.startP99"] == str(p)


def test_empty_file_is_defaults(tmp_path):
    assert load(write(tmp_path, ""), environ={}).data == gconfig.DEFAULTS


def test_unknown_key_names_file_and_key(tmp_path):
    p = write(tmp_path, "thresholds:\n  startP98: 5s\n")
    with pytest.raises(ConfigError) as e:
        load(p, environ={})
    msg = str(e.value)
    assert str(p) in msg and "'thresholds.startP98'" in msg and "startP99" in msg
    assert "\n" not in msg


def test_unknown_top_level_key(tmp_path):
    p = write(tmp_path, "resourcename: nvidia.com/gpu\n")
    with pytest.raises(ConfigError, match=r"unknown key 'resourcename'"):
        load(p, environ={})


def test_section_must_be_mapping(tmp_path):
    with pytest.raises(ConfigError, match=r"'thresholds' must be a mapping"):
        load(write(tmp_path, "thresholds: 5s\n"), environ={})


def test_top_level_must_be_mapping(tmp_path):
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load(write(tmp_path, "- a\n- b\n"), environ={})


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load(tmp_path / "nope.yaml", environ={})


@pytest.mark.parametrize("value", ["fast", "-5s", "5h", "true"])
def test_bad_duration_names_file_and_key(tmp_path, value):
    p = write(tmp_path, f"thresholds:\n  startP99: {value}\n")
    with pytest.raises(ConfigError) as e:
        load(p, environ={})
    assert str(p) in str(e.value) and "thresholds.startP99" in str(e.value)
    assert "duration" in str(e.value) or "negative" in str(e.value)


def test_zero_timeout_rejected(tmp_path):
    with pytest.raises(ConfigError, match=r"'timeouts.podStart' must be positive"):
        load(write(tmp_path, "timeouts:\n  podStart: 0s\n"), environ={})


@pytest.mark.parametrize("raw, seconds", [("250ms", 0.25), ("5s", 5.0), ("2m", 120.0), (5, 5.0), ("1.5", 1.5),
                                          (" 3s ", 3.0)])
def test_parse_duration(raw, seconds):
    assert parse_duration(raw, "x") == seconds


def test_env_name():
    assert env_name("thresholds.startP99") == "GPUCONFORM_THRESHOLDS_START_P99"
    assert env_name("nodes.expectedGpus") == "GPUCONFORM_NODES_EXPECTED_GPUS"
    assert env_name("coverage.minCertifiedFraction") == "GPUCONFORM_COVERAGE_MIN_CERTIFIED_FRACTION"
    assert env_name("resourceName") == "GPUCONFORM_RESOURCE_NAME"


def test_env_override():
    c = load(None, environ={"GPUCONFORM_THRESHOLDS_START_P99": "7s", "GPUCONFORM_LIMITS_QPS": "12",
                            "GPUCONFORM_NODE_PROBE_ENABLED": "false", "GPUCONFORM_LIMITS_MAX_GPUS_PER_NODE": "2"})
    assert c.seconds("thresholds.startP99") == 7.0
    assert c.get("limits.qps") == 12.0
    assert c.get("nodeProbe.enabled") is False
    assert c.get("limits.maxGpusPerNode") == 2
    assert c.sources["thresholds.startP99"] == "environment variable GPUCONFORM_THRESHOLDS_START_P99"


def test_env_override_reads_os_environ(monkeypatch):
    monkeypatch.setenv("GPUCONFORM_THRESHOLDS_START_P99", "9s")
    assert load(None).seconds("thresholds.startP99") == 9.0


def test_bad_env_value_names_variable():
    with pytest.raises(ConfigError) as e:
        load(None, environ={"GPUCONFORM_LIMITS_MAX_GPUS_PER_NODE": "many"})
    assert "GPUCONFORM_LIMITS_MAX_GPUS_PER_NODE" in str(e.value) and "limits.maxGpusPerNode" in str(e.value)


def test_cli_overrides():
    c = load(None, {"thresholds.startP99": "8s", "limits.maxGpusPerNode": "2", "keepNamespaceOnFailure": "true",
                    "tolerations": '[{"operator": "Exists"}]', "mig.profiles": "{mig-1g.5gb: 7}"}, environ={})
    assert c.seconds("thresholds.startP99") == 8.0
    assert c.get("limits.maxGpusPerNode") == 2
    assert c.get("keepNamespaceOnFailure") is True
    assert c.get("tolerations") == [{"operator": "Exists"}]
    assert c.get("mig.profiles") == {"mig-1g.5gb": 7}
    assert c.sources["limits.maxGpusPerNode"] == "--gpuconform-set limits.maxGpusPerNode"


def test_cli_unknown_key():
    with pytest.raises(ConfigError, match=r"--gpuconform-set nope=\.\.\.: unknown key 'nope'"):
        load(None, {"nope": "1"}, environ={})


def test_cli_bad_value_names_option():
    with pytest.raises(ConfigError) as e:
        load(None, {"limits.maxGpusPerNode": "0"}, environ={})
    assert "--gpuconform-set limits.maxGpusPerNode" in str(e.value) and "got 0" in str(e.value)


def test_precedence_cli_over_env_over_file(tmp_path):
    p = write(tmp_path, "thresholds:\n  startP99: 11s\n  startP50: 4s\n  scheduleP99: 3s\n")
    env = {"GPUCONFORM_THRESHOLDS_START_P99": "12s", "GPUCONFORM_THRESHOLDS_START_P50": "6s"}
    c = load(p, {"thresholds.startP99": "13s"}, environ=env)
    assert c.seconds("thresholds.startP99") == 13.0  # CLI
    assert c.seconds("thresholds.startP50") == 6.0  # env over file
    assert c.seconds("thresholds.scheduleP99") == 3.0  # file over default
    assert c.seconds("thresholds.allocateP99") == 1.0  # default
    assert c.sources["thresholds.startP50"].startswith("environment variable")
    assert c.sources["thresholds.scheduleP99"] == str(p)


def test_invalid_yaml_names_line(tmp_path):
    p = write(tmp_path, "nodes:\n  selector: a=b\n  exclude: [unclosed\nlimits:\n  qps: 1\n")
    with pytest.raises(ConfigError) as e:
        load(p, environ={})
    msg = str(e.value)
    assert str(p) in msg and "not valid YAML" in msg
    assert " line " in msg


def test_invalid_yaml_line_number_is_right(tmp_path):
    p = write(tmp_path, "nodes:\n  selector: a=b\n\tbad: tab\n")
    with pytest.raises(ConfigError, match=r" line 3:"):
        load(p, environ={})


def test_redacted_hides_pull_secrets(tmp_path):
    c = load(write(tmp_path, "images:\n  pullSecrets: [regcred, other-secret]\n"), environ={})
    r = c.redacted()
    assert r["images"]["pullSecrets"] == ["<redacted>", "<redacted>"]
    assert "regcred" not in repr(r)
    assert c.get("images.pullSecrets") == ["regcred", "other-secret"]  # the config itself is untouched


def test_expected_gpus_forms(tmp_path):
    assert load(write(tmp_path, "nodes:\n  expectedGpus: 4\n"), environ={}).get("nodes.expectedGpus") == 4
    c = load(write(tmp_path, "nodes:\n  poolLabel: pool\n  expectedGpus: {a100: 8, l4: 1}\n"), environ={})
    assert c.get("nodes.expectedGpus") == {"a100": 8, "l4": 1}


def test_expected_gpus_mapping_needs_pool_label(tmp_path):
    p = write(tmp_path, "nodes:\n  expectedGpus: {a100: 8}\n")
    with pytest.raises(ConfigError) as e:
        load(p, environ={})
    assert str(p) in str(e.value) and "nodes.poolLabel" in str(e.value)


@pytest.mark.parametrize("bad", ["-1", "many", "{a100: -2}", "true"])
def test_expected_gpus_invalid(tmp_path, bad):
    p = write(tmp_path, f"nodes:\n  poolLabel: pool\n  expectedGpus: {bad}\n")
    with pytest.raises(ConfigError, match="nodes.expectedGpus"):
        load(p, environ={})


def test_expected_gpus_from_cli():
    assert load(None, {"nodes.expectedGpus": "4"}, environ={}).get("nodes.expectedGpus") == 4


def test_expected_gpus_from_env():
    assert load(None, environ={"GPUCONFORM_NODES_EXPECTED_GPUS": "4"}).get("nodes.expectedGpus") == 4


def test_sharing_replicas_from_cli():
    assert load(None, {"sharing.replicas": "4"}, environ={}).get("sharing.replicas") == 4


@pytest.mark.parametrize("key, value, fragment", [
    ("resourceName", "gpu", "vendor.com/name"),
    ("nodes.selector", "a b", "label selector"),
    ("plugin.namespace", "gpu-operator", "only narrows plugin.selector"),
    ("sharing.renamed", "maybe", "auto, true or false"),
    ("sharing.strategy", "mig", "auto|none|time-slicing|mps"),
    ("mig.strategy", "both", "auto|none|single|mixed"),
    ("topology.policy", "strict", "single-numa-node"),
    ("images.pullPolicy", "always", "Always|IfNotPresent|Never"),
    ("images.probe", "busy box", "image reference"),
    ("limits.qps", "0", "positive number"),
    ("coverage.minCertifiedFraction", "1.5", "between 0 and 1"),
    ("tolerations", "[a, b]", "list of Kubernetes tolerations"),
])
def test_validation_errors(key, value, fragment):
    with pytest.raises(ConfigError) as e:
        load(None, {key: value}, environ={})
    assert fragment in str(e.value) and key in str(e.value)


# ------------------------------------------------------------------ vendor presets

from gpuconform.presets import PRESETS  # noqa: E402


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_loads_and_validates(name):
    cfg = gconfig.load(None, {"preset": name}, environ={})
    assert cfg.sources["resourceName"] == f"preset {name}"
    assert cfg.get("vendor") in ("nvidia", "amd", "intel")


def test_preset_sits_under_the_file_and_env_and_cli(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("preset: nvidia-time-slicing\nsharing:\n  replicas: 8\n")
    cfg = gconfig.load(f, {}, environ={})
    assert cfg.get("sharing.strategy") == "time-slicing" and cfg.sources["sharing.strategy"] == "preset nvidia-time-slicing"
    assert cfg.get("sharing.replicas") == 8 and cfg.sources["sharing.replicas"] == str(f)
    cfg = gconfig.load(f, {}, environ={"GPUCONFORM_PRESET": "nvidia-time-slicing-renamed"})
    assert cfg.get("sharing.renamed") is True
    cfg = gconfig.load(f, {"preset": "amd", "nodes.expectedGpus": "8"}, environ={})
    assert cfg.get("resourceName") == "amd.com/gpu" and cfg.get("nodes.expectedGpus") == 8


def test_unknown_preset_is_one_line_naming_where_it_came_from(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("preset: nvidia-mig-triple\n")
    with pytest.raises(ConfigError) as e:
        gconfig.load(f, {}, environ={})
    msg = str(e.value)
    assert "\n" not in msg and str(f) in msg and "'nvidia-mig-triple'" in msg and "nvidia-mig-mixed" in msg


def test_unknown_vendor_is_rejected():
    with pytest.raises(ConfigError, match="vendor"):
        gconfig.load(None, {"vendor": "matrox"}, environ={})
