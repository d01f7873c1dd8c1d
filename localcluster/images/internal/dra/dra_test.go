package dra

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gpuconform.local/images/internal/hw"
)

func hardware() *hw.Hardware {
	return &hw.Hardware{DriverVersion: "550.54.15", CUDAVersion: "12.4", GPUs: []hw.GPU{
		{Index: 0, UUID: "GPU-a", Name: "NVIDIA A100-SXM4-40GB", Minor: 0, MemoryTotalMiB: 40960},
		{Index: 1, UUID: "GPU-b", Name: "NVIDIA A100-SXM4-40GB", Minor: 1, MemoryTotalMiB: 40960},
	}}
}

func TestDevicesFollowNVIDIA(t *testing.T) {
	devs := Devices(hardware(), Faults{})
	if len(devs) != 4 || devs[0].Name != "gpu-0" || devs[1].Name != "gpu-1" || devs[2].Name != "gpu-0-mig-19-0-1" {
		t.Fatalf("devices %+v", devs)
	}
	a := devs[1].Attributes
	if *a["uuid"].StringValue != "GPU-b" || *a["type"].StringValue != "gpu" || *a["minor"].IntValue != 1 {
		t.Fatalf("attributes %+v", a)
	}
	if *a["cudaDriverVersion"].VersionValue != "12.4.0" || *a["driverVersion"].VersionValue != "550.54.15" {
		t.Fatalf("versions must be semver: %+v", a)
	}
	if q := devs[0].Capacity["memory"].Value; q.Value() != 40960<<20 {
		t.Fatalf("memory %v", q.String())
	}
}

func TestMigDevicesShareTheirGPUsCounters(t *testing.T) {
	devs, sets := Devices(hardware(), Faults{}), CounterSets(hardware(), Faults{})
	if len(sets) != 2 || sets[1].Name != "gpu-1-counter-set" || len(sets[1].Counters) != 9 {
		t.Fatalf("counter sets %+v", sets)
	}
	gpu, mig := devs[1], devs[3]
	if mig.Name != "gpu-1-mig-19-0-1" || *mig.Attributes["parentUUID"].StringValue != "GPU-b" ||
		*mig.Attributes["type"].StringValue != "mig" {
		t.Fatalf("MIG device %+v", mig)
	}
	if gpu.ConsumesCounters[0].CounterSet != "gpu-1-counter-set" || len(gpu.ConsumesCounters[0].Counters) != 9 ||
		mig.ConsumesCounters[0].CounterSet != "gpu-1-counter-set" || len(mig.ConsumesCounters[0].Counters) != 2 {
		t.Fatalf("consumption: gpu %+v, mig %+v", gpu.ConsumesCounters, mig.ConsumesCounters)
	}
	if g, ok := Lookup(hardware(), "gpu-1-mig-19-0-1", Faults{}); !ok || g.UUID() != "GPU-b" {
		t.Fatalf("MIG lookup %v %v", g, ok)
	}
	none := Devices(hardware(), Faults{MigNoCounters: true})
	if CounterSets(hardware(), Faults{MigNoCounters: true}) != nil || none[1].ConsumesCounters != nil ||
		none[3].ConsumesCounters != nil {
		t.Fatalf("mig-no-counters still consumes: %+v", none)
	}
}

func TestHealthReportNamesTheFailedGPUUnhealthy(t *testing.T) {
	now := time.Unix(1, 0)
	ok := HealthReport(hardware(), Faults{}, "n", now)
	if len(ok.Devices) != 4 || ok.Devices[0].DeviceName != "gpu-0" || ok.Devices[1].DeviceName != "gpu-0-mig-19-0-1" {
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
	if len(d) != 6 || d[2].Name != "gpu-2" {
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
		len(d[1].Taints) != 1 || d[1].Taints[0].Effect != "NoSchedule" || d[1].Taints[0].Key != "gpu.nvidia.com/xid" {
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

// staticMig is hardware() with GPU 1 in MIG mode: two MIG devices made.
func staticMig() *hw.Hardware {
	h := hardware()
	h.GPUs[1].MIGDevices = []hw.MIGDevice{{Profile: "3g.20gb", UUID: "MIG-b2", GI: 2}, {Profile: "1g.5gb", UUID: "MIG-b9", GI: 9}}
	return h
}

func TestAGPUInMIGModeIsPublishedAsItsMIGDevicesOnly(t *testing.T) {
	devs, sets := Devices(staticMig(), Faults{}), CounterSets(staticMig(), Faults{})
	var names []string
	for _, d := range devs {
		names = append(names, d.Name)
	}
	if got := strings.Join(names, ","); got != "gpu-0,gpu-1-mig-9-2-4,gpu-1-mig-19-9-1,gpu-0-mig-19-0-1" {
		t.Fatalf("devices %s", got)
	}
	m := devs[1]
	if *m.Attributes["uuid"].StringValue != "MIG-b2" || *m.Attributes["parentUUID"].StringValue != "GPU-b" ||
		*m.Attributes["type"].StringValue != "mig" || m.ConsumesCounters != nil {
		t.Fatalf("static MIG device %+v", m)
	}
	if q := m.Capacity["memory"].Value; q.Value() != 20<<30 {
		t.Fatalf("memory %s", q.String())
	}
	if len(sets) != 1 || sets[0].Name != "gpu-0-counter-set" {
		t.Fatalf("counter sets %+v", sets)
	}
	p, ok := Lookup(staticMig(), "gpu-1-mig-19-9-1", Faults{})
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
	if len(r.Devices) != 4 || r.Devices[2].DeviceName != "gpu-1-mig-9-2-4" || r.Devices[2].Health != "Unhealthy" {
		t.Fatalf("health %+v", r.Devices)
	}
}
