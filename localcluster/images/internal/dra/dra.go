// Package dra is the simulated DRA GPU driver's pure part: the ResourceSlice devices it publishes for the
// simulated hardware, and the CDI spec that injects a prepared claim's devices. Both follow NVIDIA's DRA driver
// (NVIDIA/k8s-dra-driver cmd/nvidia-dra-plugin/deviceinfo.go GetDevice and cdi.go; docs/vendors.md): devices
// named gpu-<index>, attributes type/uuid/minor/index/productName/brand/architecture and the version
// attributes, capacity memory. Injection is what the device plugin's Allocate makes the runtime add on the
// other path (the GPU's /dev/nvidia<minor> node and its info file under /run/gpu-sim), so the bed's nvidia-smi
// and vectoradd see a claim's devices exactly as a device plugin's.
package dra

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"gpuconform.local/images/internal/hw"
)

// DriverName is NVIDIA's DRA driver name for GPUs (its DeviceClass gpu.nvidia.com selects on it).
const DriverName = "gpu.nvidia.com"

// CDIKind is the CDI vendor/class of the specs written on prepare: "<vendor>/<class>" (CDI spec 0.6).
const CDIKind = "k8s.gpu.nvidia.com/claim"

// Faults are the driver's knobs for the bed's DRA fault rows (localcluster/faults.py); all off by default.
type Faults struct {
	OmitLastDevice bool // publish every GPU but the last: the slice does not equal the hardware
	ExtraDevice    bool // publish a device the hardware lacks
	NoRegister     bool // publish slices but never register with the kubelet
	PrepareFails   bool // NodePrepareResources fails for every claim
	WrongDevice    bool // inject the next GPU instead of the allocated one
	DoubleInject   bool // inject the first GPU for every allocated device: two claims' containers share it
	PoolIncomplete bool // publish the pool's devices in one slice that says the pool has two
	TaintUnhealthy bool // publish the last GPU tainted out of service (UnhealthyTaint), as a driver that saw an XID
	MigNoCounters  bool // publish the MIG devices and their GPUs without shared counters: both can be allocated
	// report the last GPU Unhealthy to the kubelet (DRAResourceHealth) but keep it in service (no taint)
	ReportUnhealthy bool
}

// UnhealthyTaint is the taint-unhealthy fault's taint on the last GPU: NoSchedule, so that the scheduler allocates
// it to no claim that does not tolerate it (k8s.io/api resource/v1 DeviceTaint; KEP-5055). The key and value follow
// NVIDIA's proposed health taints (gpu.nvidia.com/xid=<XID>; NVIDIA/k8s-dra-driver-gpu issue 905); XID 79 is "GPU
// has fallen off the bus".
var UnhealthyTaint = resourceapi.DeviceTaint{Key: DriverName + "/xid", Value: "79",
	Effect: resourceapi.DeviceTaintEffectNoSchedule}

// ParseFaults reads a comma-separated list of fault names (GPU_SIM_DRA_FAULTS); unknown names are an error.
func ParseFaults(s string) (Faults, error) {
	var f Faults
	known := map[string]*bool{"omit-last-device": &f.OmitLastDevice, "extra-device": &f.ExtraDevice,
		"no-register": &f.NoRegister, "prepare-fails": &f.PrepareFails, "wrong-device": &f.WrongDevice,
		"double-inject": &f.DoubleInject, "pool-incomplete": &f.PoolIncomplete,
		"taint-unhealthy": &f.TaintUnhealthy, "mig-no-counters": &f.MigNoCounters,
		"report-unhealthy": &f.ReportUnhealthy}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		p, ok := known[name]
		if !ok {
			names := make([]string, 0, len(known))
			for k := range known {
				names = append(names, k)
			}
			sort.Strings(names)
			return Faults{}, fmt.Errorf("unknown DRA fault %q (known: %s)", name, strings.Join(names, ", "))
		}
		*p = true
	}
	return f, nil
}

