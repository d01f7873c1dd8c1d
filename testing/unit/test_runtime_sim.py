"""Unit tests of the test bed's nvidia runtime stand-in (localcluster/runtime_sim.py, nvidia-runtime-sim) against
temporary bundles."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[2] / "localcluster"
sys.path.insert(0, str(HERE))
import runtime_sim as rs  # noqa: E402

GPUS = 4
UUIDS = [f"GPU-0000000{i}-aaaa-bbbb-cccc-00000000000{i}" for i in range(GPUS)]
MIG = "MIG-11111111-2222-3333-4444-555555555555"
NODE_ENV = f"{rs.VISIBLE_DEVICES}=all"


def hardware(mig: bool = False) -> dict:
    gpus = [{"index": i, "minor": i, "uuid": UUIDS[i], "name": "NVIDIA A100-SXM4-40GB",
             "pciBusId": f"00000000:{0x07 + i * 8:02X}:00.0", "numaNode": 0, "memoryTotalMiB": 40960}
            for i in range(GPUS)]
    if mig:
        gpus[1]["migDevices"] = [{"profile": "1g.5gb", "uuid": MIG, "gi": 7, "ci": 0}]
    return {"driverVersion": "550.54.15", "cudaVersion": "12.4", "gpus": gpus}


@pytest.fixture
def sim(tmp_path, monkeypatch) -> Path:
    """A GPU_SIM_ROOT like cluster.write_hardware leaves it: hardware.json and char nodes dev/nvidia<i> (1:3)."""
    root = tmp_path / "gpu-sim"
    (root / "dev").mkdir(parents=True)
    (root / "run").mkdir()
    for i in range(GPUS):
        try:
            os.mknod(root / "dev" / f"nvidia{i}", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("creating device nodes needs root (CAP_MKNOD)")
        os.chmod(root / "dev" / f"nvidia{i}", 0o666)
    (root / "hardware.json").write_text(json.dumps(hardware()))
    monkeypatch.setenv("GPU_SIM_ROOT", str(root))
    monkeypatch.delenv("GPU_SIM_OOM_CLAMP", raising=False)
    monkeypatch.delenv("GPU_SIM_RUNTIME_LOG", raising=False)
    return root


def spec(env: list[str] | None = None, privileged: bool = False, oom: int | None = None) -> dict:
    caps = ["CAP_CHOWN", "CAP_KILL"] + (["CAP_SYS_ADMIN"] if privileged else [])
    proc: dict = {"args": ["/bin/sh"], "env": ["PATH=/usr/bin:/bin", *(env or [])],
                  "capabilities": {"bounding": caps, "effective": caps}}
    if oom is not None:
        proc["oomScoreAdj"] = oom
    return {"ociVersion": "1.0.2", "process": proc, "mounts": [{"destination": "/proc", "type": "proc"}],
            "linux": {"resources": {"devices": [{"allow": False, "access": "rwm"}]}}}


def plugin_injected(s: dict, sim: Path, index: int) -> dict:
    """What containerd adds for the plugin's Allocate response for GPU `index` (its env var first, as the kubelet
    orders it)."""
    s["process"]["env"].insert(1, f"{rs.VISIBLE_DEVICES}={UUIDS[index]}")
    s["linux"]["devices"] = [{"path": f"/dev/nvidia{index}", "type": "c", "major": 1, "minor": 3,
                              "fileMode": 0o666, "uid": 0, "gid": 0}]
    s["linux"]["resources"]["devices"].append({"allow": True, "type": "c", "major": 1, "minor": 3, "access": "rw"})
    s["mounts"].append({"destination": f"/run/gpu-sim/{UUIDS[index]}.json", "type": "bind",
                        "source": str(sim / "run" / f"{UUIDS[index]}.json"), "options": ["rbind", "rprivate", "ro"]})
    return s


def accept(sim: Path, on: bool = True) -> dict:
    (sim / "runtime.json").write_text(json.dumps({"acceptEnvvarUnprivileged": on}))
    return rs.load_settings(str(sim))


def paths(s: dict) -> tuple[list[str], list[str]]:
    return ([d["path"] for d in s.get("linux", {}).get("devices", [])],
            [m["destination"] for m in s["mounts"] if m["destination"].startswith("/run/gpu-sim/")])


def log_text(sim: Path) -> str:
    p = sim / "runtime.log"
    return p.read_text() if p.exists() else ""


# ---------------------------------------------------------------- arguments

@pytest.mark.parametrize("args, bundle, create", [
    (["--root", "/run/runc", "--log", "/b/log.json", "create", "--bundle", "/b", "--pid-file", "/p", "id"], "/b", True),
    (["create", "--bundle=/b", "id"], "/b", True),
    (["create", "-b", "/b", "id"], "/b", True),
    (["create", "-bundle", "/b", "id"], "/b", True),
    (["--root", "/r", "start", "id"], None, False),
    (["--root", "/r", "state", "id"], None, False),
    (["run", "--bundle", "/b", "id"], "/b", False),
    (["run", "--bundle", "create", "id"], "create", False),  # a bundle directory named create is not the command
])
def test_arguments_are_read_as_the_toolkit_reads_them(args, bundle, create):
    assert rs.bundle_dir(args) == bundle
    assert rs.has_create(args) is create


# ---------------------------------------------------------------- settings

def test_settings_default_to_ignoring_the_env_var(sim):
    assert rs.load_settings(str(sim)) == rs.DEFAULTS
    assert log_text(sim) == ""


@pytest.mark.parametrize("content", ["{not json", "[true]", '{"acceptEnvvarUnprivileged": "yes"}', "\x00\x01"])
def test_malformed_settings_fall_back_to_the_defaults_and_are_logged(sim, content):
    (sim / "runtime.json").write_text(content)
    assert rs.load_settings(str(sim)) == rs.DEFAULTS
    assert "runtime.json" in log_text(sim)


def test_unknown_settings_keys_are_logged_and_known_ones_kept(sim):
    (sim / "runtime.json").write_text('{"acceptEnvvarUnprivileged": true, "extra": 1}')
    assert rs.load_settings(str(sim)) == {**rs.DEFAULTS, "acceptEnvvarUnprivileged": True}
    assert "unknown key 'extra'" in log_text(sim)


def test_the_last_env_entry_wins():
    env = ["A=1", f"{rs.VISIBLE_DEVICES}={UUIDS[0]}", "B=2", f"{rs.VISIBLE_DEVICES}=all", "C"]
    assert rs.last_env(env, rs.VISIBLE_DEVICES) == "all"
    assert rs.last_env(["A=1"], rs.VISIBLE_DEVICES) is None
    assert rs.last_env(None, rs.VISIBLE_DEVICES) is None
    assert rs.last_env([f"{rs.VISIBLE_DEVICES}="], rs.VISIBLE_DEVICES) == ""


# ---------------------------------------------------------------- injection

def test_healthy_default_ignores_the_containers_env_var(sim):
    s = spec([NODE_ENV])
    before = json.loads(json.dumps(s))
    assert rs.edit_spec(s, str(sim), rs.load_settings(str(sim)), clamp=False, create=True) is False
    assert s == before
    assert "Ignoring devices requested by environment variable(s) in unprivileged container" in log_text(sim)


def test_accepted_env_all_injects_every_gpu_like_allocate(sim):
    s = spec([NODE_ENV])
    assert rs.edit_spec(s, str(sim), accept(sim), clamp=False, create=True) is True
    devs, mounts = paths(s)
    assert devs == [f"/dev/nvidia{i}" for i in range(GPUS)]
    assert mounts == [f"/run/gpu-sim/{u}.json" for u in UUIDS]
    assert s["linux"]["devices"][0] == {"path": "/dev/nvidia0", "type": "c", "major": 1, "minor": 3,
                                        "fileMode": 0o666, "uid": 0, "gid": 0}
    rules = s["linux"]["resources"]["devices"]
    assert rules[0] == {"allow": False, "access": "rwm"}  # containerd's deny-all stays first
    assert rules[1:] == [{"allow": True, "type": "c", "major": 1, "minor": 3, "access": "rw"}] * GPUS
    m = s["mounts"][-1]
    assert m["source"] == str(sim / "run" / f"{UUIDS[3]}.json") and m["options"] == ["rbind", "rprivate", "ro"]
    # Info files the plugin had not written are written the way it writes them.
    info = json.loads((sim / "run" / f"{UUIDS[2]}.json").read_text())
    assert list(info) == ["index", "uuid", "name", "pciBusId", "numaNode", "memoryTotalMiB", "minor",
                          "driverVersion", "cudaVersion"]
    assert info["index"] == 2 and info["driverVersion"] == "550.54.15"


def test_the_plugins_info_file_is_not_overwritten(sim):
    (sim / "run" / f"{UUIDS[0]}.json").write_text('{"uuid": "%s", "driverVersion": "470.82.01"}\n' % UUIDS[0])
    rs.edit_spec(spec([NODE_ENV]), str(sim), accept(sim), clamp=False, create=True)
    assert "470.82.01" in (sim / "run" / f"{UUIDS[0]}.json").read_text()


def test_one_gpu_pod_with_env_all_sees_all_gpus_without_duplicates(sim):
    s = plugin_injected(spec([NODE_ENV]), sim, 1)  # the plugin's NVIDIA_VISIBLE_DEVICES first, the pod's last
    rs.edit_spec(s, str(sim), accept(sim), clamp=False, create=True)
    devs, mounts = paths(s)
    assert sorted(devs) == [f"/dev/nvidia{i}" for i in range(GPUS)]
    assert sorted(mounts) == sorted(f"/run/gpu-sim/{u}.json" for u in UUIDS)
    assert len(s["linux"]["resources"]["devices"]) == 1 + GPUS


def test_the_plugins_own_env_var_adds_nothing_when_accepted(sim):
    s = plugin_injected(spec(), sim, 2)
    assert rs.edit_spec(s, str(sim), accept(sim), clamp=False, create=True) is False
    assert paths(s) == (["/dev/nvidia2"], [f"/run/gpu-sim/{UUIDS[2]}.json"])


@pytest.mark.parametrize("value", ["void", "none", "", " "])
def test_void_none_and_empty_inject_nothing(sim, value):
    s = spec([f"{rs.VISIBLE_DEVICES}={value}"])
    assert rs.edit_spec(s, str(sim), accept(sim), clamp=False, create=True) is False
    assert paths(s) == ([], [])


def test_a_list_of_uuids_and_indexes_selects_those_and_skips_unknown_ids(sim):
    s = spec([f"{rs.VISIBLE_DEVICES}={UUIDS[3]}, 0,GPU-not-here,0"])
    rs.edit_spec(s, str(sim), accept(sim), clamp=False, create=True)
    assert paths(s) == (["/dev/nvidia3", "/dev/nvidia0"], [f"/run/gpu-sim/{UUIDS[3]}.json",
                                                            f"/run/gpu-sim/{UUIDS[0]}.json"])
    assert "no device 'GPU-not-here'" in log_text(sim)


def test_a_privileged_container_is_honoured_even_by_default(sim):
    s = spec([f"{rs.VISIBLE_DEVICES}=1"], privileged=True)
    assert rs.edit_spec(s, str(sim), rs.load_settings(str(sim)), clamp=False, create=True) is True
    assert paths(s) == (["/dev/nvidia1"], [f"/run/gpu-sim/{UUIDS[1]}.json"])


def test_mig_devices_get_their_parents_node_and_their_own_file(sim):
    (sim / "hardware.json").write_text(json.dumps(hardware(mig=True)))
    s = spec([f"{rs.VISIBLE_DEVICES}={MIG}"])
    rs.edit_spec(s, str(sim), accept(sim), clamp=False, create=True)
    assert paths(s) == (["/dev/nvidia1"], [f"/run/gpu-sim/{MIG}.json"])
    info = json.loads((sim / "run" / f"{MIG}.json").read_text())
    assert info["uuid"] == UUIDS[1] and info["mig"] == {"profile": "1g.5gb", "uuid": MIG, "gi": 7, "ci": 0}
    s = spec([NODE_ENV])
    rs.edit_spec(s, str(sim), accept(sim), clamp=False, create=True)
    assert len(paths(s)[0]) == GPUS and f"/run/gpu-sim/{MIG}.json" in paths(s)[1]


def test_missing_device_node_or_hardware_is_logged_not_fatal(sim):
    (sim / "dev" / "nvidia2").unlink()
    s = spec([NODE_ENV])
    rs.edit_spec(s, str(sim), accept(sim), clamp=False, create=True)
    assert "/dev/nvidia2" not in paths(s)[0] and len(paths(s)[0]) == GPUS - 1
    (sim / "hardware.json").write_text("{")
    s = spec([NODE_ENV])
    assert rs.edit_spec(s, str(sim), accept(sim), clamp=False, create=True) is False
    assert "hardware.json unusable" in log_text(sim)


# ---------------------------------------------------------------- oom clamp

def test_oom_clamp_follows_the_env_then_the_marker_file(sim, monkeypatch):
    assert rs.oom_clamp_wanted(str(sim)) is False
    (sim / "oom-clamp").write_text("x\n")
    assert rs.oom_clamp_wanted(str(sim)) is True
    monkeypatch.setenv("GPU_SIM_OOM_CLAMP", "0")
    assert rs.oom_clamp_wanted(str(sim)) is False
    (sim / "oom-clamp").unlink()
    monkeypatch.setenv("GPU_SIM_OOM_CLAMP", "1")
    assert rs.oom_clamp_wanted(str(sim)) is True


@pytest.mark.parametrize("before, after", [(-998, 0), (-1, 0), (0, 0), (1000, 1000), (None, None)])
def test_clamp_only_raises_negative_scores(before, after):
    s = spec(oom=before)
    rs.clamp_oom(s)
    assert s["process"].get("oomScoreAdj") == after


# ---------------------------------------------------------------- bundles and the executable

def bundle(tmp_path: Path, s: dict, mode: int = 0o600) -> Path:
    b = tmp_path / "bundle"
    b.mkdir(exist_ok=True)
    (b / "config.json").write_text(json.dumps(s, separators=(",", ":")))
    os.chmod(b / "config.json", mode)
    return b


@pytest.mark.parametrize("create", [True, False])
def test_process_bundle_rewrites_the_spec_keeping_its_mode_and_injects_only_at_create(sim, tmp_path, create):
    accept(sim)
    (sim / "oom-clamp").write_text("x\n")
    b = bundle(tmp_path, spec([NODE_ENV], oom=-997))
    rs.process_bundle(str(b), str(sim), create=create)
    out = json.loads((b / "config.json").read_text())
    assert out["process"]["oomScoreAdj"] == 0  # clamped either way
    if create:
        assert len(paths(out)[0]) == GPUS
    else:
        assert paths(out) == ([], [])
    assert stat.S_IMODE((b / "config.json").stat().st_mode) == 0o600
    assert [p.name for p in b.iterdir()] == ["config.json"]  # no temporary file left


@pytest.mark.parametrize("runtime_json", ["{broken", '{"acceptEnvvarUnprivileged": 1}'])
def test_malformed_runtime_json_never_breaks_the_container(sim, tmp_path, runtime_json):
    (sim / "runtime.json").write_text(runtime_json)
    s = spec([NODE_ENV])
    b = bundle(tmp_path, s)
    rs.process_bundle(str(b), str(sim), create=True)
    assert json.loads((b / "config.json").read_text()) == s  # defaults: nothing injected, spec untouched


def test_an_unreadable_spec_is_left_alone(sim, tmp_path):
    b = tmp_path / "bundle"
    b.mkdir()
    (b / "config.json").write_text("{not a spec")
    rs.process_bundle(str(b), str(sim), create=True)
    assert (b / "config.json").read_text() == "{not a spec"
    assert "left as it was" in log_text(sim)
    rs.process_bundle(str(tmp_path / "absent"), str(sim), create=True)  # no spec at all: nothing to do


@pytest.fixture
def fake_runc(tmp_path, monkeypatch) -> Path:
    """A `runc` first on PATH that records its arguments and the spec it was given."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    record = tmp_path / "runc-args"
    (bindir / "runc").write_text(f"""#!/bin/sh
printf '%s\\n' "$@" > {record}
prev=""
for a in "$@"; do
  case "$a" in --bundle=*) cp "${{a#*=}}/config.json" {tmp_path}/runc-saw.json ;; esac
  [ "$prev" = "--bundle" ] && cp "$a/config.json" {tmp_path}/runc-saw.json; prev="$a"
done
exit 0
""")
    (bindir / "runc").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    return record


