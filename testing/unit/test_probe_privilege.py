"""The host-reading probe pods ask for no more than their reads need (issue 18, privilege): seccomp kept, every
hostPath read-only and recursively so where the runtime can, non-root where the read allows it, only allow-listed
host paths, and no node probe image of unknown origin."""

from __future__ import annotations

import copy

import pytest

from gpuconform import config as gconfig, pods


def cfg(**images) -> dict:
    d = copy.deepcopy(gconfig.DEFAULTS)
    d["images"].update(images)
    return d


def host_readers(c: dict) -> dict[str, dict]:
    return {"socket": pods.socket_probe_pod("s", "gpuconform-r1-node", "r1", "n1", c, 60),
            "node": pods.node_probe_pod("np", "gpuconform-r1-node", "r1", "n1", c, 60)}


@pytest.mark.parametrize("which", ["socket", "node"])
def test_host_readers_keep_seccomp_and_mount_every_host_path_recursively_read_only(which):
    m = host_readers(cfg(nodeProbe="mirror/suite@sha256:" + "0" * 64))[which]
    spec = m["spec"]
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not any(spec.get(k) for k in ("hostPID", "hostNetwork", "hostIPC"))
    assert spec["automountServiceAccountToken"] is False
    ctr = spec["containers"][0]
    assert ctr["securityContext"] == {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                                      "capabilities": {"drop": ["ALL"]}}
    assert ctr["volumeMounts"] and all(vm["readOnly"] is True and vm["recursiveReadOnly"] == "Enabled"
                                       and "mountPropagation" not in vm for vm in ctr["volumeMounts"])
    # never empty or ...OrCreate: a missing path fails the mount instead of being made on the host
    assert {v["hostPath"]["type"] for v in spec["volumes"]} <= {"Directory", "File"}


def test_socket_probe_lists_the_directory_as_a_non_root_user_and_node_probe_alone_is_root():
    m = host_readers(cfg(nodeProbe="mirror/suite:1"))
    sock = m["socket"]["spec"]["securityContext"]
    assert sock["runAsNonRoot"] is True and sock["runAsUser"] != 0
    assert [v["hostPath"]["path"] for v in m["socket"]["spec"]["volumes"]] == ["/var/lib/kubelet/device-plugins"]
    node = m["node"]["spec"]["securityContext"]
    assert node["runAsUser"] == 0 and node["runAsNonRoot"] is False  # PodResources socket: root's (docstring)
    # uid 0 never sees device-plugins/ (kubelet.sock): only its checkpoint, as a single-file hostPath
    assert sorted((v["hostPath"]["path"], v["hostPath"]["type"]) for v in m["node"]["spec"]["volumes"]) == [
        ("/sys", "Directory"), ("/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint", "File"),
        ("/var/lib/kubelet/pod-resources", "Directory")]
    mounts = {vm["name"]: vm["mountPath"] for vm in m["node"]["spec"]["containers"][0]["volumeMounts"]}
    cmd = m["node"]["spec"]["containers"][0]["command"]
    assert mounts["checkpoint"] == cmd[cmd.index("--device-plugins") + 1] + "/kubelet_internal_checkpoint"
    # the shared defaults stay untouched by one pod's edits
    m["node"]["spec"]["securityContext"]["runAsUser"] = 7
    assert pods.HOST_READER_ROOT_POD["runAsUser"] == 0 and pods.RESTRICTED_POD["runAsUser"] == 1000


def test_a_dra_nodes_probe_mounts_no_checkpoint():
    vols = pods.node_probe_pod("np", "ns", "r1", "n1", cfg(nodeProbe="mirror/suite:1"), 60, checkpoint=False)
    assert [v["hostPath"]["path"] for v in vols["spec"]["volumes"]] == ["/var/lib/kubelet/pod-resources", "/sys"]


