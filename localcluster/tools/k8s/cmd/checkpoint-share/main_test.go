package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/checkpointmanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/checkpoint"
)

const (
	res      = "nvidia.com/gpu"
	key      = "kubelet_internal_checkpoint" // pkg/kubelet/cm/devicemanager/manager.go kubeletDeviceManagerCheckpoint
	gpu0     = "GPU-aaaa"
	gpu1     = "GPU-bbbb"
	podA     = "11111111-aaaa"
	podB     = "22222222-bbbb"
	podOther = "33333333-cccc"
)

// allocResp is what the kubelet stores per entry: the plugin's ContainerAllocateResponse, proto-encoded
// (pkg/kubelet/cm/devicemanager/pod_devices.go toCheckpointData).
func allocResp(t *testing.T, id string) []byte {
	t.Helper()
	b, err := proto.Marshal(&pluginapi.ContainerAllocateResponse{Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": id}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func entry(t *testing.T, pod, ctr, resource, id string) checkpoint.PodDevicesEntry {
	d := checkpoint.NewDevicesPerNUMA()
	d[0] = []string{id}
	return checkpoint.PodDevicesEntry{PodUID: pod, ContainerName: ctr, ResourceName: resource, DeviceIDs: d,
		AllocResp: allocResp(t, id)}
}

// writeCheckpoint builds a checkpoint with the upstream package and writes it the way the kubelet's
// writeCheckpoint does (checkpoint.New + CheckpointManager.CreateCheckpoint).
func writeCheckpoint(t *testing.T, entries ...checkpoint.PodDevicesEntry) string {
	t.Helper()
	dir := t.TempDir()
	mgr, err := checkpointmanager.NewCheckpointManager(dir)
	if err != nil {
		t.Fatal(err)
	}
	cp := checkpoint.New(entries, map[string][]string{res: {gpu0, gpu1, "GPU-cccc", "GPU-dddd"},
		"example.com/nic": {"nic0"}})
	if err := mgr.CreateCheckpoint(key, cp); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, key)
}

// readBack reads the file as the kubelet's getCheckpoint does, then checks VerifyChecksum explicitly.
func readBack(t *testing.T, path string) []checkpoint.PodDevicesEntry {
	t.Helper()
	entries, reg := readBackAll(t, path)
	if len(reg[res]) != 4 || len(reg["example.com/nic"]) != 1 {
		t.Fatalf("RegisteredDevices changed: %v", reg)
	}
	return entries
}

func readBackAll(t *testing.T, path string) ([]checkpoint.PodDevicesEntry, map[string][]string) {
	t.Helper()
	mgr, err := checkpointmanager.NewCheckpointManager(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	cp := checkpoint.New(make([]checkpoint.PodDevicesEntry, 0), make(map[string][]string))
	if err := mgr.GetCheckpoint(filepath.Base(path), cp); err != nil {
		t.Fatalf("GetCheckpoint after the edit: %v", err)
	}
	if err := cp.VerifyChecksum(); err != nil {
		t.Fatalf("VerifyChecksum after the edit: %v", err)
	}
	return cp.GetData()
}

func byPod(t *testing.T, entries []checkpoint.PodDevicesEntry, pod string) checkpoint.PodDevicesEntry {
	t.Helper()
	for _, e := range entries {
		if e.PodUID == pod {
			return e
		}
	}
	t.Fatalf("no entry for pod %s", pod)
	return checkpoint.PodDevicesEntry{}
}

func envOf(t *testing.T, b []byte) string {
	t.Helper()
	var r pluginapi.ContainerAllocateResponse
	if err := proto.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r.Envs["NVIDIA_VISIBLE_DEVICES"]
}

func TestRewriteByUIDKeepsAValidChecksumAndSharesTheDevice(t *testing.T) {
	path := writeCheckpoint(t, entry(t, podA, "train", res, gpu0), entry(t, podB, "train", res, gpu1),
		entry(t, podOther, "sidecar", "example.com/nic", "nic0"))
	msg, err := rewrite(path, res, parseSelector(podA), parseSelector(podB+"/train"), false, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "[GPU-bbbb] -> [GPU-aaaa]") || !strings.Contains(msg, "checksum") {
		t.Errorf("report: %s", msg)
	}
	entries := readBack(t, path)
	if len(entries) != 3 {
		t.Fatalf("entries: %d", len(entries))
	}
	a, b := byPod(t, entries, podA), byPod(t, entries, podB)
	if got := sortedIDs(b.DeviceIDs); !slices.Equal(got, []string{gpu0}) {
		t.Errorf("B holds %v, want [%s]", got, gpu0)
	}
	if got := sortedIDs(a.DeviceIDs); !slices.Equal(got, []string{gpu0}) {
		t.Errorf("A holds %v, want [%s] (unchanged)", got, gpu0)
	}
	if envOf(t, b.AllocResp) != gpu0 {
		t.Errorf("B's Allocate response not copied: %q", envOf(t, b.AllocResp))
	}
	if byPod(t, entries, podOther).ResourceName != "example.com/nic" {
		t.Error("the other resource's entry changed")
	}
	out, err := show(path, res)
	if err != nil || !strings.Contains(out, "SHARED nvidia.com/gpu GPU-aaaa: "+podA+"/train, "+podB+"/train") {
		t.Errorf("show: %v\n%s", err, out)
	}
	// Idempotent: a second run changes nothing.
	if msg, err := rewrite(path, res, parseSelector(podA), parseSelector(podB), false, false, false); err != nil ||
		!strings.Contains(msg, "nothing to change") {
		t.Errorf("second run: %v %s", err, msg)
	}
}

func TestFirstTwoEntriesAndIDsOnly(t *testing.T) {
	path := writeCheckpoint(t, entry(t, podOther, "nic", "example.com/nic", "nic0"),
		entry(t, podA, "train", res, gpu0), entry(t, podB, "train", res, gpu1))
	if _, err := rewrite(path, res, selector{}, selector{}, true, false, false); err != nil {
		t.Fatal(err)
	}
	b := byPod(t, readBack(t, path), podB)
	if got := sortedIDs(b.DeviceIDs); !slices.Equal(got, []string{gpu0}) {
		t.Errorf("B holds %v", got)
	}
	if envOf(t, b.AllocResp) != gpu1 {
		t.Errorf("-ids-only replaced B's Allocate response")
	}
}

func TestForgetRegisteredDropsOnlyThatResource(t *testing.T) {
	path := writeCheckpoint(t, entry(t, podA, "train", res, gpu0), entry(t, podB, "train", res, gpu1))
	msg, err := rewrite(path, res, parseSelector(podA), parseSelector(podB), false, true, false)
	if err != nil || !strings.Contains(msg, "dropped from RegisteredDevices") {
		t.Fatalf("%v %s", err, msg)
	}
	entries, reg := readBackAll(t, path)
	if _, ok := reg[res]; ok || len(reg["example.com/nic"]) != 1 {
		t.Errorf("RegisteredDevices after -forget-registered: %v", reg)
	}
	if got := sortedIDs(byPod(t, entries, podB).DeviceIDs); !slices.Equal(got, []string{gpu0}) {
		t.Errorf("B holds %v", got)
	}
	// Already shared and already forgotten: nothing left to do.
	if msg, err := rewrite(path, res, parseSelector(podA), parseSelector(podB), false, true, false); err != nil ||
		!strings.Contains(msg, "nothing to change") {
		t.Errorf("second run: %v %s", err, msg)
	}
}

func TestDryRunLeavesTheFileAlone(t *testing.T) {
	path := writeCheckpoint(t, entry(t, podA, "train", res, gpu0), entry(t, podB, "train", res, gpu1))
	before, _ := os.ReadFile(path)
	if _, err := rewrite(path, res, selector{}, selector{}, false, true, true); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	if string(before) != string(after) {
		t.Error("dry run wrote the file")
	}
}

// Editing the JSON without recomputing the checksum is what the kubelet rejects ("checkpoint is corrupted"):
// why the tool goes through the upstream package.
func TestAHandEditFailsTheChecksum(t *testing.T) {
	path := writeCheckpoint(t, entry(t, podA, "train", res, gpu0), entry(t, podB, "train", res, gpu1))
	raw, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(strings.Replace(string(raw), gpu1, gpu0, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := load(path); err == nil {
		t.Fatal("a hand-edited checkpoint verified")
	}
	if _, err := rewrite(path, res, selector{}, selector{}, false, false, false); err == nil {
		t.Fatal("rewrite accepted a corrupted checkpoint")
	}
}

func TestSelectionErrors(t *testing.T) {
	entries := []checkpoint.PodDevicesEntry{entry(t, podA, "a", res, gpu0), entry(t, podA, "b", res, gpu1)}
	if _, err := share(slices.Clone(entries), res, parseSelector(podA), parseSelector(podB), false); err == nil {
		t.Error("ambiguous pod without /CONTAINER accepted")
	}
	if _, err := share(slices.Clone(entries), res, parseSelector(podA+"/a"), parseSelector("nope"), false); err == nil {
		t.Error("unknown target accepted")
	}
	if ch, err := share(slices.Clone(entries), res, parseSelector(podA+"/a"), parseSelector(podA+"/b"), false); err != nil ||
		ch.ToCtr != "b" {
		t.Errorf("two containers of one pod: %v %+v", err, ch)
	}
	if _, err := share(entries[:1], res, selector{}, selector{}, false); err == nil {
		t.Error("one entry: no second container, must fail")
	}
}
