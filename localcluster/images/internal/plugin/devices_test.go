package plugin

import (
	"errors"
	"reflect"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"gpuconform.local/images/internal/config"
	"gpuconform.local/images/internal/hw"
)

// a100s: one A100-SXM4-40GB per UUID, index i on NUMA node numa(i), device minor minorBase+i.
func a100s(uuids []string, numa func(i int) int, minorBase int) *hw.Hardware {
	h := &hw.Hardware{DriverVersion: "550.54.15", CUDAVersion: "12.4"}
	for i, u := range uuids {
		h.GPUs = append(h.GPUs, hw.GPU{Index: i, UUID: u, Name: "NVIDIA A100-SXM4-40GB", NUMANode: numa(i), MemoryTotalMiB: 40960, Minor: minorBase + i})
	}
	return h
}

// fourGPUs: indexes 0,1 on NUMA 0 and 2,3 on NUMA 1.
func fourGPUs() *hw.Hardware {
	return a100s([]string{"GPU-a0", "GPU-a1", "GPU-b2", "GPU-b3"}, func(i int) int { return i / 2 }, 10)
}

func TestInventory(t *testing.T) {
	cfg := config.Default()
	cfg.DriverVersion = "470.82.01"
	cfg.Faults.ExtraDevices = 2
	cfg.Faults.UnhealthyDevices = []int{1, 5}
	cfg.Faults.NUMAOverride = map[int]int{0: 1, 3: -1}
	inv := mustInventory(t, fourGPUs(), cfg, "/sim").Primary
	p0, p1 := hw.PhantomUUID(0), hw.PhantomUUID(1)
	got := inv.PluginDevices()
	topo := func(n int64) *pluginapi.TopologyInfo {
		return &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: n}}}
	}
	want := []*pluginapi.Device{
		{ID: "GPU-a0", Health: "Healthy", Topology: topo(1)},
		{ID: "GPU-a1", Health: "Unhealthy", Topology: topo(0)},
		{ID: "GPU-b2", Health: "Healthy", Topology: topo(1)},
		{ID: "GPU-b3", Health: "Healthy"},
		{ID: p0, Health: "Healthy", Topology: topo(1)},
		{ID: p1, Health: "Unhealthy", Topology: topo(1)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d devices", len(got))
	}
	for i := range want {
		if got[i].ID != want[i].ID || got[i].Health != want[i].Health || !reflect.DeepEqual(got[i].GetTopology().GetNodes(), want[i].GetTopology().GetNodes()) {
			t.Errorf("device %d: got %v, want %v", i, got[i], want[i])
		}
	}
	infos := mustInventory(t, fourGPUs(), cfg, "/sim").DeviceInfos()
	if len(infos) != 4 || infos[0].DriverVersion != "470.82.01" || infos[0].CUDAVersion != "12.4" || infos[3].Minor != 13 {
		t.Fatalf("infos %+v", infos)
	}
}

