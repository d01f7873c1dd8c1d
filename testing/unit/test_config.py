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
    ("sharing.renamed", "maybe", "auto, true or false"),
    ("sharing.strategy", "mig", "auto|none|time-slicing|mps"),
    ("mig.strategy", "both", "auto|none|single|mixed"),
    ("topology.policy", "strict", "single-numa-node"),
    ("images.pullPolicy", "always", "Always|IfNotPresent|Never"),
    ("images.probe", "busy box", "image reference"),
    ("limits.qps", "0", "positive number"),
    ("coverage.minCertifiedFraction", "1.5", "between 0 and 1"),
    ("tolerations", "[a, b]", "entry 0 is not a Kubernetes toleration: must be a mapping"),
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


# ------------------------------------------------------------------ the schema (gpuconform/config.py FIELDS)

import re  # noqa: E402
from pathlib import Path  # noqa: E402

import yaml  # noqa: E402

from gpuconform.config import BY_KEY, FIELDS, OUTSIDE_ENV, Config  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_every_field_has_a_doc_an_environment_name_and_a_rule():
    assert len(BY_KEY) == len(FIELDS)  # keys unique
    for f in FIELDS:
        assert f.doc.strip() and "\n" not in f.doc, f.key
        assert f.kind.name and f.kind.rule, f.key
        assert f.env == env_name(f.key) and f.env.startswith("GPUCONFORM_"), f.key
    envs = [f.env for f in FIELDS]
    assert len(set(envs)) == len(envs)
    assert not set(envs) & set(OUTSIDE_ENV), "a schema variable would collide with one read outside the loader"


def test_every_default_passes_its_own_check():
    for f in FIELDS:
        assert f.kind.check(f.default) is None, f.key


def test_defaults_round_trip_through_a_file(tmp_path):
    p = write(tmp_path, yaml.safe_dump(gconfig.defaults(), sort_keys=False))
    c = load(p, environ={})
    assert c.data == gconfig.DEFAULTS
    assert set(c.sources) == set(BY_KEY)  # every key was read from the file


def test_defaults_round_trip_as_text():
    """Every default written as an environment or --gpuconform-set string reads back as itself."""
    for f in FIELDS:
        if f.key == "preset":
            continue  # "" = no preset; a preset name is tested with the presets
        text = f.default if isinstance(f.default, str) else yaml.safe_dump(f.default, default_flow_style=True).strip()
        text = text.removesuffix("...").strip()
        assert load(None, {f.key: text}, environ={}).get(f.key) == f.default, f.key
        assert load(None, environ={f.env: text}).get(f.key) == f.default, f.key


def test_defaults_match_the_nested_defaults():
    for f in FIELDS:
        assert Config(gconfig.defaults()).get(f.key) == f.default


def _bad(f) -> tuple[str, bool]:
    """A bad value for `f` as YAML text, and whether it is also bad as an environment / CLI string."""
    kind = type(f.kind).__name__
    special = {"resourceName": "gpu", "nodes.expectedGpus": "-1", "sharing.replicas": "0",
               "sharing.renamed": "maybe", "preset": "nvidia-mig-triple"}
    if f.key in special:
        return special[f.key], True
    if f.kind is gconfig.SELECTOR:
        return "a b", True
    if f.kind is gconfig.IMAGE:
        return "busy box", True
    return {"Enum": ("bogus", True), "Int": ("many", True), "Number": ("lots", True), "Duration": ("fast", True),
            "ListOf": ("5", True), "Tolerations": ("5", True), "MapOf": ("5", True), "Bool": ("maybe", False),
            "Str": ("[1]", False)}[kind]


def _nested(dotted: str, value) -> dict:
    for part in reversed(dotted.split(".")):
        value = {part: value}
    return value


@pytest.mark.parametrize("key", [f.key for f in FIELDS])
def test_a_bad_value_is_one_line_naming_its_source(tmp_path, key):
    f = BY_KEY[key]
    text, as_text_too = _bad(f)
    p = write(tmp_path, yaml.safe_dump(_nested(key, yaml.safe_load(text))))
    tries = [(lambda: load(p, environ={}), str(p))]
    if as_text_too:
        tries += [(lambda: load(None, environ={f.env: text}), f"environment variable {f.env}"),
                  (lambda: load(None, {key: text}, environ={}), f"--gpuconform-set {key}")]
    for attempt, source in tries:
        with pytest.raises(ConfigError) as e:
            attempt()
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith(source) and f"'{key}'" in msg, msg


