// Package dra is the simulated DRA GPU driver's pure part: the ResourceSlices it publishes for the simulated
// hardware, and the CDI spec that injects a prepared claim's devices. Both follow NVIDIA's DRA driver as it
// publishes at kubernetes-sigs/dra-driver-nvidia-gpu HEAD 95932046 (2026-08-07; the project moved there from
// NVIDIA/k8s-dra-driver-gpu; docs/vendors.md), cmd/gpu-kubelet-plugin:
//   - names (deviceinfo.go CanonicalName, mig.go ToCanonicalName): a GPU is gpu-<minor>; a MIG device
//     gpu-<parent minor>-mig-<profile without dots>-<GI profile id>-<placement start>, e.g. gpu-0-mig-1g5gb-19-0
//     (the form since v25.12.0; v25.8.0's gpu-<minor>-mig-<GI profile>-<start>-<size> is gone);
//   - attributes (deviceinfo.go GpuInfo.Attributes, mig.go CommonAttributesMig): type, uuid, productName, brand,
//     architecture, cudaComputeCapability, driverVersion, cudaDriverVersion and the standard
//     resource.kubernetes.io/pciBusID and resource.kubernetes.io/pcieRoot (k8s.io/dynamic-resource-allocation
//     deviceattribute, the library NVIDIA's nvlib.go calls); no `minor` or `index` (v25.3.x only). A MIG device
//     has type mig, parentUUID, profile and its parent's attributes, and a uuid only when it exists (static MIG);
//     DynamicMIG's abstract MIG devices have none; resource.kubernetes.io/numaNode as HEAD 3b59d66e publishes it
//     (after v0.4.1), in its scalar form (the list form needs DRAListTypeAttributes, alpha). Left out:
//     addressingMode (coherent-memory systems only), the Fabric Manager attributes;
//   - layout (driver.go publishResources, GenerateDriverResources): with DynamicMIG (the GPU and its abstract MIG
//     devices on one counter set, partitions.go) one pool named after the node, on Kubernetes >= 1.35 a
//     counters-only slice first and then one device slice per GPU (G+1 slices), on 1.34 one slice per GPU with
//     its counters; without (static MIG) one slice with every device;
//   - health taints (device_health.go healthEventToTaint, PR 983): gpu.nvidia.com/xid=<XID> NoSchedule,
//     gpu.nvidia.com/gpu-lost NoSchedule.
//
// Injection is what the device plugin's Allocate makes the runtime add on the other path (the GPU's
// /dev/nvidia<minor> node and its info file under /run/gpu-sim), so the bed's nvidia-smi and vectoradd see a
// claim's devices exactly as a device plugin's.
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
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"gpuconform.local/images/internal/hw"
)

// DriverName is NVIDIA's DRA driver name for GPUs (its DeviceClass gpu.nvidia.com selects on it).
const DriverName = "gpu.nvidia.com"

// CDIKind is the CDI vendor/class of the specs written on prepare: "<vendor>/<class>" (CDI spec 0.6).
const CDIKind = "k8s.gpu.nvidia.com/claim"

// Faults are the driver's knobs for the bed's DRA fault rows (localcluster/faulttable.py); all off by default.
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
	NumaMisreported bool // publish each GPU's numaNode one off the NUMA node its PCI function sits on
	// healthy at first; on SIGUSR1 taint the last GPU out of service (UnhealthyTaint) and publish again, as the
	// driver does when it sees an XID while it runs (the bed's xid-during-run row sends the signal mid-run)
	TaintOnSignal bool
	// no seamless upgrade (upgrade.go): no kubeletplugin.RollingUpdate, and on SIGTERM the node's slices deleted
	NoSeamlessUpgrade bool
}

// NVIDIA's health taint keys (kubernetes-sigs/dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/device_health.go
// TaintKeyXID, TaintKeyGPULost; behind the driver's NVMLDeviceHealthCheck gate, alpha).
const (
	TaintKeyXID     = DriverName + "/xid"
	TaintKeyGPULost = DriverName + "/gpu-lost"
)

// UnhealthyTaint is the taint-unhealthy fault's taint on the last GPU, as NVIDIA's driver taints a GPU that
// reported a fatal XID (device_health.go healthEventToTaint: key gpu.nvidia.com/xid, value the XID, effect
// NoSchedule; None only for its hard-coded non-fatal XIDs): the scheduler allocates it to no claim that does not
// tolerate it (k8s.io/api resource/v1 DeviceTaint; KEP-5055). XID 79 is "GPU has fallen off the bus".
var UnhealthyTaint = resourceapi.DeviceTaint{Key: TaintKeyXID, Value: "79",
	Effect: resourceapi.DeviceTaintEffectNoSchedule}

