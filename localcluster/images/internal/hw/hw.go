// Package hw describes the simulated GPU hardware of a test-bed node: the hardware.json file the
// test bed writes under GPU_SIM_ROOT, and the per-device info files the device plugin writes for
// injection into containers.
package hw

import (
	"bytes"
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// DefaultRoot is the host directory holding the simulated hardware (overridable with $GPU_SIM_ROOT).
const DefaultRoot = "/var/lib/gpu-sim"

// Root returns $GPU_SIM_ROOT, or DefaultRoot when unset or empty.
func Root() string {
	if r := os.Getenv("GPU_SIM_ROOT"); r != "" {
		return r
	}
	return DefaultRoot
}

// HardwarePath is <root>/hardware.json.
func HardwarePath(root string) string { return filepath.Join(root, "hardware.json") }

// DevNodePath is <root>/dev/nvidia<minor>: the host-side device node of a GPU.
func DevNodePath(root string, minor int) string {
	return filepath.Join(root, "dev", "nvidia"+strconv.Itoa(minor))
}

// InfoPath is <root>/run/<uuid>.json: the per-device file the plugin writes and mounts.
func InfoPath(root, uuid string) string { return filepath.Join(root, "run", uuid+".json") }

// ContainerInfoDir is where device info files are mounted inside a container.
const ContainerInfoDir = "/run/gpu-sim"

// ContainerInfoPath is /run/gpu-sim/<uuid>.json.
func ContainerInfoPath(uuid string) string { return ContainerInfoDir + "/" + uuid + ".json" }

// ContainerDevPath is /dev/nvidia<minor>.
func ContainerDevPath(minor int) string { return "/dev/nvidia" + strconv.Itoa(minor) }

// GPU is one entry of hardware.json's "gpus".
type GPU struct {
	Index          int    `json:"index"`
	UUID           string `json:"uuid"`
	Name           string `json:"name"`
	PCIBusID       string `json:"pciBusId"`
	NUMANode       int    `json:"numaNode"`
	MemoryTotalMiB int    `json:"memoryTotalMiB"`
	Minor          int    `json:"minor"`
	// MIGDevices, when non-empty, puts the GPU in MIG mode with these devices (optional).
	MIGDevices []MIGDevice `json:"migDevices,omitempty"`
}

// MIGDevice is one MIG device of a GPU in MIG mode: its profile (e.g. "1g.5gb"), its UUID
// ("MIG-..."), and its GPU instance and compute instance IDs.
type MIGDevice struct {
	Profile string `json:"profile"`
	UUID    string `json:"uuid"`
	GI      int    `json:"gi"`
	CI      int    `json:"ci"`
}

// Hardware is the content of hardware.json.
type Hardware struct {
	DriverVersion string `json:"driverVersion"`
	CUDAVersion   string `json:"cudaVersion"`
	GPUs          []GPU  `json:"gpus"`
}

// Parse decodes and validates hardware.json. GPUs come back sorted by index.
func Parse(data []byte) (*Hardware, error) {
	var h Hardware
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("parse hardware: %w", err)
	}
	seenIdx := map[int]bool{}
	seenUUID := map[string]bool{}
	seenMinor := map[int]bool{}
	for _, g := range h.GPUs {
		switch {
		case !strings.HasPrefix(g.UUID, "GPU-"):
			return nil, fmt.Errorf("parse hardware: gpu index %d: uuid %q does not start with GPU-", g.Index, g.UUID)
		case g.Index < 0 || g.Minor < 0:
			return nil, fmt.Errorf("parse hardware: gpu %s: negative index or minor", g.UUID)
		case seenIdx[g.Index]:
			return nil, fmt.Errorf("parse hardware: duplicate gpu index %d", g.Index)
		case seenUUID[g.UUID]:
			return nil, fmt.Errorf("parse hardware: duplicate gpu uuid %s", g.UUID)
		case seenMinor[g.Minor]:
			return nil, fmt.Errorf("parse hardware: duplicate gpu minor %d", g.Minor)
		}
		seenIdx[g.Index], seenUUID[g.UUID], seenMinor[g.Minor] = true, true, true
	}
	for _, g := range h.GPUs {
		for _, m := range g.MIGDevices {
			switch {
			case !strings.HasPrefix(m.UUID, "MIG-"):
				return nil, fmt.Errorf("parse hardware: gpu index %d: mig uuid %q does not start with MIG-", g.Index, m.UUID)
			case strings.TrimSpace(m.Profile) == "":
				return nil, fmt.Errorf("parse hardware: gpu index %d: mig %s has no profile", g.Index, m.UUID)
			case m.GI < 0 || m.CI < 0:
				return nil, fmt.Errorf("parse hardware: gpu index %d: mig %s: negative gi or ci", g.Index, m.UUID)
			case seenUUID[m.UUID]:
				return nil, fmt.Errorf("parse hardware: duplicate mig uuid %s", m.UUID)
			}
			seenUUID[m.UUID] = true
		}
	}
	sort.Slice(h.GPUs, func(i, j int) bool { return h.GPUs[i].Index < h.GPUs[j].Index })
	return &h, nil
}

// Load reads and parses a hardware.json file.
func Load(path string) (*Hardware, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	h, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}

// DeviceInfo is the per-device file the plugin writes to <root>/run/<uuid>.json and mounts at
// /run/gpu-sim/<uuid>.json: the GPU's hardware entry (without migDevices) plus the effective
// driver and CUDA versions. For a MIG device the file is named after the MIG UUID, the GPU
// fields are the parent GPU's and MIG is set.
type DeviceInfo struct {
	GPU
	DriverVersion string     `json:"driverVersion"`
	CUDAVersion   string     `json:"cudaVersion"`
	MIG           *MIGDevice `json:"mig,omitempty"`
}

// DeviceUUID is the UUID the info file stands for: the MIG UUID for a MIG device, else the GPU's.
func (d DeviceInfo) DeviceUUID() string {
	if d.MIG != nil {
		return d.MIG.UUID
	}
	return d.UUID
}

// ParseDeviceInfo decodes one device info file.
func ParseDeviceInfo(data []byte) (*DeviceInfo, error) {
	var d DeviceInfo
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	if d.UUID == "" {
		return nil, fmt.Errorf("device info has no uuid")
	}
	return &d, nil
}

// MarshalDeviceInfo encodes a device info file (indented, with a trailing newline).
func MarshalDeviceInfo(d DeviceInfo) []byte {
	b, _ := json.MarshalIndent(d, "", "  ") // plain struct of strings and ints: cannot fail
	return append(b, '\n')
}

// PhantomUUID returns the ID of the n-th (0-based) phantom device advertised beyond the hardware:
// "GPU-" + the first 16 bytes of sha1("gpu-sim-phantom-<n>") laid out as a UUID, with the
// version nibble set to 5 and the RFC 4122 variant bits. Deterministic across restarts and nodes.
func PhantomUUID(n int) string {
	s := sha1.Sum([]byte("gpu-sim-phantom-" + strconv.Itoa(n)))
	s[6] = s[6]&0x0f | 0x50
	s[8] = s[8]&0x3f | 0x80
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", s[0:4], s[4:6], s[6:8], s[8:10], s[10:16])
}

// DriverMajor returns the leading integer of a driver version such as "550.54.15".
func DriverMajor(version string) (int, error) {
	head, _, _ := strings.Cut(strings.TrimSpace(version), ".")
	n, err := strconv.Atoi(head)
	if err != nil {
		return 0, fmt.Errorf("driver version %q: no numeric major version", version)
	}
	return n, nil
}