def test_a_bad_yaml_value_on_the_command_line_is_a_config_error():
    with pytest.raises(ConfigError) as e:
        load(None, {"tolerations": "[unclosed"}, environ={})
    assert str(e.value).startswith("--gpuconform-set tolerations: 'tolerations' not valid YAML")


def test_mig_profiles_and_pool_counts_name_the_bad_entry(tmp_path):
    with pytest.raises(ConfigError, match=r"'mig.profiles' profile 'mig-1g.5gb': expected a non-negative integer"):
        load(write(tmp_path, "mig:\n  profiles: {mig-1g.5gb: seven}\n"), environ={})
    with pytest.raises(ConfigError, match=r"'nodes.expectedGpus' pool 'a100': expected a non-negative integer"):
        load(write(tmp_path, "nodes:\n  poolLabel: pool\n  expectedGpus: {a100: -2}\n"), environ={})


def test_expected_gpus_pool_mapping_from_the_command_line():
    c = load(None, {"nodes.expectedGpus": "{a100: 8}", "nodes.poolLabel": "pool"}, environ={})
    assert c.get("nodes.expectedGpus") == {"a100": 8}


def test_get_refuses_a_key_the_schema_does_not_know():
    c = load(None, environ={})
    with pytest.raises(KeyError, match="burst.sample"):
        c.get("burst.sample")
    with pytest.raises(KeyError):
        c.seconds("burst.samples")  # not a duration
    assert c.get("thresholds") == {"scheduleP99": "5s", "startP50": "5s", "startP99": "10s", "allocateP99": "1s",
                                   "rolloutWindow": "30s"}


def test_view_reads_a_recorded_config_dict_with_defaults_for_what_it_lacks():
    c = gconfig.view({"vendor": "amd", "nodes": {"expectedGpus": 4}})
    assert c.get("vendor") == "amd" and c.get("nodes.expectedGpus") == 4
    assert c.get("resourceName") == "nvidia.com/gpu" and c.get("nodes.poolLabel") == ""
    cfg = load(None, environ={})
    assert gconfig.view(cfg) is cfg


def test_every_preset_sets_only_schema_keys_with_valid_values():
    for name, (_, values) in PRESETS.items():
        cfg = load(None, {"preset": name}, environ={})
        for dotted, where in cfg.sources.items():
            assert dotted in BY_KEY and where == ("--gpuconform-set preset" if dotted == "preset" else f"preset {name}")


_ENV_READ = re.compile(r"""os\.(?:environ\.get\(|environ\[|getenv\()\s*["']([A-Z0-9_]+)["']""")


def test_variables_read_outside_the_loader_are_declared():
    """The suite reads no configuration from the environment behind the schema's back (the test bed's own
    variables in localcluster/ and the test harness in testing/ are not the suite)."""
    found = {}
    for d in ("gpuconform", "tests", "manifests"):
        for py in (ROOT / d).rglob("*.py"):
            for name in _ENV_READ.findall(py.read_text()):
                found.setdefault(name, py.relative_to(ROOT))
    undeclared = {n: str(p) for n, p in found.items() if n not in OUTSIDE_ENV and n != "HOSTNAME"}
    assert not undeclared, f"declare these in config.OUTSIDE_ENV (or make them schema fields): {undeclared}"


_OTHER_ACCESS = re.compile(r"""\bcfg\[|\brun\.data\b|\.cfg\.data\b|\bd\[["'](?:nodes|plugin|operator|topology)["']\]""")