// DeviceName is NVIDIA's canonical name of a whole GPU in its pool.
func DeviceName(g hw.GPU) string { return fmt.Sprintf("gpu-%d", g.Index) }

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }
func num(n int) resourceapi.DeviceAttribute {
	v := int64(n)
	return resourceapi.DeviceAttribute{IntValue: &v}
}
func ver(s string) resourceapi.DeviceAttribute {
	// DRA version attributes are semantic versions; the driver's "570.86.15" is one, CUDA's "12.8" is not.
	if strings.Count(s, ".") == 1 {
		s += ".0"
	}
	return resourceapi.DeviceAttribute{VersionValue: &s}
}

// migProfileInfo is a MIG profile of the A100-40GB (NVIDIA MIG user guide, "A100 MIG profiles"): its GPU instance
// profile id, its size in memory slices (of 8) and its memory.
type migProfileInfo struct {
	id, slices int
	memGiB     int64
}

// migProfiles: the A100-40GB profiles the bed uses, for the dynamic MIG device and the static-MIG hardware.
var migProfiles = map[string]migProfileInfo{"1g.5gb": {19, 1, 5}, "2g.10gb": {14, 2, 10}, "3g.20gb": {9, 4, 20},
	"4g.20gb": {5, 4, 20}, "7g.40gb": {0, 8, 40}}

// The one MIG profile the simulated driver offers per GPU, as NVIDIA's driver names and describes an abstract MIG
// device with dynamic MIG (partitionable devices, KEP-4815; NVIDIA/k8s-dra-driver-gpu cmd/gpu-kubelet-plugin
// deviceinfo.go and partitions.go): 1g.5gb of an A100-40GB is GPU instance profile 19, one of 8 memory slices.
const (
	migProfile       = "1g.5gb"
	migMemorySlices  = 8
	migMultiprocs    = 14
	memSliceCounter  = "memory-slice-%d"
	counterSetFormat = "gpu-%d-counter-set"
)

var (
	migProfileID   = migProfiles[migProfile].id
	migMemoryBytes = migProfiles[migProfile].memGiB << 30
)

// MigDeviceName is NVIDIA's name of a MIG device: gpu-<minor>-mig-<GI profile id>-<placement start>-<size>.
func MigDeviceName(g hw.GPU) string { return fmt.Sprintf("gpu-%d-mig-%d-0-1", g.Index, migProfileID) }

// StaticMigDeviceName is NVIDIA's name of a MIG device that exists on the GPU (static MIG, made by the MIG
// manager), as for a dynamic one: gpu-<minor>-mig-<GI profile id>-<placement start>-<size>; the simulated hardware
// has no placements, so its GPU instance id stands for the start.
func StaticMigDeviceName(g hw.GPU, m hw.MIGDevice) string {
	p := migProfiles[m.Profile]
	return fmt.Sprintf("gpu-%d-mig-%d-%d-%d", g.Minor, p.id, m.GI, p.slices)
}

// Static reports whether the GPU is in MIG mode with its MIG devices made (the hardware lists them): the driver
// publishes those MIG devices and not the GPU, as NVIDIA's does for a GPU in MIG mode.
func Static(g hw.GPU) bool { return len(g.MIGDevices) > 0 }

// gpusFor is the GPUs the pool publishes: the hardware's, with omit-last-device and extra-device applied.
func gpusFor(h *hw.Hardware, f Faults) []hw.GPU {
	gpus := append([]hw.GPU(nil), h.GPUs...)
	if f.OmitLastDevice && len(gpus) > 0 {
		gpus = gpus[:len(gpus)-1]
	}
	if f.ExtraDevice {
		next := 0
		for _, g := range h.GPUs {
			if g.Index >= next {
				next = g.Index + 1
			}
		}
		gpus = append(gpus, hw.GPU{Index: next, UUID: hw.PhantomUUID(0), Name: "NVIDIA A100-SXM4-40GB",
			MemoryTotalMiB: 40960, Minor: next})
	}
	return gpus
}

