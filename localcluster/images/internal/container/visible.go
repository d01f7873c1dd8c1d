// Package container finds the simulated GPUs injected into the current container: the device
// info files mounted under /run/gpu-sim whose /dev/nvidia<minor> node also exists. Both lookups
// are prefixed with $GPU_SIM_CONTAINER_ROOT (default "/") so they can be tested outside a container.
package container

import (
	"fmt"
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
		if seen[d.UUID] {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, hw.ContainerDevPath(d.Minor))); err != nil {
			continue // info mounted but no device node: not usable
		}
		seen[d.UUID] = true
		devs = append(devs, *d)
	}
	sort.SliceStable(devs, func(i, j int) bool {
		if devs[i].Index != devs[j].Index {
			return devs[i].Index < devs[j].Index
		}
		return devs[i].UUID < devs[j].UUID
	})
	return devs, warnings
}
