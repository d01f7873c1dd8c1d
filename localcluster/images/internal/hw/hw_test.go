package hw

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
)

const sample = `{"driverVersion": "550.54.15", "cudaVersion": "12.4", "gpus": [
  {"index": 1, "uuid": "GPU-66666666-7777-8888-9999-aaaaaaaaaaaa", "name": "NVIDIA A100-SXM4-40GB", "pciBusId": "00000000:0F:00.0", "numaNode": 1, "memoryTotalMiB": 40960, "minor": 1},
  {"index": 0, "uuid": "GPU-11111111-2222-3333-4444-555555555555", "name": "NVIDIA A100-SXM4-40GB", "pciBusId": "00000000:07:00.0", "numaNode": 0, "memoryTotalMiB": 40960, "minor": 0}
]}`

func TestParse(t *testing.T) {
	h, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	if h.DriverVersion != "550.54.15" || h.CUDAVersion != "12.4" || len(h.GPUs) != 2 {
		t.Fatalf("parsed %+v", h)
	}
	if g := h.GPUs[0]; g.Index != 0 || g.UUID != "GPU-11111111-2222-3333-4444-555555555555" || g.PCIBusID != "00000000:07:00.0" || g.MemoryTotalMiB != 40960 {
		t.Fatalf("first GPU (sorted by index) = %+v", g)
	}
}

