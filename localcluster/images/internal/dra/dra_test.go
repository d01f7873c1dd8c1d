package dra

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"gpuconform.local/images/internal/hw"
)

func hardware() *hw.Hardware {
	return &hw.Hardware{DriverVersion: "550.54.15", CUDAVersion: "12.4", GPUs: []hw.GPU{
		{Index: 0, UUID: "GPU-a", Name: "NVIDIA A100-SXM4-40GB", Minor: 0, MemoryTotalMiB: 40960, PCIBusID: "00000000:07:00.0"},
		{Index: 1, UUID: "GPU-b", Name: "NVIDIA A100-SXM4-40GB", Minor: 1, MemoryTotalMiB: 40960, PCIBusID: "00000000:0F:00.0"},
	}}
}

func names(devs []resourceapi.Device) string {
	var out []string
	for _, d := range devs {
		out = append(out, d.Name)
	}
	return strings.Join(out, ",")
}

func TestDevicesFollowNVIDIA(t *testing.T) {
	devs := Devices(hardware(), Faults{})
	if got := names(devs); got != "gpu-0,gpu-0-mig-1g5gb-19-0,gpu-1,gpu-1-mig-1g5gb-19-0" {
		t.Fatalf("devices %s", got)
	}
	a := devs[2].Attributes
	if *a["uuid"].StringValue != "GPU-b" || *a["type"].StringValue != "gpu" {
		t.Fatalf("attributes %+v", a)
	}
	if _, ok := a["minor"]; ok {
		t.Fatalf("minor is v25.3.x only: %+v", a)
	}
	if _, ok := a["index"]; ok {
		t.Fatalf("index is v25.3.x only: %+v", a)
	}
	if v := a["resource.kubernetes.io/pciBusID"].StringValue; v == nil || *v != "0000:0f:00.0" {
		t.Fatalf("pciBusID %v", v)
	}
	if *a["cudaDriverVersion"].VersionValue != "12.4.0" || *a["driverVersion"].VersionValue != "550.54.15" {
		t.Fatalf("versions must be semver: %+v", a)
	}
	if q := devs[0].Capacity["memory"].Value; q.Value() != 40960<<20 {
		t.Fatalf("memory %v", q.String())
	}
}