def test_checks_and_fixtures_read_the_config_one_way():
    """cfg.get("a.b") / cfg.seconds("a.b") only: no cfg["a"]["b"] and no raw-dict access (config.py and the
    serialisation of the whole config for the report are the exceptions)."""
    offenders = []
    for d in ("gpuconform", "tests"):
        for py in (ROOT / d).rglob("*.py"):
            if py.name == "config.py":
                continue
            for i, line in enumerate(py.read_text().splitlines(), 1):
                if _OTHER_ACCESS.search(line):
                    offenders.append(f"{py.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_subscripting_a_config_says_how_to_read_it():
    with pytest.raises(TypeError, match=r"cfg.get\('burst.<key>'\)"):
        load(None, environ={})["burst"]


def test_timing_constants_are_documented_and_positive():
    from gpuconform import timing

    source = Path(timing.__file__).read_text()
    names = [n for n in vars(timing) if n.isupper()]
    assert len(names) >= 10
    for name in names:
        value = getattr(timing, name)
        assert isinstance(value, (int, float)) and value > 0, name
        assert re.search(rf"#: .*\n(?:#: .*\n)*{name} = ", source), f"{name} has no #: comment above it"
    # what a user may tune is config, not a constant: no constant shadows a timeout key
    assert not {n.lower() for n in names} & {f.key.split(".")[-1].lower() for f in FIELDS}


# ------------------------------------------------------------------ hostile input (issue 18; test_hostile_input.py)

@pytest.mark.parametrize("key, text", [("thresholds.startP99", ".nan"), ("timeouts.podStart", ".inf"),
                                       ("baseline.latencyAbsolute", "-.inf"), ("limits.qps", ".inf"),
                                       ("limits.qps", ".nan"), ("coverage.minCertifiedFraction", ".nan")])
def test_non_finite_numbers_are_refused(tmp_path, key, text):
    """NaN compares false with every threshold (the latency check could never fail) and inf overflows int()."""
    p = write(tmp_path, yaml.safe_dump(_nested(key, yaml.safe_load(text))))
    with pytest.raises(ConfigError) as e:
        load(p, environ={})
    assert str(e.value).startswith(str(p)) and f"'{key}'" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_parse_duration_refuses_non_finite_numbers(value):
    with pytest.raises(ConfigError, match="finite"):
        parse_duration(value, "x")


@pytest.mark.parametrize("entry, fragment", [
    ("a", "must be a mapping"),
    ({"key": "nvidia.com/gpu", "operator": "exists"}, "operator must be Exists or Equal, got 'exists'"),
    ({"key": "a", "operator": "Exists", "value": "b"}, "value must be empty with operator Exists"),
    ({"operator": "Equal", "value": "b"}, "operator must be Exists when key is empty"),
    ({"key": "a", "effect": "NoSchedul"}, "effect must be NoSchedule, PreferNoSchedule, NoExecute or empty"),
    ({"key": "a", "effect": "NoSchedule", "tolerationSeconds": 5}, "only allowed with effect NoExecute"),
    ({"key": "a", "effect": "NoExecute", "tolerationSeconds": "5m"}, "tolerationSeconds must be an integer"),
    ({"key": "a", "effct": "NoSchedule"}, "unknown field(s) effct"),
    ({"key": "bad key!"}, "key must be a label key"),
    ({"key": "a", "value": "x" * 64}, "value must be a label value"),
    ({"key": 5}, "key must be a string"),
])
def test_every_toleration_entry_is_validated_as_the_api_server_would(entry, fragment):
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, entry]
    with pytest.raises(ConfigError) as e:
        load(None, {"tolerations": yaml.safe_dump(tolerations, default_flow_style=True)}, environ={})
    msg = str(e.value)
    assert msg.startswith("--gpuconform-set tolerations: 'tolerations' entry 1 is not a Kubernetes toleration")
    assert fragment in msg and "\n" not in msg, msg


@pytest.mark.parametrize("entry", [
    {"operator": "Exists"},  # tolerates every taint
    {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "value": "present"},  # operator defaults to Equal
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
    {"key": "gpu", "operator": "Exists", "effect": ""},  # every effect
])
def test_valid_tolerations_pass(entry):
    assert load(None, environ={"GPUCONFORM_TOLERATIONS": yaml.safe_dump([entry])}).get("tolerations") == [entry]


def test_yaml_aliases_are_refused_from_every_source(tmp_path):
    bomb = ("tolerations:\n- &a {key: a, operator: Exists, effect: [x, x, x, x, x, x, x, x, x, x]}\n"
            "- {key: b, operator: Exists, effect: [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]}\n")
    p = write(tmp_path, bomb)
    for attempt, source in [(lambda: load(p, environ={}), f"{p} line 2"),
                            (lambda: load(None, environ={"GPUCONFORM_TOLERATIONS": "[&t {operator: Exists}, *t]"}),
                             "environment variable GPUCONFORM_TOLERATIONS"),
                            (lambda: load(None, {"mig.profiles": "{a: &n 1, b: *n}"}, environ={}),
                             "--gpuconform-set mig.profiles")]:
        with pytest.raises(ConfigError) as e:
            attempt()
        assert str(e.value).startswith(source) and "anchors and aliases" in str(e.value), str(e.value)


def test_a_file_over_the_size_cap_is_refused_before_parsing(tmp_path):
    p = write(tmp_path, "# " + "x" * gconfig.MAX_CONFIG_BYTES + "\n")
    with pytest.raises(ConfigError, match=f"larger than {gconfig.MAX_CONFIG_BYTES} bytes"):
        load(p, environ={})