@pytest.mark.parametrize("handlers,mode", [
    (None, "IfPossible"),  # containerd 1.x: no runtimeHandlers in the node's status (the bed's device-plugin node)
    ([{"name": "", "features": {"recursiveReadOnlyMounts": True, "userNamespaces": True}}], "Enabled"),
    ([{"name": "", "features": {"recursiveReadOnlyMounts": False}}], "IfPossible"),
    ([{"name": "nvidia", "features": {"recursiveReadOnlyMounts": True}}], "IfPossible"),  # not the default handler
    ([{"features": {"recursiveReadOnlyMounts": True}}], "Enabled"),
])
def test_host_readers_mount_recursively_read_only_where_the_nodes_runtime_reports_it(handlers, mode):
    node = {"status": {"runtimeHandlers": handlers}} if handlers is not None else {"status": {}}
    assert pods.recursive_read_only(node) == mode
    sock = pods.socket_probe_pod("s", "gpuconform-r1-node", "r1", "n1", cfg(), 60, recursive=mode)
    assert {vm["recursiveReadOnly"] for vm in sock["spec"]["containers"][0]["volumeMounts"]} == {mode}
    with pytest.raises(ValueError, match="recursiveReadOnly"):
        pods.socket_probe_pod("s", "gpuconform-r1-node", "r1", "n1", cfg(), 60, recursive="Disabled")


def test_a_trailing_slash_on_sysfs_path_is_not_mounted_as_written():
    c = cfg(nodeProbe="mirror/suite:1")
    c["nodeProbe"]["sysfsPath"] = "/var/lib/gpu-sim/sys/"
    vols = {v["name"]: v["hostPath"]["path"] for v in pods.node_probe_pod("np", "ns", "r1", "n1", c, 60)["spec"]["volumes"]}
    assert vols["sys"] == "/var/lib/gpu-sim/sys"  # the admission policy's allow-list matches exact paths


# ---------------------------------------------------------------- allow-listed host paths

REAL_KUBELET_DIRS = ["/var/lib/kubelet", "/var/lib/kubelet/", "/var/lib/k0s/kubelet",
                     "/var/snap/microk8s/common/var/lib/kubelet"]
HOSTILE_KUBELET_DIRS = ["/", "/etc", "/root", "/var/lib", "/var/lib/kubelet/..", "/var/lib/../../kubelet",
                        "//kubelet", "var/lib/kubelet", "/var/lib/kubelet\n", "/home/kubelet-data"]
REAL_SYSFS = ["/sys", "/sys/", "/var/lib/gpu-sim/sys"]
HOSTILE_SYSFS = ["/", "/etc", "/root", "/proc/sys", "/sys/..", "/sys/../etc", "/sysfs", "/var/lib/gpu-sim"]


def load(tmp_path, key: str, value: str):
    section, name = key.split(".")
    f = tmp_path / "c.yaml"
    f.write_text(f"{section}:\n  {name}: {value!r}\n")
    return gconfig.load(f, environ={})


@pytest.mark.parametrize("path", REAL_KUBELET_DIRS)
def test_real_kubelet_layouts_are_accepted(tmp_path, path):
    assert load(tmp_path, "nodeProbe.kubeletDir", path).get("nodeProbe.kubeletDir") == path


@pytest.mark.parametrize("path", HOSTILE_KUBELET_DIRS)
def test_kubelet_dir_refuses_root_system_dirs_and_back_steps_with_one_line_naming_the_file(tmp_path, path):
    with pytest.raises(gconfig.ConfigError) as e:
        load(tmp_path, "nodeProbe.kubeletDir", path)
    msg = str(e.value)
    assert "\n" not in msg.rstrip("\n'") and msg.startswith(str(tmp_path / "c.yaml"))
    assert "'nodeProbe.kubeletDir' must be the absolute path of the kubelet's root directory" in msg


@pytest.mark.parametrize("path", REAL_SYSFS)
def test_sysfs_and_simulated_trees_are_accepted(tmp_path, path):
    assert load(tmp_path, "nodeProbe.sysfsPath", path).get("nodeProbe.sysfsPath") == path


@pytest.mark.parametrize("path", HOSTILE_SYSFS)
def test_sysfs_path_refuses_root_proc_and_arbitrary_dirs(tmp_path, path):
    with pytest.raises(gconfig.ConfigError, match=r"'nodeProbe.sysfsPath' must be /sys or an absolute path"):
        load(tmp_path, "nodeProbe.sysfsPath", path)


