package dra

import (
	"encoding/json"
	"strings"
	"testing"

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
	if g, ok := Lookup(hardware(), "gpu-1-mig-19-0-1", Faults{}); !ok || g.UUID != "GPU-b" {
		t.Fatalf("MIG lookup %v %v", g, ok)
	}
	none := Devices(hardware(), Faults{MigNoCounters: true})
	if CounterSets(hardware(), Faults{MigNoCounters: true}) != nil || none[1].ConsumesCounters != nil ||
		none[3].ConsumesCounters != nil {
		t.Fatalf("mig-no-counters still consumes: %+v", none)
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
	if g, _ := Lookup(hardware(), "gpu-0", Faults{WrongDevice: true}); g.UUID != "GPU-b" {
		t.Fatalf("wrong-device injects %s", g.UUID)
	}
	if g, _ := Lookup(hardware(), "gpu-1", Faults{DoubleInject: true}); g.UUID != "GPU-a" {
		t.Fatalf("double-inject: %+v", g)
	}
	if g, ok := Lookup(hardware(), "gpu-1", Faults{}); !ok || g.UUID != "GPU-b" {
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
	if err := json.Unmarshal(CDISpec("/var/lib/gpu-sim", "uid1", map[string]hw.GPU{"gpu-1": hardware().GPUs[1]}), &spec); err != nil {
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