def run_wrapper(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(HERE / "nvidia-runtime-sim"), *args], capture_output=True, text=True, cwd=cwd,
                          timeout=30)


def test_the_executable_edits_on_create_and_execs_runc_with_the_same_args(sim, tmp_path, fake_runc):
    accept(sim)
    b = bundle(tmp_path, spec([NODE_ENV]))
    args = ["--root", "/run/containerd/runc/k8s.io", "--log", str(b / "log.json"), "--log-format", "json",
            "create", "--bundle", str(b), "--pid-file", str(b / "init.pid"), "ctr-id"]
    out = run_wrapper(args, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "" and out.stderr == ""  # stdio belongs to the container during create
    assert fake_runc.read_text().splitlines() == args
    assert len(paths(json.loads((tmp_path / "runc-saw.json").read_text()))[0]) == GPUS


def test_the_executable_passes_other_commands_through_untouched(sim, tmp_path, fake_runc):
    accept(sim)
    s = spec([NODE_ENV], oom=-998)
    b = bundle(tmp_path, s)
    before = (b / "config.json").read_bytes()
    for args in (["--root", "/r", "state", "ctr-id"], ["--root", "/r", "delete", "--force", "ctr-id"],
                 ["--version"]):
        out = run_wrapper(args, b)
        assert out.returncode == 0, out.stderr
        assert fake_runc.read_text().splitlines() == args
    assert (b / "config.json").read_bytes() == before


def test_the_executable_goes_straight_to_runc_when_nothing_can_change(sim, tmp_path, fake_runc):
    s = spec([NODE_ENV], oom=-998)  # no runtime.json, unprivileged: the toolkit would ignore the variable
    b = bundle(tmp_path, s)
    args = ["create", "--bundle", str(b), "ctr-id"]
    assert run_wrapper(args, tmp_path).returncode == 0
    assert fake_runc.read_text().splitlines() == args
    assert json.loads((tmp_path / "runc-saw.json").read_text()) == s
    (sim / "oom-clamp").write_text("x\n")  # this host needs the clamp: runc-oom-clamp.sh does it
    assert run_wrapper(args, tmp_path).returncode == 0
    assert json.loads((tmp_path / "runc-saw.json").read_text())["process"]["oomScoreAdj"] == 0
    assert log_text(sim) == ""  # python never ran


def test_the_executable_honours_a_privileged_containers_variable_by_default(sim, tmp_path, fake_runc):
    b = bundle(tmp_path, spec([f"{rs.VISIBLE_DEVICES}=2"], privileged=True))
    assert run_wrapper(["create", f"--bundle={b}", "ctr-id"], tmp_path).returncode == 0
    assert paths(json.loads((tmp_path / "runc-saw.json").read_text()))[0] == ["/dev/nvidia2"]


@pytest.mark.parametrize("form", [["--bundle", "{b}"], ["--bundle={b}"], ["-b", "{b}"], ["-bundle", "{b}"]])
def test_the_executable_finds_the_bundle_in_every_form(sim, tmp_path, fake_runc, form):
    accept(sim)
    b = bundle(tmp_path, spec([NODE_ENV]))
    args = ["--root", "/r", "create", *(f.format(b=b) for f in form), "ctr-id"]
    assert run_wrapper(args, tmp_path).returncode == 0
    assert fake_runc.read_text().splitlines() == args
    assert len(paths(json.loads((b / "config.json").read_text()))[0]) == GPUS


def test_the_python_entry_point_passes_other_commands_through(sim, tmp_path, fake_runc):
    accept(sim)
    (sim / "oom-clamp").write_text("x\n")
    b = bundle(tmp_path, spec([NODE_ENV], oom=-5))
    before = (b / "config.json").read_bytes()
    args = ["--root", "/r", "kill", "ctr-id", "SIGTERM"]
    out = subprocess.run([sys.executable, str(HERE / "runtime_sim.py"), *args], cwd=b, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0 and out.stdout == out.stderr == ""
    assert fake_runc.read_text().splitlines() == args
    assert (b / "config.json").read_bytes() == before


def test_the_volume_mount_device_list_of_nvidias_plugin_is_honoured_with_the_driver_library(sim):
    """NVIDIA's plugin with deviceListStrategy volume-mounts passes /dev/null mounts under
    /var/run/nvidia-container-devices/<uuid> (internal/plugin/server.go); the toolkit, accepting them, injects those
    devices and the driver's NVML library, whatever the container's own NVIDIA_VISIBLE_DEVICES says."""
    lib = sim / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libnvidia-ml.so.1").write_bytes(b"\x7fELF")
    (lib / "mocknvml.conf").write_text("gpu\n")
    s = spec([f"{rs.VISIBLE_DEVICES}=/var/run/nvidia-container-devices"])
    s["mounts"].append({"destination": f"/var/run/nvidia-container-devices/{UUIDS[1]}", "type": "bind",
                        "source": "/dev/null", "options": ["rbind", "ro"]})
    assert rs.edit_spec(s, str(sim), dict(rs.DEFAULTS), clamp=False, create=True)
    dests = {m["destination"] for m in s["mounts"]}
    assert f"/run/gpu-sim/{UUIDS[1]}.json" in dests
    assert {"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/usr/lib/x86_64-linux-gnu/mocknvml.conf"} <= dests
    assert [d["path"] for d in s["linux"]["devices"]] == ["/dev/nvidia1"]


def test_the_volume_mount_device_list_is_ignored_where_the_toolkit_does_not_accept_it(sim):
    s = spec()
    s["mounts"].append({"destination": f"/var/run/nvidia-container-devices/{UUIDS[0]}", "type": "bind",
                        "source": "/dev/null"})
    settings = {**rs.DEFAULTS, "acceptDeviceListAsVolumeMounts": False}
    assert not rs.edit_spec(s, str(sim), settings, clamp=False, create=True)
    assert "devices" not in s["linux"]