// sysfsTree makes a sysfs tree under a temporary root with the GPU at bdf under root complex pci0000:00 and
// bus/pci/devices/<bdf> linking to it, as the kernel lays it out; numa, when not "", is its numa_node.
func sysfsTree(t *testing.T, bdf, numa string) string {
	t.Helper()
	sys := t.TempDir()
	dir := filepath.Join(sys, "devices", "pci0000:00", bdf)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if numa != "" {
		if err := os.WriteFile(filepath.Join(dir, "numa_node"), []byte(numa+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(sys, "bus", "pci", "devices"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../devices/pci0000:00/"+bdf, filepath.Join(sys, "bus", "pci", "devices", bdf)); err != nil {
		t.Fatal(err)
	}
	return sys
}

func TestPCIeRootIsReadFromTheSysfsTree(t *testing.T) {
	sys := sysfsTree(t, "0000:07:00.0", "")
	SysfsRoot = sys
	defer func() { SysfsRoot = "" }()
	devs := Devices(hardware(), Faults{})
	if v := devs[0].Attributes["resource.kubernetes.io/pcieRoot"].StringValue; v == nil || *v != "pci0000:00" {
		t.Fatalf("pcieRoot of gpu-0: %v", v)
	}
	if v := devs[1].Attributes["resource.kubernetes.io/pcieRoot"].StringValue; v == nil || *v != "pci0000:00" {
		t.Fatalf("pcieRoot of its MIG device: %v", v)
	}
	if _, ok := devs[2].Attributes["resource.kubernetes.io/pcieRoot"]; ok {
		t.Fatalf("gpu-1 is not in the tree, so no pcieRoot: %+v", devs[2].Attributes)
	}
}

func TestNUMANodeIsReadFromTheSysfsTreeAndMisreportedOnlyByTheFault(t *testing.T) {
	sys := sysfsTree(t, "0000:07:00.0", "1")
	SysfsRoot = sys
	defer func() { SysfsRoot = "" }()
	numa := func(f Faults) *int64 {
		return Devices(hardware(), f)[0].Attributes["resource.kubernetes.io/numaNode"].IntValue
	}
	if v := numa(Faults{}); v == nil || *v != 1 {
		t.Fatalf("numaNode of gpu-0: %v", v)
	}
	if v := numa(Faults{NumaMisreported: true}); v == nil || *v != 2 {
		t.Fatalf("numaNode of gpu-0 under numa-misreported: %v", v)
	}
}

func TestMigDevicesShareTheirGPUsCounters(t *testing.T) {
	devs, sets := Devices(hardware(), Faults{}), CounterSets(hardware(), Faults{})
	if len(sets) != 2 || sets[1].Name != "gpu-1-counter-set" || len(sets[1].Counters) != 9 {
		t.Fatalf("counter sets %+v", sets)
	}
	gpu, mig := devs[2], devs[3]
	if mig.Name != "gpu-1-mig-1g5gb-19-0" || *mig.Attributes["parentUUID"].StringValue != "GPU-b" ||
		*mig.Attributes["type"].StringValue != "mig" || *mig.Attributes["profile"].StringValue != "1g.5gb" {
		t.Fatalf("MIG device %+v", mig)
	}
	if _, ok := mig.Attributes["uuid"]; ok {
		t.Fatalf("an abstract (DynamicMIG) MIG device has no uuid: %+v", mig.Attributes)
	}
	if gpu.ConsumesCounters[0].CounterSet != "gpu-1-counter-set" || len(gpu.ConsumesCounters[0].Counters) != 9 ||
		mig.ConsumesCounters[0].CounterSet != "gpu-1-counter-set" || len(mig.ConsumesCounters[0].Counters) != 2 {
		t.Fatalf("consumption: gpu %+v, mig %+v", gpu.ConsumesCounters, mig.ConsumesCounters)
	}
	if g, ok := Lookup(hardware(), "gpu-1-mig-1g5gb-19-0", Faults{}); !ok || g.UUID() != "GPU-b" {
		t.Fatalf("MIG lookup %v %v", g, ok)
	}
	none := Devices(hardware(), Faults{MigNoCounters: true})
	if CounterSets(hardware(), Faults{MigNoCounters: true}) != nil || none[2].ConsumesCounters != nil ||
		none[3].ConsumesCounters != nil {
		t.Fatalf("mig-no-counters still consumes: %+v", none)
	}
}

func TestThePoolIsLaidOutAsNVIDIAsDriverLaysItOut(t *testing.T) {
	// Kubernetes >= 1.35: the counters-only slice first, then one device slice per GPU (G+1)
	s := Slices(hardware(), Faults{}, true)
	if len(s) != 3 || len(s[0].SharedCounters) != 2 || len(s[0].Devices) != 0 {
		t.Fatalf("split layout: %+v", s)
	}
	for i, want := range []string{"gpu-0,gpu-0-mig-1g5gb-19-0", "gpu-1,gpu-1-mig-1g5gb-19-0"} {
		if got := names(s[i+1].Devices); got != want || len(s[i+1].SharedCounters) != 0 {
			t.Fatalf("slice %d: %s, counters %+v", i+1, got, s[i+1].SharedCounters)
		}
	}
	// 1.34: one slice per GPU with its own counter set
	s = Slices(hardware(), Faults{}, false)
	if len(s) != 2 || len(s[1].SharedCounters) != 1 || s[1].SharedCounters[0].Name != "gpu-1-counter-set" ||
		names(s[1].Devices) != "gpu-1,gpu-1-mig-1g5gb-19-0" {
		t.Fatalf("combined layout: %+v", s)
	}
	// without counters (static MIG; mig-no-counters): one slice with every device
	if s := Slices(hardware(), Faults{MigNoCounters: true}, true); len(s) != 1 || len(s[0].Devices) != 4 {
		t.Fatalf("no counters: %+v", s)
	}
	if s := Slices(allMig(), Faults{}, true); len(s) != 1 || len(s[0].Devices) != 6 || s[0].SharedCounters != nil {
		t.Fatalf("static MIG: %+v", s)
	}
	// omit-last-device: one GPU, two slices
	if s := Slices(hardware(), Faults{OmitLastDevice: true}, true); len(s) != 2 {
		t.Fatalf("omit-last-device: %+v", s)
	}
}

func TestHealthReportNamesTheFailedGPUUnhealthy(t *testing.T) {
	now := time.Unix(1, 0)
	ok := HealthReport(hardware(), Faults{}, "n", now)
	if len(ok.Devices) != 4 || ok.Devices[0].DeviceName != "gpu-0" || ok.Devices[1].DeviceName != "gpu-0-mig-1g5gb-19-0" {
		t.Fatalf("report %+v", ok.Devices)
	}
	for _, d := range ok.Devices {
		if d.Health != "Healthy" || d.PoolName != "n" {
			t.Fatalf("healthy report %+v", d)
		}
	}
	bad := HealthReport(hardware(), Faults{ReportUnhealthy: true}, "n", now)
	if bad.Devices[2].Health != "Unhealthy" || bad.Devices[2].DeviceName != "gpu-1" || bad.Devices[0].Health != "Healthy" ||
		bad.Devices[2].Message != UnhealthyMessage {
		t.Fatalf("report-unhealthy %+v", bad.Devices)
	}
}

func TestFaultsChangeWhatIsPublishedAndInjected(t *testing.T) {
	if s := IncompleteSlice("n", Devices(hardware(), Faults{})); s.Spec.Pool.ResourceSliceCount != 2 || len(s.Spec.Devices) != 4 || *s.Spec.NodeName != "n" {
		t.Fatalf("incomplete slice: %+v", s.Spec)
	}
	if d := Devices(hardware(), Faults{OmitLastDevice: true}); len(d) != 2 {
		t.Fatalf("omit-last-device: %d devices", len(d))
	}
	d := Devices(hardware(), Faults{ExtraDevice: true})
	if len(d) != 6 || d[4].Name != "gpu-2" {
		t.Fatalf("extra-device: %+v", d)
	}
	if g, _ := Lookup(hardware(), "gpu-0", Faults{WrongDevice: true}); g.UUID() != "GPU-b" {
		t.Fatalf("wrong-device injects %s", g.UUID())
	}
	if g, _ := Lookup(hardware(), "gpu-1", Faults{DoubleInject: true}); g.UUID() != "GPU-a" {
		t.Fatalf("double-inject: %+v", g)
	}
	if g, ok := Lookup(hardware(), "gpu-1", Faults{}); !ok || g.UUID() != "GPU-b" {
		t.Fatalf("lookup %v %v", g, ok)
	}
	if d := Devices(hardware(), Faults{TaintUnhealthy: true}); len(d) != 4 || len(d[0].Taints) != 0 ||
		len(d[2].Taints) != 1 || d[2].Taints[0].Effect != "NoSchedule" || d[2].Taints[0].Key != "gpu.nvidia.com/xid" ||
		d[2].Taints[0].Value != "79" || len(d[3].Taints) != 0 {
		t.Fatalf("taint-unhealthy: %+v", d)
	}
	if _, err := ParseFaults("no-register, prepare-fails,double-inject,pool-incomplete,taint-unhealthy"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseFaults("bogus"); err == nil || !strings.Contains(err.Error(), "known:") {
		t.Fatalf("unknown fault: %v", err)
	}
}

func TestCDISpecInjectsNodeAndInfoFile(t *testing.T) {
	var spec map[string]any
	if err := json.Unmarshal(CDISpec("/var/lib/gpu-sim", "uid1", map[string]Prepared{"gpu-1": {GPU: hardware().GPUs[1]}}), &spec); err != nil {
		t.Fatal(err)
	}
	if spec["kind"] != CDIKind {
		t.Fatalf("kind %v", spec["kind"])
	}
	dev := spec["devices"].([]any)[0].(map[string]any)
	if dev["name"] != "uid1-gpu-1" {
		t.Fatalf("name %v", dev["name"])
	}
	edits, _ := json.Marshal(dev["containerEdits"])
	for _, want := range []string{`"path":"/dev/nvidia1"`, `"hostPath":"/var/lib/gpu-sim/dev/nvidia1"`,
		`"containerPath":"/run/gpu-sim/GPU-b.json"`, `NVIDIA_VISIBLE_DEVICES=GPU-b`} {
		if !strings.Contains(string(edits), want) {
			t.Errorf("edits %s lack %s", edits, want)
		}
	}
}

// staticMig is hardware() with GPU 1 in MIG mode: three MIG devices made (the bed's mig-mixed layout).
func staticMig() *hw.Hardware {
	h := hardware()
	h.GPUs[1].MIGDevices = []hw.MIGDevice{{Profile: "3g.20gb", UUID: "MIG-b2", GI: 2},
		{Profile: "1g.5gb", UUID: "MIG-b9", GI: 9}, {Profile: "1g.5gb", UUID: "MIG-b10", GI: 10}}
	return h
}

// allMig is staticMig with GPU 0 in MIG mode too.
func allMig() *hw.Hardware {
	h := staticMig()
	h.GPUs[0].MIGDevices = append([]hw.MIGDevice(nil), h.GPUs[1].MIGDevices...)
	return h
}

func TestAGPUInMIGModeIsPublishedAsItsMIGDevicesOnly(t *testing.T) {
	devs, sets := Devices(staticMig(), Faults{}), CounterSets(staticMig(), Faults{})
	// named by placement: 3g.20gb at 0 (4 memory slices), the 1g.5gb at 4 and 5
	if got := names(devs); got != "gpu-0,gpu-0-mig-1g5gb-19-0,gpu-1-mig-1g5gb-19-4,gpu-1-mig-1g5gb-19-5,gpu-1-mig-3g20gb-9-0" {
		t.Fatalf("devices %s", got)
	}
	m := devs[4]
	if *m.Attributes["uuid"].StringValue != "MIG-b2" || *m.Attributes["parentUUID"].StringValue != "GPU-b" ||
		*m.Attributes["type"].StringValue != "mig" || m.ConsumesCounters != nil {
		t.Fatalf("static MIG device %+v", m)
	}
	if q := m.Capacity["memory"].Value; q.Value() != 20<<30 {
		t.Fatalf("memory %s", q.String())
	}
	if _, ok := m.Capacity["memorySlice3"]; !ok || len(m.Capacity) != 5 {
		t.Fatalf("3g.20gb at 0 holds memory slices 0-3: %+v", m.Capacity)
	}
	if len(sets) != 1 || sets[0].Name != "gpu-0-counter-set" {
		t.Fatalf("counter sets %+v", sets)
	}
	if StaticMigDeviceName(staticMig().GPUs[1], staticMig().GPUs[1].MIGDevices[2]) != "gpu-1-mig-1g5gb-19-5" {
		t.Fatal("StaticMigDeviceName")
	}
	p, ok := Lookup(staticMig(), "gpu-1-mig-1g5gb-19-4", Faults{})
	if !ok || p.UUID() != "MIG-b9" || p.GPU.UUID != "GPU-b" {
		t.Fatalf("lookup %+v %v", p, ok)
	}
	if p, _ := Lookup(staticMig(), "gpu-0", Faults{WrongDevice: true}); p.UUID() != "MIG-b2" {
		t.Fatalf("wrong-device onto a GPU in MIG mode injects %s", p.UUID())
	}
	var spec map[string]any
	if err := json.Unmarshal(CDISpec("/r", "u", map[string]Prepared{"x": p}), &spec); err != nil {
		t.Fatal(err)
	}
	edits, _ := json.Marshal(spec["devices"].([]any)[0].(map[string]any)["containerEdits"])
	for _, want := range []string{`"path":"/dev/nvidia1"`, `"containerPath":"/run/gpu-sim/MIG-b9.json"`,
		`NVIDIA_VISIBLE_DEVICES=MIG-b9`} {
		if !strings.Contains(string(edits), want) {
			t.Errorf("edits %s lack %s", edits, want)
		}
	}
	r := HealthReport(staticMig(), Faults{ReportUnhealthy: true}, "n", time.Unix(1, 0))
	if len(r.Devices) != 5 || r.Devices[2].DeviceName != "gpu-1-mig-3g20gb-9-0" || r.Devices[2].Health != "Unhealthy" {
		t.Fatalf("health %+v", r.Devices)
	}
}
