package plugin

import (
	"errors"
	"log"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"gpuconform.local/images/internal/config"
	"gpuconform.local/images/internal/hw"
)

// migHardware: GPU 0 (NUMA 0) with two 1g.5gb devices, GPU 1 (NUMA 1) with one 3g.20gb and one
// 1g.5gb, GPU 2 (NUMA 1) without MIG.
func migHardware() *hw.Hardware {
	h := a100s([]string{"GPU-a0", "GPU-a1", "GPU-a2"}, func(i int) int { return (i + 1) / 2 }, 0)
	h.GPUs[0].MIGDevices = []hw.MIGDevice{{Profile: "1g.5gb", UUID: "MIG-00", GI: 7, CI: 0}, {Profile: "1g.5gb", UUID: "MIG-01", GI: 8, CI: 0}}
	h.GPUs[1].MIGDevices = []hw.MIGDevice{{Profile: "3g.20gb", UUID: "MIG-10", GI: 1, CI: 0}, {Profile: "1g.5gb", UUID: "MIG-11", GI: 9, CI: 0}}
	return h
}

func resourceIDs(inv *Inventory) map[string]string {
	out := map[string]string{}
	for _, r := range inv.Resources {
		out[r.Name+" "+r.Socket] = strings.Join(ids(r.PluginDevices()), ",")
	}
	return out
}

func TestInventoryTimeSlicing(t *testing.T) {
	cfg := config.Default()
	cfg.Sharing.TimeSlicing = &config.TimeSlicing{Resources: []config.ReplicatedResource{{Name: "gpu", Replicas: 2}}}
	inv := mustInventory(t, fourGPUs(), cfg, "/sim")
	want := map[string]string{"nvidia.com/gpu nvidia-gpu.sock": "GPU-a0::0,GPU-a0::1,GPU-a1::0,GPU-a1::1,GPU-b2::0,GPU-b2::1,GPU-b3::0,GPU-b3::1"}
	if got := resourceIDs(inv); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
	if inv.Primary.Replicas != 2 || inv.Primary.PluginDevices()[3].Topology.Nodes[0].ID != 0 || inv.Primary.PluginDevices()[4].Topology.Nodes[0].ID != 1 {
		t.Fatalf("replica topology: %v", inv.Primary.PluginDevices())
	}

	cfg.Sharing.TimeSlicing.RenameByDefault = true
	cfg.SocketName = "sim.sock" // an explicit socketName names resourceName's socket, not the renamed one
	inv = mustInventory(t, fourGPUs(), cfg, "/sim")
	if len(inv.Resources) != 1 || inv.Primary.Name != "nvidia.com/gpu.shared" || inv.Primary.Socket != "nvidia-gpu.shared.sock" || len(inv.Primary.Devices) != 8 {
		t.Fatalf("renamed: %v", resourceIDs(inv))
	}
}

