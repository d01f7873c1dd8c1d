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
	if d.ResourceName != "nvidia.com/gpu" || d.SocketName != "" || d.SocketNameFor(d.ResourceName) != "nvidia-gpu.sock" || d.DevicePluginPath != "/var/lib/kubelet/device-plugins/" || d.Flags.MigStrategy != "none" {
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
		Flags: Flags{MigStrategy: "none"},
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
		"resourceNmae: nvidia.com/gpu\n":                        `unknown key "resourceNmae" (valid keys: resourceName, socketName, devicePluginPath, driverVersion, version, flags, sharing, faults)`,
		"faults:\n  crashAtStrat: true\n":                       `unknown key "faults.crashAtStrat" (valid keys: faults.crashAtStart, faults.neverRegister`,
		"socketName: a\nsocketName: b\n":                        `already set`,
		"faults:\n  extraDevices: many\n":                       `extraDevices`,
		"resourceName: gpu\n":                                   `resourceName "gpu"`,
		"socketName: a/b.sock\n":                                `socketName`,
		"socketName: kubelet.sock\n":                            `socketName`,
		"devicePluginPath: relative/\n":                         `devicePluginPath`,
		"faults:\n  extraDevices: -1\n":                         `extraDevices -1`,
		"faults:\n  registerDelaySeconds: -2\n":                 `registerDelaySeconds -2`,
		"faults:\n  allocateDelayMs: -3\n":                      `allocateDelayMs -3`,
		"faults:\n  unhealthyDevices: [-1]\n":                   `unhealthyDevices`,
		"faults:\n  numaOverride: {0: -2}\n":                    `numaOverride[0] = -2`,
		"faults:\n  numaOverride: {x: 1}\n":                     `numaOverride`,
		"- a\n- b\n":                                            `invalid config`,
		"version: v2\n":                                         `version "v2": unknown version`,
		"flags:\n  migStrategy: both\n":                         `flags.migStrategy "both": unknown MIG strategy`,
		"flags:\n  failOnInitError: true\n":                     `unknown key "flags.failOnInitError" (valid keys: flags.migStrategy)`,
		"sharing:\n  mps: {}\n":                                 `unknown key "sharing.mps" (valid keys: sharing.timeSlicing)`,
		"sharing:\n  timeSlicing:\n    renameByDefualt: true\n": `unknown key "sharing.timeSlicing.renameByDefualt"`,
		"sharing:\n  timeSlicing: {}\n":                         `sharing.timeSlicing.resources: no resources specified`,
		"sharing:\n  timeSlicing:\n    resources: []\n":         `no resources specified`,
		"sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 1}\n":                                 `sharing.timeSlicing.resources[0].replicas 1: number of replicas must be >= 2`,
		"sharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu}\n":                                              `replicas 0: number of replicas must be >= 2`,
		"sharing:\n  timeSlicing:\n    resources:\n    - {replicas: 2}\n":                                                       `resources[0].name: no resource name specified`,
		"sharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: 2, rename: x}\n":                                 `unknown key "sharing.timeSlicing.resources[0].rename" (valid keys: sharing.timeSlicing.resources[0].name, sharing.timeSlicing.resources[0].replicas, sharing.timeSlicing.resources[0].devices)`,
		"sharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: 2, devices: [0]}\n":                              `devices`,
		"sharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: 2, devices: some}\n":                             `devices "some": only "all" is supported`,
		"sharing:\n  timeSlicing:\n    resources:\n    - {name: gpu, replicas: 2}\n    - {name: nvidia.com/gpu, replicas: 3}\n": `resources[1].name "nvidia.com/gpu": listed twice`,
		"sharing:\n  timeSlicing:\n    resources:\n    - {name: a/b/c, replicas: 2}\n":                                          `want <name> or <domain>/<name>`,
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

func TestTimeSlicingAndMIG(t *testing.T) {
	c, err := Parse([]byte(`
version: v1
flags:
  migStrategy: mixed
sharing:
  timeSlicing:
    renameByDefault: true
    failRequestsGreaterThanOne: true
    resources:
    - name: nvidia.com/gpu
      replicas: 4
    - name: mig-1g.5gb
      replicas: 2
      devices: all
`))
	if err != nil {
		t.Fatal(err)
	}
	ts := c.Sharing.TimeSlicing
	if c.Flags.MigStrategy != "mixed" || ts == nil || !ts.RenameByDefault || !ts.FailRequestsGreaterThanOne || len(ts.Resources) != 2 ||
		ts.Resources[0] != (ReplicatedResource{Name: "nvidia.com/gpu", Replicas: 4}) ||
		ts.Resources[1] != (ReplicatedResource{Name: "nvidia.com/mig-1g.5gb", Replicas: 2, Devices: "all"}) {
		t.Fatalf("got %+v / %+v", c, ts)
	}
	if r, ok := c.Replicated("nvidia.com/mig-1g.5gb"); !ok || r.Replicas != 2 {
		t.Fatal("Replicated")
	}
	if _, ok := c.Replicated("nvidia.com/gpu.shared"); ok {
		t.Fatal("Replicated matches the renamed resource")
	}
	if c.SharedName("nvidia.com/gpu") != "nvidia.com/gpu.shared" {
		t.Fatal(c.SharedName("nvidia.com/gpu"))
	}
	c.Sharing.TimeSlicing.RenameByDefault = false
	if c.SharedName("nvidia.com/gpu") != "nvidia.com/gpu" {
		t.Fatal("SharedName without renameByDefault")
	}
	// JSON, with upstream's key names.
	c, err = Parse([]byte(`{"flags": {"migStrategy": "single"}, "sharing": {"timeSlicing": {"resources": [{"name": "gpu", "replicas": 3}]}}}`))
	if err != nil || c.Flags.MigStrategy != "single" || c.Sharing.TimeSlicing.Resources[0].Name != "nvidia.com/gpu" || c.Sharing.TimeSlicing.RenameByDefault {
		t.Fatalf("json: %+v, %v", c, err)
	}
}

func TestSocketNameFor(t *testing.T) {
	c := Default()
	for res, want := range map[string]string{
		"nvidia.com/gpu":        "nvidia-gpu.sock",
		"nvidia.com/gpu.shared": "nvidia-gpu.shared.sock",
		"nvidia.com/mig-1g.5gb": "nvidia-mig-1g.5gb.sock",
		"example.com/simgpu":    "nvidia-simgpu.sock",
	} {
		if got := c.SocketNameFor(res); got != want {
			t.Errorf("%s: %s, want %s", res, got, want)
		}
	}
	c.SocketName = "sim.sock" // explicit: only for resourceName itself
	if c.SocketNameFor("nvidia.com/gpu") != "sim.sock" || c.SocketNameFor("nvidia.com/gpu.shared") != "nvidia-gpu.shared.sock" || c.SocketNameFor("nvidia.com/mig-1g.5gb") != "nvidia-mig-1g.5gb.sock" {
		t.Fatal("explicit socketName")
	}
}
