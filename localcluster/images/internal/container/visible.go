// Package container finds the simulated GPUs injected into the current container: the device
// info files mounted under /run/gpu-sim whose /dev/nvidia<minor> node also exists (for a MIG
// device's file, the parent GPU's node). Both lookups
// are prefixed with $GPU_SIM_CONTAINER_ROOT (default "/") so they can be tested outside a container.
package container

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gpuconform.local/images/internal/hw"
)

// Root returns $GPU_SIM_CONTAINER_ROOT, or "/" when unset or empty.
func Root() string {
	if r := os.Getenv("GPU_SIM_CONTAINER_ROOT"); r != "" {
		return r
	}
	return "/"
}

// DeniedPrefix starts the warning for a device node the container may not open: its devices cgroup denies it,
// as after a systemd daemon-reload re-applied device rules without the GPUs. Real nvidia-smi then fails with
// "Failed to initialize NVML: Unknown Error" (NVIDIA/nvidia-container-toolkit issue #48).
const DeniedPrefix = "access denied: "

// denied reports whether opening the node fails for lack of permission. The simulated GPUs' nodes carry
// NVIDIA's major 195 with no driver behind it, so an allowed open fails with ENXIO instead: the devices cgroup
// is checked before the driver is looked up (Linux fs/char_dev.c chrdev_open runs after
// security/device_cgroup.c devcgroup_inode_permission).
func denied(node string) bool {
	f, err := os.OpenFile(node, os.O_RDONLY, 0)
	if err == nil {
		f.Close()
		return false
	}
	return errors.Is(err, fs.ErrPermission)
}

// Visible returns the devices visible below root, sorted by hardware index. Unreadable or
// malformed info files are skipped; the returned warnings say why.
func Visible(root string) (devs []hw.DeviceInfo, warnings []string) {
	dir := filepath.Join(root, hw.ContainerInfoDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil // no mount at all: no devices
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		d, err := hw.ParseDeviceInfo(data)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		if seen[d.DeviceUUID()] {
			continue
		}
		node := filepath.Join(root, hw.ContainerDevPath(d.Minor))
		if _, err := os.Stat(node); err != nil {
			continue // info mounted but no device node: not usable
		}
		if denied(node) {
			warnings = append(warnings, DeniedPrefix+node)
			continue
		}
		seen[d.DeviceUUID()] = true
		devs = append(devs, *d)
	}
	// By index; a GPU's whole-GPU file before its MIG devices, those by GPU instance, compute
	// instance and UUID.
	sort.SliceStable(devs, func(i, j int) bool {
		a, b := devs[i], devs[j]
		if a.Index != b.Index {
			return a.Index < b.Index
		}
		if a.UUID != b.UUID {
			return a.UUID < b.UUID
		}
		if (a.MIG == nil) != (b.MIG == nil) {
			return a.MIG == nil
		}
		if a.MIG != nil && (a.MIG.GI != b.MIG.GI || a.MIG.CI != b.MIG.CI) {
			if a.MIG.GI != b.MIG.GI {
				return a.MIG.GI < b.MIG.GI
			}
			return a.MIG.CI < b.MIG.CI
		}
		return a.DeviceUUID() < b.DeviceUUID()
	})
	return devs, warnings
}