// GPULostTaint is what NVIDIA's driver puts on every device when NVML reports a GPU lost (device_health.go:
// gpu.nvidia.com/gpu-lost, NoSchedule, no value).
var GPULostTaint = resourceapi.DeviceTaint{Key: TaintKeyGPULost, Effect: resourceapi.DeviceTaintEffectNoSchedule}

// ParseFaults reads a comma-separated list of fault names (GPU_SIM_DRA_FAULTS); unknown names are an error.
func ParseFaults(s string) (Faults, error) {
	var f Faults
	known := map[string]*bool{"omit-last-device": &f.OmitLastDevice, "extra-device": &f.ExtraDevice,
		"no-register": &f.NoRegister, "prepare-fails": &f.PrepareFails, "wrong-device": &f.WrongDevice,
		"double-inject": &f.DoubleInject, "pool-incomplete": &f.PoolIncomplete,
		"taint-unhealthy": &f.TaintUnhealthy, "mig-no-counters": &f.MigNoCounters,
		"report-unhealthy": &f.ReportUnhealthy, "numa-misreported": &f.NumaMisreported,
		"taint-on-signal": &f.TaintOnSignal, "no-seamless-upgrade": &f.NoSeamlessUpgrade}
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

// DeviceName is NVIDIA's canonical name of a whole GPU in its pool: gpu-<minor> (deviceinfo.go CanonicalName).
func DeviceName(g hw.GPU) string { return fmt.Sprintf("gpu-%d", g.Minor) }

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }
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

// migName is NVIDIA's canonical MIG device name (mig.go MigSpecTuple.ToCanonicalName): gpu-<parent minor>-mig-
// <profile, dots removed>-<GI profile id>-<placement start>, e.g. gpu-0-mig-1g5gb-19-0.
func migName(minor int, profile string, start int) string {
	return fmt.Sprintf("gpu-%d-mig-%s-%d-%d", minor, strings.ReplaceAll(profile, ".", ""), migProfiles[profile].id, start)
}

// MigDeviceName is the name of the GPU's one abstract (DynamicMIG) MIG device: 1g.5gb at placement 0.
func MigDeviceName(g hw.GPU) string { return migName(g.Minor, migProfile, 0) }

// StaticMigDeviceName is NVIDIA's name of a MIG device that exists on the GPU (static MIG, made by the MIG
// manager), named like an abstract one from its placement (placements).
func StaticMigDeviceName(g hw.GPU, m hw.MIGDevice) string {
	for i, d := range g.MIGDevices {
		if d == m {
			return migName(g.Minor, m.Profile, placements(g)[i])
		}
	}
	return migName(g.Minor, m.Profile, 0)
}

// placements is where each of the GPU's MIG devices starts among its 8 memory slices. hardware.json has no
// placements (NVML's GpuInstancePlacement), so they are laid out as the MIG manager would create them in order:
// each at the lowest free start that is a multiple of its size (A100-40GB: 3g.20gb at 0 or 4, 1g.5gb at 0-6),
// e.g. 3g.20gb + 2 x 1g.5gb -> 0, 4, 5.
func placements(g hw.GPU) []int {
	var used [migMemorySlices]bool
	out := make([]int, len(g.MIGDevices))
	for i, m := range g.MIGDevices {
		size := max(migProfiles[m.Profile].slices, 1)
		for start := 0; start+size <= migMemorySlices; start += size {
			free := true
			for k := start; k < start+size; k++ {
				free = free && !used[k]
			}
			if free {
				out[i] = start
				for k := start; k < start+size; k++ {
					used[k] = true
				}
				break
			}
		}
	}
	return out
}

// SysfsRoot is where the node's PCI tree is (<GPU_SIM_ROOT>/sys on the bed; "" = do not resolve the PCIe root).
var SysfsRoot = ""

