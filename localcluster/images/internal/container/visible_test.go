package container

import (
	"os"
	"path/filepath"
	"testing"

	"gpuconform.local/images/internal/hw"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func info(index, minor int, uuid string) string {
	return string(hw.MarshalDeviceInfo(hw.DeviceInfo{GPU: hw.GPU{Index: index, UUID: uuid, Minor: minor, Name: "NVIDIA A100-SXM4-40GB"}, DriverVersion: "550.54.15", CUDAVersion: "12.4"}))
}

func TestVisible(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "run/gpu-sim/GPU-c.json"), info(7, 3, "GPU-c"))
	write(t, filepath.Join(root, "run/gpu-sim/GPU-a.json"), info(2, 0, "GPU-a"))
	write(t, filepath.Join(root, "run/gpu-sim/GPU-b.json"), info(4, 1, "GPU-b")) // no device node
	write(t, filepath.Join(root, "run/gpu-sim/broken.json"), "{")
	write(t, filepath.Join(root, "run/gpu-sim/notes.txt"), "ignored")
	write(t, filepath.Join(root, "dev/nvidia0"), "")
	write(t, filepath.Join(root, "dev/nvidia3"), "")
	devs, warnings := Visible(root)
	if len(devs) != 2 || devs[0].UUID != "GPU-a" || devs[1].UUID != "GPU-c" || devs[1].Minor != 3 {
		t.Fatalf("devices %+v", devs)
	}
	if len(warnings) != 1 {
		t.Fatalf("warnings %v", warnings)
	}
}

func TestVisibleEmpty(t *testing.T) {
	if devs, _ := Visible(t.TempDir()); len(devs) != 0 {
		t.Fatalf("devices %+v", devs)
	}
}

func TestRoot(t *testing.T) {
	t.Setenv("GPU_SIM_CONTAINER_ROOT", "")
	if Root() != "/" {
		t.Fatal(Root())
	}
	t.Setenv("GPU_SIM_CONTAINER_ROOT", "/tmp/fake")
	if Root() != "/tmp/fake" {
		t.Fatal(Root())
	}
}

func TestVisibleMIG(t *testing.T) {
	root := t.TempDir()
	mig := func(uuid string, gi int) string {
		return string(hw.MarshalDeviceInfo(hw.DeviceInfo{GPU: hw.GPU{Index: 1, UUID: "GPU-p", Minor: 1}, DriverVersion: "550.54.15", MIG: &hw.MIGDevice{Profile: "1g.5gb", UUID: uuid, GI: gi}}))
	}
	write(t, filepath.Join(root, "run/gpu-sim/MIG-b.json"), mig("MIG-b", 7))
	write(t, filepath.Join(root, "run/gpu-sim/MIG-a.json"), mig("MIG-a", 9))
	write(t, filepath.Join(root, "run/gpu-sim/GPU-z.json"), info(0, 0, "GPU-z")) // no /dev/nvidia0
	write(t, filepath.Join(root, "dev/nvidia1"), "")
	devs, _ := Visible(root)
	if len(devs) != 2 || devs[0].DeviceUUID() != "MIG-b" || devs[1].DeviceUUID() != "MIG-a" {
		t.Fatalf("devices %+v", devs)
	}
}