func qty(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.BinarySI) }

// gpuCounters is everything of the GPU's counter set: its memory and each memory slice.
func gpuCounters(g hw.GPU) map[string]resourceapi.Counter {
	c := map[string]resourceapi.Counter{"memory": {Value: qty(int64(g.MemoryTotalMiB) << 20)}}
	for i := 0; i < migMemorySlices; i++ {
		c[fmt.Sprintf(memSliceCounter, i)] = resourceapi.Counter{Value: qty(1)}
	}
	return c
}

// CounterSets is the pool's shared counters: one set per GPU (NVIDIA's gpu-<minor>-counter-set), which the GPU
// consumes whole and each of its MIG devices in part, so that the scheduler never allocates both. Published in
// a slice of its own (a slice has devices or shared counters, not both: kubernetes v1.37.2
// pkg/apis/resource/validation/validation.go). None with the mig-no-counters fault.
func CounterSets(h *hw.Hardware, f Faults) []resourceapi.CounterSet {
	if f.MigNoCounters {
		return nil
	}
	var out []resourceapi.CounterSet
	for _, g := range gpusFor(h, f) {
		if Static(g) {
			continue
		}
		out = append(out, resourceapi.CounterSet{Name: fmt.Sprintf(counterSetFormat, g.Index), Counters: gpuCounters(g)})
	}
	return out
}

// Devices returns the pool's devices for the hardware, with the faults' changes: each whole GPU (type gpu), then
// one MIG device of each (type mig, parentUUID the GPU's uuid), both drawing on the GPU's counter set.
func Devices(h *hw.Hardware, f Faults) []resourceapi.Device {
	gpus := gpusFor(h, f)
	out := make([]resourceapi.Device, 0, 2*len(gpus))
	for _, g := range gpus {
		if Static(g) {
			out = append(out, staticMigDevices(h, g)...)
			continue
		}
		d := resourceapi.Device{
			Name: DeviceName(g),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type": str("gpu"), "uuid": str(g.UUID), "minor": num(g.Minor), "index": num(g.Index),
				"productName": str(g.Name), "brand": str("Nvidia"), "architecture": str("Ampere"),
				"cudaComputeCapability": ver("8.0"), "driverVersion": ver(h.DriverVersion),
				"cudaDriverVersion": ver(h.CUDAVersion),
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: qty(int64(g.MemoryTotalMiB) << 20)},
			},
		}
		if !f.MigNoCounters {
			d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{
				CounterSet: fmt.Sprintf(counterSetFormat, g.Index), Counters: gpuCounters(g)}}
		}
		out = append(out, d)
	}
	if f.TaintUnhealthy && len(out) > 0 {
		out[len(out)-1].Taints = []resourceapi.DeviceTaint{UnhealthyTaint} // the API server sets TimeAdded
	}
	for _, g := range gpus {
		if Static(g) {
			continue
		}
		d := resourceapi.Device{
			Name: MigDeviceName(g),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type": str("mig"), "uuid": str("MIG-" + strings.TrimPrefix(g.UUID, "GPU-")),
				"parentUUID": str(g.UUID), "profile": str(migProfile), "productName": str(g.Name),
				"brand": str("Nvidia"), "architecture": str("Ampere"), "cudaComputeCapability": ver("8.0"),
				"driverVersion": ver(h.DriverVersion), "cudaDriverVersion": ver(h.CUDAVersion),
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: qty(migMemoryBytes)}, "multiprocessors": {Value: qty(migMultiprocs)},
			},
		}
		if !f.MigNoCounters {
			d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{
				CounterSet: fmt.Sprintf(counterSetFormat, g.Index),
				Counters: map[string]resourceapi.Counter{"memory": {Value: qty(migMemoryBytes)},
					fmt.Sprintf(memSliceCounter, 0): {Value: qty(1)}}}}
		}
		out = append(out, d)
	}
	return out
}