func TestParseErrors(t *testing.T) {
	for name, doc := range map[string]string{
		"not json":        `{`,
		"bad uuid":        `{"gpus":[{"index":0,"uuid":"1234","minor":0}]}`,
		"duplicate index": `{"gpus":[{"index":0,"uuid":"GPU-a","minor":0},{"index":0,"uuid":"GPU-b","minor":1}]}`,
		"duplicate uuid":  `{"gpus":[{"index":0,"uuid":"GPU-a","minor":0},{"index":1,"uuid":"GPU-a","minor":1}]}`,
		"duplicate minor": `{"gpus":[{"index":0,"uuid":"GPU-a","minor":0},{"index":1,"uuid":"GPU-b","minor":0}]}`,
		"negative minor":  `{"gpus":[{"index":0,"uuid":"GPU-a","minor":-1}]}`,
	} {
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestDeviceInfoRoundTrip(t *testing.T) {
	d := DeviceInfo{GPU: GPU{Index: 3, UUID: "GPU-11111111-2222-3333-4444-555555555555", Name: "NVIDIA A100-SXM4-40GB", PCIBusID: "00000000:07:00.0", NUMANode: 1, MemoryTotalMiB: 40960, Minor: 3}, DriverVersion: "470.82.01", CUDAVersion: "11.4"}
	b := MarshalDeviceInfo(d)
	want := `{
  "index": 3,
  "uuid": "GPU-11111111-2222-3333-4444-555555555555",
  "name": "NVIDIA A100-SXM4-40GB",
  "pciBusId": "00000000:07:00.0",
  "numaNode": 1,
  "memoryTotalMiB": 40960,
  "minor": 3,
  "driverVersion": "470.82.01",
  "cudaVersion": "11.4"
}
`
	if string(b) != want {
		t.Fatalf("got:\n%s", b)
	}
	back, err := ParseDeviceInfo(b)
	if err != nil || !reflect.DeepEqual(*back, d) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	if _, err := ParseDeviceInfo([]byte(`{"index":0}`)); err == nil {
		t.Fatal("info without uuid accepted")
	}
}

func TestPhantomUUID(t *testing.T) {
	re := regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for n := 0; n < 16; n++ {
		id := PhantomUUID(n)
		if !re.MatchString(id) || len(id) != 40 {
			t.Fatalf("PhantomUUID(%d) = %q", n, id)
		}
		if PhantomUUID(n) != id || seen[id] {
			t.Fatalf("PhantomUUID(%d) not stable or not unique", n)
		}
		seen[id] = true
	}
	if got := PhantomUUID(0); got != "GPU-"+phantom0 {
		t.Fatalf("PhantomUUID(0) = %s, want GPU-%s", got, phantom0)
	}
}

// phantom0 pins the derivation (sha1 of "gpu-sim-phantom-0", version 5, RFC 4122 variant).
const phantom0 = "d743df3a-6b45-55c5-8b2f-48158a805f34"

func TestDriverMajor(t *testing.T) {
	for in, want := range map[string]int{"550.54.15": 550, "470.82.01": 470, " 560 ": 560} {
		if got, err := DriverMajor(in); err != nil || got != want {
			t.Errorf("DriverMajor(%q) = %d, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "abc", ".1"} {
		if _, err := DriverMajor(in); err == nil {
			t.Errorf("DriverMajor(%q): no error", in)
		}
	}
}

func TestPaths(t *testing.T) {
	if got := DevNodePath("/var/lib/gpu-sim", 3); got != "/var/lib/gpu-sim/dev/nvidia3" {
		t.Error(got)
	}
	if got := InfoPath("/var/lib/gpu-sim", "GPU-x"); got != "/var/lib/gpu-sim/run/GPU-x.json" {
		t.Error(got)
	}
	if got := ContainerInfoPath("GPU-x"); got != "/run/gpu-sim/GPU-x.json" {
		t.Error(got)
	}
	if got := ContainerDevPath(3); got != "/dev/nvidia3" {
		t.Error(got)
	}
	t.Setenv("GPU_SIM_ROOT", "")
	if Root() != DefaultRoot {
		t.Error("default root")
	}
	t.Setenv("GPU_SIM_ROOT", "/tmp/x")
	if Root() != "/tmp/x" || !strings.HasSuffix(HardwarePath(Root()), "/tmp/x/hardware.json") {
		t.Error("root override")
	}
}

func TestParseMIG(t *testing.T) {
	h, err := Parse([]byte(`{"gpus":[{"index":0,"uuid":"GPU-a","minor":0,"migDevices":[{"profile":"1g.5gb","uuid":"MIG-x","gi":7,"ci":0}]},{"index":1,"uuid":"GPU-b","minor":1}]}`))
	if err != nil || len(h.GPUs[0].MIGDevices) != 1 || h.GPUs[0].MIGDevices[0] != (MIGDevice{Profile: "1g.5gb", UUID: "MIG-x", GI: 7}) || h.GPUs[1].MIGDevices != nil {
		t.Fatalf("%+v, %v", h, err)
	}
	for name, doc := range map[string]string{
		"bad mig uuid":  `{"gpus":[{"index":0,"uuid":"GPU-a","minor":0,"migDevices":[{"profile":"1g.5gb","uuid":"GPU-x"}]}]}`,
		"no profile":    `{"gpus":[{"index":0,"uuid":"GPU-a","minor":0,"migDevices":[{"profile":" ","uuid":"MIG-x"}]}]}`,
		"duplicate mig": `{"gpus":[{"index":0,"uuid":"GPU-a","minor":0,"migDevices":[{"profile":"1g.5gb","uuid":"MIG-x"},{"profile":"1g.5gb","uuid":"MIG-x","gi":8}]}]}`,
		"negative gi":   `{"gpus":[{"index":0,"uuid":"GPU-a","minor":0,"migDevices":[{"profile":"1g.5gb","uuid":"MIG-x","gi":-1}]}]}`,
	} {
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	d := DeviceInfo{GPU: GPU{UUID: "GPU-a"}, MIG: &MIGDevice{Profile: "1g.5gb", UUID: "MIG-x", GI: 7}}
	back, err := ParseDeviceInfo(MarshalDeviceInfo(d))
	if err != nil || !reflect.DeepEqual(*back, d) || back.DeviceUUID() != "MIG-x" || (DeviceInfo{GPU: GPU{UUID: "GPU-a"}}).DeviceUUID() != "GPU-a" {
		t.Fatalf("mig info round trip: %+v, %v", back, err)
	}
}