// pciAttributes are the standard PCI attributes of a GPU (and of its MIG devices), as NVIDIA's nvlib.go gets them
// from k8s.io/dynamic-resource-allocation/deviceattribute: resource.kubernetes.io/pciBusID (the GPU's bus ID,
// "0000:07:00.0") and resource.kubernetes.io/pcieRoot (its root complex, "pci0000:00", read from SysfsRoot's
// bus/pci/devices/<bdf> link; left out when it cannot be resolved, as NVIDIA's driver does), and
// resource.kubernetes.io/numaNode (the function's numa_node, scalar; none for -1), as NVIDIA's driver publishes it
// since HEAD 3b59d66e (deviceinfo.go addNumaNodeAttribute). f.NumaMisreported publishes it one off.
func pciAttributes(g hw.GPU, attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, f Faults) {
	bdf := pciBDF(g.PCIBusID)
	a, err := deviceattribute.GetPCIBusIDAttribute(bdf)
	if err != nil {
		return
	}
	attrs[a.Name] = a.Value
	if SysfsRoot == "" {
		return
	}
	if a, err := deviceattribute.GetPCIeRootAttributeByPCIBusID(bdf, deviceattribute.WithFSFromRoot(SysfsRoot)); err == nil {
		attrs[a.Name] = a.Value
	}
	a, err = deviceattribute.GetNUMANodeAttributeByPCIBusID(bdf, deviceattribute.ScalarAttribute,
		deviceattribute.WithFSFromRoot(SysfsRoot))
	if err != nil || a.Value.IntValue == nil {
		return
	}
	if f.NumaMisreported {
		n := *a.Value.IntValue + 1
		a.Value.IntValue = &n
	}
	attrs[a.Name] = a.Value
}

// pciBDF turns NVML's bus ID "00000000:07:00.0" into sysfs' "0000:07:00.0" (4-digit domain, lower-case hex).
func pciBDF(busID string) string {
	domain, rest, ok := strings.Cut(busID, ":")
	if !ok {
		return ""
	}
	if len(domain) > 4 {
		domain = domain[len(domain)-4:]
	}
	return strings.ToLower(domain + ":" + rest)
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

// CounterSets is the pool's shared counters: one set per GPU not in MIG mode (NVIDIA's gpu-<minor>-counter-set,
// partitions.go PartSharedCounterSets), which the GPU consumes whole and each of its abstract MIG devices in part,
// so that the scheduler never allocates both. None with the mig-no-counters fault.
func CounterSets(h *hw.Hardware, f Faults) []resourceapi.CounterSet {
	if f.MigNoCounters {
		return nil
	}
	var out []resourceapi.CounterSet
	for _, g := range gpusFor(h, f) {
		if Static(g) {
			continue
		}
		out = append(out, counterSet(g))
	}
	return out
}

func counterSet(g hw.GPU) resourceapi.CounterSet {
	return resourceapi.CounterSet{Name: fmt.Sprintf(counterSetFormat, g.Minor), Counters: gpuCounters(g)}
}

// Devices returns the pool's devices for the hardware, with the faults' changes, GPU by GPU (perGPU).
func Devices(h *hw.Hardware, f Faults) []resourceapi.Device {
	var out []resourceapi.Device
	for _, devs := range perGPU(h, f) {
		out = append(out, devs...)
	}
	return out
}

// perGPU is each published GPU's devices, sorted by name as NVIDIA's driver sorts them in a GPU's slice: a GPU not
// in MIG mode (type gpu) and its abstract MIG device (type mig, parentUUID the GPU's uuid, no uuid), both drawing
// on the GPU's counter set; a GPU in MIG mode as its MIG devices only (staticMigDevices). taint-unhealthy taints
// the last GPU (its first device).
func perGPU(h *hw.Hardware, f Faults) [][]resourceapi.Device {
	gpus := gpusFor(h, f)
	out := make([][]resourceapi.Device, 0, len(gpus))
	for _, g := range gpus {
		if Static(g) {
			out = append(out, staticMigDevices(h, g, f))
			continue
		}
		gpu := resourceapi.Device{
			Name: DeviceName(g),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type": str("gpu"), "uuid": str(g.UUID), "productName": str(g.Name), "brand": str("Nvidia"),
				"architecture": str("Ampere"), "cudaComputeCapability": ver("8.0"),
				"driverVersion": ver(h.DriverVersion), "cudaDriverVersion": ver(h.CUDAVersion),
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: qty(int64(g.MemoryTotalMiB) << 20)},
			},
		}
		pciAttributes(g, gpu.Attributes, f)
		mig := resourceapi.Device{
			Name:       MigDeviceName(g),
			Attributes: migAttributes(h, g, migProfile, f),
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: qty(migMemoryBytes)}, "multiprocessors": {Value: qty(migMultiprocs)},
			},
		}
		if !f.MigNoCounters {
			set := fmt.Sprintf(counterSetFormat, g.Minor)
			gpu.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: set, Counters: gpuCounters(g)}}
			mig.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: set,
				Counters: map[string]resourceapi.Counter{"memory": {Value: qty(migMemoryBytes)},
					fmt.Sprintf(memSliceCounter, 0): {Value: qty(1)}}}}
		}
		out = append(out, []resourceapi.Device{gpu, mig})
	}
	if f.TaintUnhealthy && len(out) > 0 && len(out[len(out)-1]) > 0 {
		out[len(out)-1][0].Taints = []resourceapi.DeviceTaint{UnhealthyTaint} // the API server sets TimeAdded
	}
	return out
}