func TestInventoryMIG(t *testing.T) {
	cfg := config.Default()
	inv := mustInventory(t, migHardware(), cfg, "/sim") // none: whole GPUs
	if got := resourceIDs(inv); !reflect.DeepEqual(got, map[string]string{"nvidia.com/gpu nvidia-gpu.sock": "GPU-a0,GPU-a1,GPU-a2"}) {
		t.Fatalf("none: %v", got)
	}
	if n := len(inv.DeviceInfos()); n != 7 {
		t.Fatalf("infos: %d", n)
	}

	cfg.Flags.MigStrategy = "mixed"
	cfg.Faults.ExtraDevices = 1
	cfg.Faults.UnhealthyDevices = []int{1}
	inv = mustInventory(t, migHardware(), cfg, "/sim")
	want := map[string]string{
		"nvidia.com/gpu nvidia-gpu.sock":                 "GPU-a2," + hw.PhantomUUID(0),
		"nvidia.com/mig-1g.5gb nvidia-mig-1g.5gb.sock":   "MIG-00,MIG-01,MIG-11",
		"nvidia.com/mig-3g.20gb nvidia-mig-3g.20gb.sock": "MIG-10",
	}
	if got := resourceIDs(inv); !reflect.DeepEqual(got, want) {
		t.Fatalf("mixed: %v", got)
	}
	mig := inv.Resource("nvidia.com/mig-1g.5gb").PluginDevices()
	if mig[0].Topology.Nodes[0].ID != 0 || mig[2].Topology.Nodes[0].ID != 1 || mig[0].Health != "Healthy" || mig[2].Health != "Unhealthy" {
		t.Fatalf("MIG devices take the parent's NUMA node and index: %v", mig)
	}

	// mixed + time-slicing of a MIG resource
	cfg = config.Default()
	cfg.Flags.MigStrategy = "mixed"
	cfg.Sharing.TimeSlicing = &config.TimeSlicing{RenameByDefault: true, Resources: []config.ReplicatedResource{{Name: "nvidia.com/mig-3g.20gb", Replicas: 3}}}
	inv = mustInventory(t, migHardware(), cfg, "/sim")
	if r := inv.Resource("nvidia.com/mig-3g.20gb.shared"); r == nil || r.Socket != "nvidia-mig-3g.20gb.shared.sock" || strings.Join(ids(r.PluginDevices()), ",") != "MIG-10::0,MIG-10::1,MIG-10::2" {
		t.Fatalf("shared MIG: %v", resourceIDs(inv))
	}

	// single: all MIG devices must share a profile and no GPU may be without MIG.
	cfg = config.Default()
	cfg.Flags.MigStrategy = "single"
	if _, err := NewInventory(migHardware(), cfg, "/sim"); err == nil || !strings.Contains(err.Error(), "more than one MIG device type present on node") {
		t.Fatalf("single, mixed profiles: %v", err)
	}
	h := migHardware()
	h.GPUs[1].MIGDevices = h.GPUs[1].MIGDevices[1:]
	if _, err := NewInventory(h, cfg, "/sim"); err == nil || !strings.Contains(err.Error(), "all devices on the node must be configured with the same migEnabled value") {
		t.Fatalf("single, GPU without MIG: %v", err)
	}
	h.GPUs = h.GPUs[:2]
	inv = mustInventory(t, h, cfg, "/sim")
	if got := resourceIDs(inv); !reflect.DeepEqual(got, map[string]string{"nvidia.com/gpu nvidia-gpu.sock": "MIG-00,MIG-01,MIG-11"}) {
		t.Fatalf("single: %v", got)
	}

	// mixed: compute-instance-only profiles match no resource (upstream).
	cfg.Flags.MigStrategy = "mixed"
	h.GPUs[1].MIGDevices[0].Profile = "1c.3g.20gb"
	if _, err := NewInventory(h, cfg, "/sim"); err == nil || !strings.Contains(err.Error(), "does not match any resource patterns") {
		t.Fatalf("1c profile: %v", err)
	}
	// "+" in a profile becomes "." in the resource name.
	h.GPUs[1].MIGDevices[0].Profile = "1g.10gb+me"
	if inv := mustInventory(t, h, cfg, "/sim"); inv.Resource("nvidia.com/mig-1g.10gb.me") == nil {
		t.Fatalf("+me: %v", resourceIDs(inv))
	}
	// an explicit socketName that collides with a derived one
	cfg.SocketName = "nvidia-mig-1g.5gb.sock"
	cfg.Faults.ExtraDevices = 1 // a phantom keeps nvidia.com/gpu (and its socket) alive
	if _, err := NewInventory(h, cfg, "/sim"); err == nil || !strings.Contains(err.Error(), "share the socket") {
		t.Fatalf("socket collision: %v", err)
	}
}

