package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDefaults(t *testing.T) {
	for _, doc := range []string{"", "  \n", "# only a comment\n", "{}", "faults: {}\n"} {
		c, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if !reflect.DeepEqual(c, Default()) {
			t.Fatalf("%q: got %+v", doc, c)
		}
	}
	d := Default()
	if d.ResourceName != "nvidia.com/gpu" || d.SocketName != "nvidia-gpu.sock" || d.DevicePluginPath != "/var/lib/kubelet/device-plugins/" {
		t.Fatalf("defaults %+v", d)
	}
}

func TestLoadMissingFile(t *testing.T) {
	c, err := Load(filepath.Join(t.TempDir(), "absent.yaml"))
	if err != nil || !reflect.DeepEqual(c, Default()) {
		t.Fatalf("got %+v, %v", c, err)
	}
}

func TestFullYAML(t *testing.T) {
	doc := `
resourceName: example.com/gpu
socketName: sim.sock
devicePluginPath: /tmp/dp/
driverVersion: "470.82.01"
faults:
  crashAtStart: true
  neverRegister: true
  registerDelaySeconds: 5
  extraDevices: 2
  unhealthyDevices: [1, 3]
  numaOverride: {0: 1, 2: -1}
  allocateDelayMs: 250
  allocateError: "boom"
  skipInjection: true
`
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		ResourceName: "example.com/gpu", SocketName: "sim.sock", DevicePluginPath: "/tmp/dp/", DriverVersion: "470.82.01",
		Faults: Faults{CrashAtStart: true, NeverRegister: true, RegisterDelaySeconds: 5, ExtraDevices: 2,
			UnhealthyDevices: []int{1, 3}, NUMAOverride: map[int]int{0: 1, 2: -1}, AllocateDelayMs: 250,
			AllocateError: "boom", SkipInjection: true},
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
	if !c.Faults.Unhealthy(3) || c.Faults.Unhealthy(0) {
		t.Fatal("Unhealthy")
	}
}

func TestJSON(t *testing.T) {
	c, err := Parse([]byte(`{"faults": {"extraDevices": 1, "numaOverride": {"1": 0}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Faults.ExtraDevices != 1 || c.Faults.NUMAOverride[1] != 0 || len(c.Faults.NUMAOverride) != 1 || c.ResourceName != DefaultResourceName {
		t.Fatalf("got %+v", c)
	}
}

func TestRejects(t *testing.T) {
	for doc, want := range map[string]string{
		"resourceNmae: nvidia.com/gpu\n":        `unknown key "resourceNmae" (valid keys: resourceName, socketName, devicePluginPath, driverVersion, faults)`,
		"faults:\n  crashAtStrat: true\n":       `unknown key "faults.crashAtStrat" (valid keys: faults.crashAtStart, faults.neverRegister`,
		"socketName: a\nsocketName: b\n":        `already set`,
		"faults:\n  extraDevices: many\n":       `extraDevices`,
		"resourceName: gpu\n":                   `resourceName "gpu"`,
		"socketName: a/b.sock\n":                `socketName`,
		"socketName: kubelet.sock\n":            `socketName`,
		"devicePluginPath: relative/\n":         `devicePluginPath`,
		"faults:\n  extraDevices: -1\n":         `extraDevices -1`,
		"faults:\n  registerDelaySeconds: -2\n": `registerDelaySeconds -2`,
		"faults:\n  allocateDelayMs: -3\n":      `allocateDelayMs -3`,
		"faults:\n  unhealthyDevices: [-1]\n":   `unhealthyDevices`,
		"faults:\n  numaOverride: {0: -2}\n":    `numaOverride[0] = -2`,
		"faults:\n  numaOverride: {x: 1}\n":     `numaOverride`,
		"- a\n- b\n":                            `invalid config`,
	} {
		_, err := Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "invalid config: ") {
			t.Errorf("%q: error %v, want it to mention %q", doc, err, want)
		}
	}
}

func TestLoadNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(path, []byte("bogus: 1\n"), 0o644)
	if _, err := Load(path); err == nil || !strings.HasPrefix(err.Error(), path+": invalid config: ") {
		t.Fatalf("error %v", err)
	}
}