// migAttributes are a MIG device's attributes without uuid (mig.go CommonAttributesMig): type mig, its parent's
// uuid, its profile, and the parent's product, brand, architecture, versions and PCI attributes.
func migAttributes(h *hw.Hardware, g hw.GPU, profile string, f Faults) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	a := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"type": str("mig"), "parentUUID": str(g.UUID), "profile": str(profile), "productName": str(g.Name),
		"brand": str("Nvidia"), "architecture": str("Ampere"), "cudaComputeCapability": ver("8.0"),
		"driverVersion": ver(h.DriverVersion), "cudaDriverVersion": ver(h.CUDAVersion),
	}
	pciAttributes(g, a, f)
	return a
}

// Slices lays the pool out as NVIDIA's driver does (driver.go publishResources): with shared counters
// (DynamicMIG), `split` (Kubernetes >= 1.35, where a slice holds devices or shared counters, not both: kubernetes
// v1.37.2 pkg/apis/resource/validation/validation.go) a counters-only slice first and then one device slice per
// GPU, else one slice per GPU with its counter set; without counters (static MIG, mig-no-counters) one slice with
// every device.
func Slices(h *hw.Hardware, f Faults, split bool) []resourceslice.Slice {
	sets, groups := CounterSets(h, f), perGPU(h, f)
	if len(sets) == 0 {
		return []resourceslice.Slice{{Devices: Devices(h, f)}}
	}
	var out []resourceslice.Slice
	if split {
		out = append(out, resourceslice.Slice{SharedCounters: sets})
	}
	for i, g := range gpusFor(h, f) {
		s := resourceslice.Slice{Devices: groups[i]}
		if !split && !Static(g) {
			s.SharedCounters = []resourceapi.CounterSet{counterSet(g)}
		}
		out = append(out, s)
	}
	return out
}

// staticMigDevices is a GPU in MIG mode as NVIDIA's driver publishes it: its MIG devices only (type mig, their own
// uuid, parentUUID the GPU's), without counters (they exist: nothing is left to partition), named by placement,
// sorted by name, with the memory slices they hold as capacity (deviceinfo.go MigDeviceInfo.GetDevice).
func staticMigDevices(h *hw.Hardware, g hw.GPU, f Faults) []resourceapi.Device {
	var out []resourceapi.Device
	starts := placements(g)
	for i, m := range g.MIGDevices {
		p := migProfiles[m.Profile]
		attrs := migAttributes(h, g, m.Profile, f)
		attrs["uuid"] = str(m.UUID)
		capacity := map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{"memory": {Value: qty(p.memGiB << 30)}}
		for k := starts[i]; k < starts[i]+p.slices; k++ {
			capacity[resourceapi.QualifiedName(fmt.Sprintf("memorySlice%d", k))] = resourceapi.DeviceCapacity{Value: qty(1)}
		}
		out = append(out, resourceapi.Device{Name: migName(g.Minor, m.Profile, starts[i]), Attributes: attrs,
			Capacity: capacity})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// deviceNames is every device name the pool publishes for a GPU, in the order of hw.GPU.MIGDevices for a GPU in
// MIG mode (Lookup's k-th device is its k-th MIG device).
func deviceNames(g hw.GPU) []string {
	if !Static(g) {
		return []string{DeviceName(g), MigDeviceName(g)}
	}
	var out []string
	for i, m := range g.MIGDevices {
		out = append(out, migName(g.Minor, m.Profile, placements(g)[i]))
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
