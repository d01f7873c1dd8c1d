"""The time from a device going out of service to each layer (gpuconform/healthtimes.py), on recorded shapes: a
device-plugin node (NVIDIA's log line, the kubelet's node-status write, a holding pod's allocatedResourcesStatus)
and a DRA node (the taint's timeAdded, the slice's write)."""

from gpuconform import healthtimes

GPU = "GPU-67a56788-b810-5820-98e1-5860ab3747e2"
# NVIDIA k8s-device-plugin v0.19.3 internal/plugin/server.go:279, as `kubectl logs --timestamps` prints it
LOG = (f"2026-12-07T03:30:00.100000000Z I1207 03:30:00.1 health.go:169] XidCriticalError: Xid=48 on Device={GPU}; "
       f"marking device as unhealthy.\n"
       f"2026-12-07T03:30:00.200123456Z I1207 03:30:00.2 server.go:279] 'nvidia.com/gpu' device marked unhealthy: {GPU}\n")


def managed(time, *owned):
    return {"manager": "kubelet", "operation": "Update", "subresource": "status", "time": time,
            "fieldsV1": {"f:status": {k: {} for k in owned}}}


NODE = {"metadata": {"managedFields": [managed("2026-12-07T03:29:00Z", "f:conditions"),
                                       managed("2026-12-07T03:30:10Z", "f:allocatable", "f:conditions")]}}
HOLDER = {"metadata": {"name": "access-gpu-node-0", "managedFields": [
    managed("2026-12-07T03:30:01Z", "f:containerStatuses")]},
    "status": {"containerStatuses": [{"allocatedResourcesStatus": [
        {"name": "nvidia.com/gpu", "resources": [{"resourceID": GPU, "health": "Unhealthy"}]}]}]}}
BYSTANDER = {"metadata": {"name": "other", "managedFields": [managed("2026-12-07T03:29:30Z", "f:containerStatuses")]},
             "status": {"containerStatuses": [{"allocatedResourcesStatus": [
                 {"name": "nvidia.com/gpu", "resources": [{"resourceID": "GPU-other", "health": "Healthy"}]}]}]}}


def test_a_device_plugin_nodes_layers_count_from_the_plugins_own_mark():
    t = healthtimes.layer_times(GPU, healthtimes.plugin_marked(GPU, LOG),
                                (healthtimes.status_written(NODE, "f:allocatable"), "node status"),
                                [HOLDER, BYSTANDER])
    assert t["from"] == "plugin" and t["plugin"]["after_s"] == 0.0
    assert "marking device as unhealthy" in t["plugin"]["source"] or "marked unhealthy" in t["plugin"]["source"]
    assert t["node status"]["after_s"] == 9.9 and t["scheduler"]["after_s"] == 9.9
    assert t["holding pod"]["after_s"] == 0.9 and "access-gpu-node-0" in t["holding pod"]["source"]
    assert t["kubelet"]["after_s"] is None
    assert healthtimes.render([t]) == (f"{GPU}: plugin +0.0s, kubelet n/a, node status +9.9s, scheduler +9.9s, "
                                       f"holding pod +0.9s")


def test_without_the_plugins_line_the_layers_count_from_the_earliest_and_a_missing_layer_is_none():
    t = healthtimes.layer_times(GPU, healthtimes.plugin_marked(GPU, "no such line\n"),
                                (healthtimes.status_written(NODE, "f:allocatable"), "node status"), [BYSTANDER])
    assert t["from"] == "earliest layer" and t["plugin"]["after_s"] is None
    assert t["node status"]["after_s"] == 0.0 and t["holding pod"]["after_s"] is None
    assert "no pod on the node reported it Unhealthy" in t["holding pod"]["source"]
    unknown = {**HOLDER, "status": {"containerStatuses": [{"allocatedResourcesStatus": [
        {"name": "nvidia.com/gpu", "resources": [{"resourceID": GPU, "health": "Unknown"}]}]}]}}
    assert not healthtimes.unhealthy_in(unknown, GPU) and healthtimes.unhealthy_in(HOLDER, GPU)


def test_a_dra_devices_layers_come_from_its_taint_and_its_slice():
    slices = [{"metadata": {"managedFields": [{"manager": "driver", "time": "2026-12-07T03:30:00Z"}]},
               "spec": {"driver": "gpu.nvidia.com", "pool": {"name": "gpu-node-dra"}, "devices": [
                   {"name": "gpu-1", "taints": [{"key": "gpu.nvidia.com/xid", "value": "48", "effect": "NoSchedule",
                                                 "timeAdded": "2026-12-07T03:29:59Z"}]}]}}]
    added, written = healthtimes.slice_written(slices, "gpu.nvidia.com", "gpu-node-dra/gpu-1")
    holder = {"metadata": {"name": "hold", "managedFields": [managed("2026-12-07T03:30:02Z", "f:containerStatuses")]},
              "status": {"containerStatuses": [{"allocatedResourcesStatus": [{"name": "claim:gpu", "resources": [
                  {"resourceID": "k8s.gpu.nvidia.com/claim=uid-gpu-1", "health": "Unhealthy"}]}]}]}}
    t = healthtimes.layer_times("gpu-node-dra/gpu-1", (added, "taint"), (written, "slice"), [holder], holding=True)
    assert (t["plugin"]["after_s"], t["node status"]["after_s"], t["holding pod"]["after_s"]) == (0.0, 1.0, 3.0)
    assert healthtimes.slice_written(slices, "gpu.nvidia.com", "gpu-node-dra/gpu-9") == (None, None)


def test_log_times_keep_microseconds_and_refuse_lines_without_one():
    assert healthtimes.log_time("2026-12-07T03:30:00.200123456Z x").microsecond == 200123
    assert healthtimes.log_time("I1207 03:30:00.2 server.go:279] x") is None