// staticMigDevices is a GPU in MIG mode as NVIDIA's driver publishes it: its MIG devices only (type mig, their own
// uuid, parentUUID the GPU's), without counters (they exist: nothing is left to partition).
func staticMigDevices(h *hw.Hardware, g hw.GPU) []resourceapi.Device {
	var out []resourceapi.Device
	for _, m := range g.MIGDevices {
		out = append(out, resourceapi.Device{
			Name: StaticMigDeviceName(g, m),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type": str("mig"), "uuid": str(m.UUID), "parentUUID": str(g.UUID), "profile": str(m.Profile),
				"productName": str(g.Name), "brand": str("Nvidia"), "architecture": str("Ampere"),
				"cudaComputeCapability": ver("8.0"), "driverVersion": ver(h.DriverVersion),
				"cudaDriverVersion": ver(h.CUDAVersion),
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: qty(migProfiles[m.Profile].memGiB << 30)}},
		})
	}
	return out
}

// deviceNames is every device name the pool publishes for a GPU.
func deviceNames(g hw.GPU) []string {
	if !Static(g) {
		return []string{DeviceName(g), MigDeviceName(g)}
	}
	var out []string
	for _, m := range g.MIGDevices {
		out = append(out, StaticMigDeviceName(g, m))
	}
	return out
}

// UnhealthyMessage is what the driver tells the kubelet about the GPU it reports Unhealthy.
const UnhealthyMessage = "XID 79: GPU has fallen off the bus"

// HealthReport is the driver's report to the kubelet's DRAResourceHealth stream (KEP-4680; kubelet feature gate
// ResourceHealthStatus, beta and on since 1.36): every device of the pool Healthy, but the last GPU (and its MIG
// device) Unhealthy where the driver saw it fail: the taint-unhealthy fault (it also takes the GPU out of
// service) and report-unhealthy (it does not).
func HealthReport(h *hw.Hardware, f Faults, pool string, now time.Time) kubeletplugin.DeviceHealthReport {
	gpus := gpusFor(h, f)
	var r kubeletplugin.DeviceHealthReport
	for i, g := range gpus {
		health, msg := kubeletplugin.HealthStatusHealthy, ""
		if (f.TaintUnhealthy || f.ReportUnhealthy) && i == len(gpus)-1 {
			health, msg = kubeletplugin.HealthStatusUnhealthy, UnhealthyMessage
		}
		for _, name := range deviceNames(g) {
			r.Devices = append(r.Devices, kubeletplugin.DeviceHealth{PoolName: pool, DeviceName: name, Health: health,
				LastUpdated: now, HealthCheckTimeout: HealthTimeout, Message: msg})
		}
	}
	return r
}

// HealthTimeout is how long the kubelet trusts a report; the driver re-sends every third of it.
const HealthTimeout = 60 * time.Second

// IncompleteSlice is the pool-incomplete fault's one slice: the node's devices in a pool whose resourceSliceCount
// says 2 (k8s.io/api resource/v1 ResourcePool: a consumer must wait for every slice of the newest generation).
func IncompleteSlice(node string, devices []resourceapi.Device) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{GenerateName: node + "-" + DriverName + "-"},
		Spec: resourceapi.ResourceSliceSpec{Driver: DriverName, NodeName: &node, Devices: devices,
			Pool: resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 2}},
	}
}

// Prepared is what one allocated device injects: a GPU, or one of its static MIG devices (MIG set; a dynamic MIG
// device is injected as its GPU: the simulated hardware has no instance for it).
type Prepared struct {
	GPU hw.GPU
	MIG *hw.MIGDevice
}

// UUID is what the container is given: the MIG device's UUID, else the GPU's.
func (p Prepared) UUID() string {
	if p.MIG != nil {
		return p.MIG.UUID
	}
	return p.GPU.UUID
}