func TestAllocateReplicas(t *testing.T) {
	cfg := config.Default()
	cfg.Sharing.TimeSlicing = &config.TimeSlicing{Resources: []config.ReplicatedResource{{Name: "nvidia.com/gpu", Replicas: 4}}}
	r := mustInventory(t, fourGPUs(), cfg, "/r").Primary
	resp, err := r.ContainerAllocate([]string{"GPU-b2::3", "GPU-a0::1", "GPU-b2::0"}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Envs["NVIDIA_VISIBLE_DEVICES"] != "GPU-b2,GPU-a0" || len(resp.Devices) != 2 || resp.Devices[0].HostPath != "/r/dev/nvidia12" ||
		len(resp.Mounts) != 2 || resp.Mounts[1].ContainerPath != "/run/gpu-sim/GPU-a0.json" {
		t.Fatalf("replicas: %v", resp)
	}
	// injectOnlyIndex 0: every container gets GPU 0, whatever replica it asked for.
	zero := 0
	for _, id := range []string{"GPU-a1::0", "GPU-b3::2", "GPU-a0::3", "GPU-b2::1", "GPU-a1::1"} {
		resp, err := r.ContainerAllocate([]string{id}, false, &zero)
		if err != nil || resp.Envs["NVIDIA_VISIBLE_DEVICES"] != "GPU-a0" || len(resp.Devices) != 1 || resp.Devices[0].ContainerPath != "/dev/nvidia10" {
			t.Fatalf("injectOnlyIndex %s: %v, %v", id, resp, err)
		}
	}
	if _, err := r.ContainerAllocate([]string{"GPU-a0"}, false, nil); err == nil {
		t.Fatal("a bare UUID is not an advertised replica ID")
	}
	// failRequestsGreaterThanOne
	cfg.Sharing.TimeSlicing.FailRequestsGreaterThanOne = true
	r = mustInventory(t, fourGPUs(), cfg, "/r").Primary
	var tl *RequestTooLargeError
	if _, err := r.ContainerAllocate([]string{"GPU-a0::0", "GPU-a1::0"}, false, nil); !errors.As(err, &tl) || err.Error() != "invalid request: maximum request size for shared resources is 1; found 2" {
		t.Fatalf("failRequestsGreaterThanOne: %v", err)
	}
	if _, err := r.ContainerAllocate([]string{"GPU-a0::0"}, false, nil); err != nil {
		t.Fatal(err)
	}
}

func TestAllocateMIG(t *testing.T) {
	cfg := config.Default()
	cfg.Flags.MigStrategy = "mixed"
	inv := mustInventory(t, migHardware(), cfg, "/r")
	r := inv.Resource("nvidia.com/mig-1g.5gb")
	resp, err := r.ContainerAllocate([]string{"MIG-01", "MIG-00"}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Envs["NVIDIA_VISIBLE_DEVICES"] != "MIG-01,MIG-00" || len(resp.Devices) != 1 || resp.Devices[0].HostPath != "/r/dev/nvidia0" || resp.Devices[0].ContainerPath != "/dev/nvidia0" ||
		len(resp.Mounts) != 2 || resp.Mounts[0].HostPath != "/r/run/MIG-01.json" || resp.Mounts[0].ContainerPath != "/run/gpu-sim/MIG-01.json" {
		t.Fatalf("mig: %v", resp)
	}
	// skipInjection: the MIG device is granted, nothing is injected.
	resp, err = r.ContainerAllocate([]string{"MIG-11"}, true, nil)
	if err != nil || resp.Envs["NVIDIA_VISIBLE_DEVICES"] != "MIG-11" || len(resp.Devices)+len(resp.Mounts) != 0 {
		t.Fatalf("skipInjection: %v, %v", resp, err)
	}
	// injectOnlyIndex 1: the first MIG device of GPU 1 in this resource.
	one := 1
	resp, err = r.ContainerAllocate([]string{"MIG-00"}, false, &one)
	if err != nil || resp.Envs["NVIDIA_VISIBLE_DEVICES"] != "MIG-11" || resp.Devices[0].ContainerPath != "/dev/nvidia1" {
		t.Fatalf("injectOnlyIndex: %v, %v", resp, err)
	}
	var infos []string
	for _, i := range inv.DeviceInfos() {
		infos = append(infos, i.DeviceUUID())
	}
	sort.Strings(infos)
	if strings.Join(infos, ",") != "GPU-a0,GPU-a1,GPU-a2,MIG-00,MIG-01,MIG-10,MIG-11" {
		t.Fatalf("infos %v", infos)
	}
}

func TestPreferredReplicas(t *testing.T) {
	cfg := config.Default()
	cfg.Sharing.TimeSlicing = &config.TimeSlicing{Resources: []config.ReplicatedResource{{Name: "gpu", Replicas: 2}}}
	r := mustInventory(t, fourGPUs(), cfg, "/r").Primary
	all := ids(r.PluginDevices())
	// Nothing allocated: spread over the devices, lowest index first.
	if got := r.Preferred(all, nil, 3); !reflect.DeepEqual(got, []string{"GPU-a0::0", "GPU-a1::0", "GPU-b2::0"}) {
		t.Fatalf("spread: %v", got)
	}
	// GPU-a0 and GPU-a1 have one replica allocated each, and the must-include replica counts as
	// allocated on GPU-b3 (as upstream): GPU-b2 first, then the tie goes to the lowest index.
	avail := []string{"GPU-a0::1", "GPU-a1::1", "GPU-b2::0", "GPU-b2::1", "GPU-b3::0", "GPU-b3::1"}
	if got := r.Preferred(avail, []string{"GPU-b3::1"}, 3); !reflect.DeepEqual(got, []string{"GPU-b3::1", "GPU-b2::0", "GPU-a0::1"}) {
		t.Fatalf("distributed: %v", got)
	}
}

// TestRegistersEveryResource runs a MIG-mixed plugin against the fake kubelet: one socket and one
// Register per resource, each serving its own devices.
func TestRegistersEveryResource(t *testing.T) {
	hwj := `{"driverVersion": "550.54.15", "cudaVersion": "12.4", "gpus": [
 {"index": 0, "uuid": "GPU-0", "name": "NVIDIA A100-SXM4-40GB", "numaNode": 1, "minor": 0, "migDevices": [{"profile": "1g.5gb", "uuid": "MIG-0", "gi": 7, "ci": 0}]},
 {"index": 1, "uuid": "GPU-1", "name": "NVIDIA A100-SXM4-40GB", "numaNode": 0, "minor": 1}]}`
	root, dp := simDirs(t, hwj)
	cfg := config.Default()
	cfg.Flags.MigStrategy = "mixed"
	cfg.DevicePluginPath = dp
	k := startKubelet(t, dp)
	lw := &testLog{t: t}
	p, err := New(Options{Config: cfg, Root: root, Log: log.New(lw, "", 0), HardwarePoll: 50 * time.Millisecond, KubeletPoll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{root: root, dp: dp, kubelet: k, plugin: p, log: lw, done: make(chan error, 1)}
	ctx, cancel := contextWithCancel()
	h.cancel = cancel
	go func() { h.done <- p.Run(ctx) }()
	t.Cleanup(func() { h.stop(t) })
	got := map[string]string{}
	for i := 0; i < 2; i++ {
		r := k.waitRegister(t, 5*time.Second)
		got[r.ResourceName] = r.Endpoint
	}
	if !reflect.DeepEqual(got, map[string]string{"nvidia.com/gpu": "nvidia-gpu.sock", "nvidia.com/mig-1g.5gb": "nvidia-mig-1g.5gb.sock"}) {
		t.Fatalf("registered %v", got)
	}
	c := clientFor(t, filepath.Join(dp, "nvidia-mig-1g.5gb.sock"))
	stream, err := c.ListAndWatch(ctxT(t), &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := stream.Recv()
	if err != nil || len(l.Devices) != 1 || l.Devices[0].ID != "MIG-0" || l.Devices[0].Topology.Nodes[0].ID != 1 {
		t.Fatalf("mig list %v, %v", l, err)
	}
	ar, err := c.Allocate(ctxT(t), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"MIG-0"}}}})
	if err != nil || ar.ContainerResponses[0].Envs["NVIDIA_VISIBLE_DEVICES"] != "MIG-0" || ar.ContainerResponses[0].Devices[0].HostPath != filepath.Join(root, "dev/nvidia0") {
		t.Fatalf("allocate %v, %v", ar, err)
	}
	data, err := os.ReadFile(filepath.Join(root, "run", "MIG-0.json"))
	if info, perr := hw.ParseDeviceInfo(data); err != nil || perr != nil || info.MIG == nil || info.MIG.Profile != "1g.5gb" || info.UUID != "GPU-0" || info.Minor != 0 || len(info.MIGDevices) != 0 {
		t.Fatalf("MIG info file %s: %v %v", data, err, perr)
	}
	// The whole-GPU resource holds only the GPU without MIG.
	l2, err := mustStream(t, clientFor(t, filepath.Join(dp, "nvidia-gpu.sock")))
	if err != nil || len(l2.Devices) != 1 || l2.Devices[0].ID != "GPU-1" {
		t.Fatalf("gpu list %v, %v", l2, err)
	}
	if len(p.SocketPaths()) != 2 || p.SocketPath() != filepath.Join(dp, "nvidia-gpu.sock") {
		t.Fatalf("sockets %v", p.SocketPaths())
	}
	// Shutdown removes both sockets.
	h.stop(t)
	for _, s := range []string{"nvidia-gpu.sock", "nvidia-mig-1g.5gb.sock"} {
		if _, err := os.Stat(filepath.Join(dp, s)); !os.IsNotExist(err) {
			t.Errorf("%s after stop: %v", s, err)
		}
	}
}
