"""`cluster.py plugin-version`'s objects (localcluster/nvidia.py, gpunode.py): NVIDIA's plugin DaemonSet at the
previous release differs from the current one's only in its image, as a `helm upgrade` between the two chart
releases renders it for the bed's values; the release the state names is what every later apply uses and what
`up` imports; releases other than the two the bed builds are refused."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "localcluster"))
import bed  # noqa: E402
import gpunode  # noqa: E402
import nvidia  # noqa: E402


def _plugin_ds(objs: list[dict]) -> dict:
    (ds,) = [o for o in objs if o["kind"] == "DaemonSet"]
    return ds


def test_the_two_releases_are_the_current_one_and_the_one_before():
    assert nvidia.PLUGIN_TAGS == ("v0.18.2", "v0.19.3") and nvidia.TAG == "v0.19.3"
    assert nvidia.plugin_image_name("v0.18.2") == "nvcr.io/nvidia/k8s-device-plugin:v0.18.2"
    nvidia.check_tag("v0.18.2")
    with pytest.raises(bed.BedError, match="v0.18.2, v0.19.3"):
        nvidia.check_tag("v0.17.0")


@pytest.mark.parametrize("layout", ["helm", "static", "operator"])
def test_the_previous_release_changes_the_pod_templates_image_only(layout):
    new = _plugin_ds(nvidia.plugin_objects(layout, None))
    old = _plugin_ds(nvidia.plugin_objects(layout, None, image=nvidia.plugin_image_name("v0.18.2")))
    assert new["spec"]["template"]["spec"]["containers"][0]["image"] == nvidia.IMAGE
    assert old["spec"]["template"]["spec"]["containers"][0]["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.18.2"
    same = copy.deepcopy(old)
    same["spec"]["template"]["spec"]["containers"][0]["image"] = nvidia.IMAGE
    assert same == new
    assert new["spec"]["updateStrategy"] == {"type": "RollingUpdate"}  # the controller rolls the pod


def test_the_state_names_the_release_every_apply_of_the_plugin_uses(monkeypatch):
    state = {"profile": "plain", "layout": "helm", "stack": "nvidia"}
    monkeypatch.setattr(bed, "read_state", lambda: state)
    monkeypatch.setattr(gpunode, "read_state", lambda: state)
    assert nvidia.plugin_version(state) == "v0.19.3"
    image = _plugin_ds(gpunode.stack_plugin_objects("helm"))["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == nvidia.IMAGE
    state["plugin_version"] = "v0.18.2"
    ds = _plugin_ds(gpunode.stack_plugin_objects("helm"))
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.18.2"
    gfd = [o for o in gpunode.stack_companion_objects("helm") if o["kind"] == "DaemonSet"]
    assert gfd and all(o["spec"]["template"]["spec"]["containers"][0]["image"] == nvidia.IMAGE for o in gfd)


def test_the_images_the_node_imports_include_the_states_release(monkeypatch, tmp_path):
    cur, prev = tmp_path / "cur", tmp_path / "prev"
    for d, names in ((cur, ("nvidia-device-plugin", "gpu-feature-discovery", "nfd-master")),
                     (prev, ("nvidia-device-plugin",))):
        d.mkdir()
        for n in names:
            (d / n).write_text("not an ELF file\n")
    bins = bed.Bins.at(nvidia=cur, nfd=tmp_path)
    state: dict = {}
    monkeypatch.setattr(bed, "read_state", lambda: state)
    monkeypatch.setattr(nvidia, "release_bins", lambda tag: {"v0.18.2": prev}[tag])
    assert [i.name for i in nvidia.images(bins)] == [nvidia.IMAGE, nvidia.NFD_IMAGE]
    state["plugin_version"] = "v0.18.2"
    imgs = nvidia.images(bins)
    assert [i.name for i in imgs] == [nvidia.IMAGE, nvidia.NFD_IMAGE, "nvcr.io/nvidia/k8s-device-plugin:v0.18.2"]
    assert [f for f, _ in imgs[0].files] == ["usr/bin/nvidia-device-plugin", "usr/bin/gpu-feature-discovery"]
    assert [f for f, _ in imgs[2].files] == ["usr/bin/nvidia-device-plugin"]  # built alone: GFD stays at TAG
    assert imgs[2].cmd == imgs[0].cmd == ["nvidia-device-plugin"]


def test_plugin_version_refuses_a_release_the_bed_does_not_build_before_touching_the_cluster(monkeypatch):
    monkeypatch.setattr(gpunode, "pid_of", lambda name: pytest.fail("looked at the cluster"))
    with pytest.raises(bed.BedError, match="no NVIDIA device plugin release 'v0.20.0'"):
        gpunode.plugin_version("v0.20.0")