// prepared is the k-th device the pool publishes for GPU g: the GPU itself (or, k 1, its dynamic MIG device,
// injected as the GPU), or in MIG mode its k-th MIG device.
func prepared(g hw.GPU, k int) Prepared {
	if Static(g) {
		m := g.MIGDevices[min(k, len(g.MIGDevices)-1)]
		return Prepared{GPU: g, MIG: &m}
	}
	return Prepared{GPU: g}
}

// Lookup finds what a device name (a GPU's or one of its MIG devices') stands for; with the wrong-device fault,
// the next GPU in the hardware (its first MIG device, in MIG mode); with double-inject, the first.
func Lookup(h *hw.Hardware, device string, f Faults) (Prepared, bool) {
	for i, g := range h.GPUs {
		for k, name := range deviceNames(g) {
			if name != device {
				continue
			}
			if f.DoubleInject {
				return prepared(h.GPUs[0], 0), true
			}
			if f.WrongDevice && len(h.GPUs) > 1 {
				return prepared(h.GPUs[(i+1)%len(h.GPUs)], 0), true
			}
			return prepared(g, k), true
		}
	}
	return Prepared{}, false
}

// CDI spec, version 0.6.0 (tags.cncf.io/container-device-interface specs-go), only the fields used here.
type cdiSpec struct {
	Version string      `json:"cdiVersion"`
	Kind    string      `json:"kind"`
	Devices []cdiDevice `json:"devices"`
}
type cdiDevice struct {
	Name  string   `json:"name"`
	Edits cdiEdits `json:"containerEdits"`
}
type cdiEdits struct {
	Env         []string        `json:"env,omitempty"`
	DeviceNodes []cdiDeviceNode `json:"deviceNodes,omitempty"`
	Mounts      []cdiMount      `json:"mounts,omitempty"`
}
type cdiDeviceNode struct {
	Path        string `json:"path"`
	HostPath    string `json:"hostPath,omitempty"`
	Permissions string `json:"permissions,omitempty"`
}
type cdiMount struct {
	HostPath      string   `json:"hostPath"`
	ContainerPath string   `json:"containerPath"`
	Options       []string `json:"options,omitempty"`
}

// CDIName is the unique CDI device name for one device of one claim (a claim UID is never reused, so runtimes
// that cache specs never hit a stale one: kubeletplugin.DRAPlugin's advice).
func CDIName(claimUID, device string) string { return claimUID + "-" + device }

// CDISpec returns the spec file's content for a claim's devices, keyed by device name: per device the GPU's
// device node (from the sim root's node, which carries NVIDIA's major 195) and its info file (a MIG device's, named
// after its UUID), read-only, and NVIDIA_VISIBLE_DEVICES with the UUID, as NVIDIA's CDI specs set it.
func CDISpec(root, claimUID string, gpus map[string]Prepared) []byte {
	names := make([]string, 0, len(gpus))
	for n := range gpus {
		names = append(names, n)
	}
	sort.Strings(names)
	spec := cdiSpec{Version: "0.6.0", Kind: CDIKind}
	for _, n := range names {
		p := gpus[n]
		g, id := p.GPU, p.UUID()
		spec.Devices = append(spec.Devices, cdiDevice{Name: CDIName(claimUID, n), Edits: cdiEdits{
			Env:         []string{"NVIDIA_VISIBLE_DEVICES=" + id},
			DeviceNodes: []cdiDeviceNode{{Path: hw.ContainerDevPath(g.Minor), HostPath: hw.DevNodePath(root, g.Minor), Permissions: "rw"}},
			Mounts: []cdiMount{{HostPath: hw.InfoPath(root, id), ContainerPath: hw.ContainerInfoPath(id),
				Options: []string{"ro", "nosuid", "nodev", "rbind", "rprivate"}}},
		}})
	}
	b, _ := json.MarshalIndent(spec, "", "  ") // plain structs: cannot fail
	return append(b, '\n')
}

// CDIFile is the spec file of one claim in the CDI directory.
func CDIFile(cdiDir, claimUID string) string {
	return strings.TrimRight(cdiDir, "/") + "/gpuconform-sim-" + claimUID + ".json"
}