func TestContainerAllocate(t *testing.T) {
	cfg := config.Default()
	cfg.Faults.ExtraDevices = 1
	inv := mustInventory(t, fourGPUs(), cfg, "/var/lib/gpu-sim").Primary
	ph := hw.PhantomUUID(0)
	r, err := inv.ContainerAllocate([]string{"GPU-b2", ph, "GPU-a0"}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &pluginapi.ContainerAllocateResponse{
		Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-b2," + ph + ",GPU-a0"},
		Devices: []*pluginapi.DeviceSpec{
			{ContainerPath: "/dev/nvidia12", HostPath: "/var/lib/gpu-sim/dev/nvidia12", Permissions: "rw"},
			{ContainerPath: "/dev/nvidia10", HostPath: "/var/lib/gpu-sim/dev/nvidia10", Permissions: "rw"},
		},
		Mounts: []*pluginapi.Mount{
			{ContainerPath: "/run/gpu-sim/GPU-b2.json", HostPath: "/var/lib/gpu-sim/run/GPU-b2.json", ReadOnly: true},
			{ContainerPath: "/run/gpu-sim/GPU-a0.json", HostPath: "/var/lib/gpu-sim/run/GPU-a0.json", ReadOnly: true},
		},
	}
	if !reflect.DeepEqual(r.Envs, want.Envs) || len(r.Devices) != 2 || len(r.Mounts) != 2 || len(r.Annotations) != 0 || len(r.CdiDevices) != 0 {
		t.Fatalf("got %v", r)
	}
	for i := range want.Devices {
		g, w := r.Devices[i], want.Devices[i]
		if g.ContainerPath != w.ContainerPath || g.HostPath != w.HostPath || g.Permissions != w.Permissions {
			t.Errorf("device %d: %v, want %v", i, g, w)
		}
		gm, wm := r.Mounts[i], want.Mounts[i]
		if gm.ContainerPath != wm.ContainerPath || gm.HostPath != wm.HostPath || gm.ReadOnly != wm.ReadOnly {
			t.Errorf("mount %d: %v, want %v", i, gm, wm)
		}
	}

	r, err = inv.ContainerAllocate([]string{"GPU-a0"}, true, nil)
	if err != nil || r.Envs["NVIDIA_VISIBLE_DEVICES"] != "GPU-a0" || len(r.Devices) != 0 || len(r.Mounts) != 0 {
		t.Fatalf("skipInjection: %v, %v", r, err)
	}

	zero := 0
	r, err = inv.ContainerAllocate([]string{"GPU-b2", "GPU-b3"}, false, &zero)
	if err != nil || r.Envs["NVIDIA_VISIBLE_DEVICES"] != "GPU-a0" || len(r.Devices) != 1 ||
		r.Devices[0].ContainerPath != "/dev/nvidia10" {
		t.Fatalf("injectOnlyIndex: %v, %v", r, err)
	}

	_, err = inv.ContainerAllocate([]string{"GPU-a0", "GPU-nope", "GPU-zz"}, false, nil)
	var ue *UnknownDeviceError
	if !errors.As(err, &ue) || !reflect.DeepEqual(ue.IDs, []string{"GPU-nope", "GPU-zz"}) {
		t.Fatalf("unknown IDs: %v", err)
	}
}

func TestPreferred(t *testing.T) {
	inv := mustInventory(t, fourGPUs(), config.Default(), "/sim").Primary
	all := []string{"GPU-b3", "GPU-a1", "GPU-b2", "GPU-a0"}
	cases := []struct {
		name        string
		avail, must []string
		size        int
		want        []string
	}{
		{"lowest index", all, nil, 1, []string{"GPU-a0"}},
		{"one NUMA node", all, nil, 2, []string{"GPU-a0", "GPU-a1"}},
		{"spill over lowest index", all, nil, 3, []string{"GPU-a0", "GPU-a1", "GPU-b2"}},
		{"node that fits", []string{"GPU-a1", "GPU-b2", "GPU-b3"}, nil, 2, []string{"GPU-b2", "GPU-b3"}},
		{"must include first, its node next", all, []string{"GPU-b3"}, 2, []string{"GPU-b3", "GPU-b2"}},
		{"must include sorted", all, []string{"GPU-b2", "GPU-a1"}, 3, []string{"GPU-a1", "GPU-b2", "GPU-a0"}},
		{"must include only", all, []string{"GPU-a1", "GPU-a0"}, 2, []string{"GPU-a0", "GPU-a1"}},
		{"largest node when none fits", []string{"GPU-a0", "GPU-b2", "GPU-b3"}, nil, 3, []string{"GPU-b2", "GPU-b3", "GPU-a0"}},
		{"unknown IDs last", []string{"GPU-x", "GPU-b3"}, nil, 2, []string{"GPU-b3", "GPU-x"}},
	}
	for _, c := range cases {
		if got := inv.Preferred(c.avail, c.must, c.size); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	// Without topology information the choice is by index alone.
	cfg := config.Default()
	cfg.Faults.NUMAOverride = map[int]int{0: -1, 1: -1, 2: -1, 3: -1}
	inv = mustInventory(t, fourGPUs(), cfg, "/sim").Primary
	if got := inv.Preferred(all, []string{"GPU-b3"}, 2); !reflect.DeepEqual(got, []string{"GPU-b3", "GPU-a0"}) {
		t.Errorf("no topology: got %v", got)
	}
}

func mustInventory(t *testing.T, h *hw.Hardware, cfg config.Config, root string) *Inventory {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	inv, err := NewInventory(h, cfg, root)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}