def test_a_hostile_path_from_the_environment_names_the_variable():
    with pytest.raises(gconfig.ConfigError, match=r"^environment variable GPUCONFORM_NODE_PROBE_SYSFS_PATH: "):
        gconfig.load(None, environ={"GPUCONFORM_NODE_PROBE_SYSFS_PATH": "/"})


# ---------------------------------------------------------------- images

def test_node_probe_image_has_no_default_and_the_probe_pod_is_never_built_without_one():
    assert gconfig.load(None, environ={}).get("images.nodeProbe") == ""
    with pytest.raises(ValueError, match="node probe image not set"):
        pods.node_probe_pod("np", "ns", "r1", "n1", cfg(), 60)


def test_node_probe_checks_are_not_checked_until_the_image_is_set_and_touch_nothing():
    """Fails closed before any API call: the run's parts are never used (absent here)."""
    from types import SimpleNamespace

    from gpuconform.pytest_plugin import nodecheck

    check = nodecheck.make(SimpleNamespace(cfg=gconfig.load(None, environ={}), run_id="r1"), "n1", "t")  # type: ignore[arg-type]
    with pytest.raises(pytest.skip.Exception, match=r"NOTCHECKED-OPTIONAL.*node probe image not set"):
        check.probe("hw")


def test_public_default_images_are_pinned_by_digest_or_unset():
    d = gconfig.DEFAULTS["images"]
    assert "@sha256:" in d["probe"] and len(d["probe"].rsplit(":", 1)[1]) == 64
    assert d["nodeProbe"] == ""


# ---------------------------------------------------------------- the in-cluster image's dependencies

def _canonical(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def _hash_pinned(lock: str) -> list[str]:
    """The names a lock pins, each with == and followed by its hashes (asserted)."""
    import re

    entries = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+) \\\n((?:\s+--hash=sha256:[0-9a-f]{64}(?: \\)?\n)+)",
                         lock, re.M)
    assert entries and len(entries) == len([ln for ln in lock.splitlines() if re.match(r"^[A-Za-z0-9]", ln)]), \
        "every requirement is pinned with == and followed by its hashes"
    return [n for n, _, _ in entries]


def test_the_image_installs_its_python_dependencies_from_a_hash_lock_covering_pyproject():
    import re
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    docker = (root / "manifests" / "Dockerfile").read_text()
    runs = [ln for ln in docker.splitlines() if ln.startswith("RUN ") and "pip install" in ln]
    # Every pip install takes a hash lock, except the suite's own wheel: built in the image's build stage from the
    # checkout, installed with nothing from the index (--no-index) and no dependency of its own (--no-deps).
    locked = [r for r in runs if "--require-hashes" in r]
    own = [r for r in runs if r not in locked]
    assert [r for r in locked if "-r /tmp/requirements.lock" in r], runs
    assert all("--no-index" in r and "--no-deps" in r and "/tmp/wheel/gpuconform-*.whl" in r for r in own), own
    assert "COPY manifests/requirements.lock /tmp/requirements.lock" in docker
    assert "COPY --from=wheel /wheel/ /tmp/wheel/" in docker
    lock = (root / "manifests" / "requirements.lock").read_text()
    pinned = {_canonical(n) for n in _hash_pinned(lock)}
    for build_lock in re.findall(r"-r /tmp/(build-requirements\.lock)", docker):
        _hash_pinned((root / "manifests" / build_lock).read_text())
    wheel = [ln for ln in docker.splitlines() if ln.startswith("RUN ") and "pip wheel" in ln]
    assert wheel and all("--no-build-isolation" in ln for ln in wheel), wheel  # the hashed backend, not the index's
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    wanted = {_canonical(re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0]) for d in deps}
    assert wanted <= pinned, f"not in the lock: {sorted(wanted - pinned)}"
    assert "--find-links" not in lock and "--index-url" not in lock  # no machine-specific sources
