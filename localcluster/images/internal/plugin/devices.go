package plugin

import (
	"fmt"
	"sort"
	"strings"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"gpuconform.local/images/internal/config"
	"gpuconform.local/images/internal/hw"
)

// VisibleDevicesEnv is the environment variable Allocate sets to the granted device IDs.
const VisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES"

// Device is one advertised device: a real GPU from hardware.json or a phantom.
type Device struct {
	ID      string // GPU-<uuid>
	Index   int    // hardware index; phantoms continue after the highest real index
	NUMA    int    // NUMA node reported in the topology; -1 = none
	Healthy bool
	Phantom bool
	GPU     hw.GPU // the hardware entry (zero for phantoms)
}

// Inventory is the plugin's view of its devices, built from the hardware and the config.
type Inventory struct {
	Devices       []Device // by index
	byID          map[string]*Device
	Root          string // GPU_SIM_ROOT on the host (and, by the same hostPath, in the plugin pod)
	DriverVersion string // effective: config override or hardware.json
	CUDAVersion   string
}

// NewInventory builds the device list: real GPUs by index, then cfg.Faults.ExtraDevices phantoms.
func NewInventory(h *hw.Hardware, cfg config.Config, root string) *Inventory {
	inv := &Inventory{Root: root, DriverVersion: h.DriverVersion, CUDAVersion: h.CUDAVersion, byID: map[string]*Device{}}
	if cfg.DriverVersion != "" {
		inv.DriverVersion = cfg.DriverVersion
	}
	next, lastNUMA := 0, 0
	for _, g := range h.GPUs {
		inv.Devices = append(inv.Devices, Device{ID: g.UUID, Index: g.Index, NUMA: g.NUMANode, GPU: g})
		next = g.Index + 1
		lastNUMA = g.NUMANode
	}
	if lastNUMA < 0 {
		lastNUMA = 0
	}
	for n := 0; n < cfg.Faults.ExtraDevices; n++ {
		inv.Devices = append(inv.Devices, Device{ID: hw.PhantomUUID(n), Index: next + n, NUMA: lastNUMA, Phantom: true})
	}
	for i := range inv.Devices {
		d := &inv.Devices[i]
		if n, ok := cfg.Faults.NUMAOverride[d.Index]; ok {
			d.NUMA = n
		}
		if d.NUMA < 0 {
			d.NUMA = -1
		}
		d.Healthy = !cfg.Faults.Unhealthy(d.Index)
		inv.byID[d.ID] = d
	}
	return inv
}

// Lookup returns the device with this ID.
func (inv *Inventory) Lookup(id string) (*Device, bool) {
	d, ok := inv.byID[id]
	return d, ok
}

// PluginDevices is the ListAndWatch payload.
func (inv *Inventory) PluginDevices() []*pluginapi.Device {
	out := make([]*pluginapi.Device, 0, len(inv.Devices))
	for _, d := range inv.Devices {
		pd := &pluginapi.Device{ID: d.ID, Health: pluginapi.Healthy}
		if !d.Healthy {
			pd.Health = pluginapi.Unhealthy
		}
		if d.NUMA >= 0 {
			pd.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(d.NUMA)}}}
		}
		out = append(out, pd)
	}
	return out
}

// DeviceInfos returns the per-device info files to write (real devices only).
func (inv *Inventory) DeviceInfos() []hw.DeviceInfo {
	var out []hw.DeviceInfo
	for _, d := range inv.Devices {
		if !d.Phantom {
			out = append(out, hw.DeviceInfo{GPU: d.GPU, DriverVersion: inv.DriverVersion, CUDAVersion: inv.CUDAVersion})
		}
	}
	return out
}

// UnknownDeviceError reports device IDs that the plugin does not advertise.
type UnknownDeviceError struct{ IDs []string }

func (e *UnknownDeviceError) Error() string {
	return fmt.Sprintf("unknown device IDs: %s", strings.Join(e.IDs, ", "))
}

// ContainerAllocate builds the response for one container's device IDs. With skipInjection only
// the environment entry is returned; phantom devices never get device nodes or mounts.
func (inv *Inventory) ContainerAllocate(ids []string, skipInjection bool, injectOnly *int) (*pluginapi.ContainerAllocateResponse, error) {
	var unknown []string
	var devs []*Device
	for _, id := range ids {
		d, ok := inv.Lookup(id)
		if !ok {
			unknown = append(unknown, id)
			continue
		}
		devs = append(devs, d)
	}
	if len(unknown) > 0 {
		return nil, &UnknownDeviceError{IDs: unknown}
	}
	if injectOnly != nil {
		devs = nil
		for i := range inv.Devices {
			if inv.Devices[i].Index == *injectOnly {
				devs = []*Device{&inv.Devices[i]}
				ids = []string{inv.Devices[i].ID}
			}
		}
	}
	resp := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{VisibleDevicesEnv: strings.Join(ids, ",")}}
	if skipInjection {
		return resp, nil
	}
	for _, d := range devs {
		if d.Phantom {
			continue
		}
		resp.Devices = append(resp.Devices, &pluginapi.DeviceSpec{
			ContainerPath: hw.ContainerDevPath(d.GPU.Minor),
			HostPath:      hw.DevNodePath(inv.Root, d.GPU.Minor),
			Permissions:   "rw",
		})
		resp.Mounts = append(resp.Mounts, &pluginapi.Mount{
			ContainerPath: hw.ContainerInfoPath(d.ID),
			HostPath:      hw.InfoPath(inv.Root, d.ID),
			ReadOnly:      true,
		})
	}
	return resp, nil
}

// Preferred picks size devices from available: must-include devices first (by index), then the
// rest preferring one NUMA node (the first must-include device's node, else the lowest-indexed
// node that can hold all the remaining devices, else the node with the most candidates), each
// group by lowest index. IDs the plugin does not know sort last, by ID, on no NUMA node.
func (inv *Inventory) Preferred(available, mustInclude []string, size int) []string {
	type cand struct {
		id    string
		index int
		numa  int
	}
	mk := func(id string) cand {
		if d, ok := inv.Lookup(id); ok {
			return cand{id, d.Index, d.NUMA}
		}
		return cand{id, int(^uint(0) >> 1), -1}
	}
	less := func(a, b cand) bool {
		if a.index != b.index {
			return a.index < b.index
		}
		return a.id < b.id
	}
	taken := map[string]bool{}
	var must []cand
	for _, id := range mustInclude {
		if !taken[id] {
			taken[id] = true
			must = append(must, mk(id))
		}
	}
	sort.Slice(must, func(i, j int) bool { return less(must[i], must[j]) })
	var rest []cand
	for _, id := range available {
		if !taken[id] {
			taken[id] = true
			rest = append(rest, mk(id))
		}
	}
	sort.Slice(rest, func(i, j int) bool { return less(rest[i], rest[j]) })

	out := make([]string, 0, size)
	for _, c := range must {
		out = append(out, c.id)
	}
	need := size - len(out)
	if need <= 0 {
		return out
	}
	preferred, found := 0, false
	if len(must) > 0 && must[0].numa >= 0 {
		preferred, found = must[0].numa, true
	} else {
		count := map[int]int{}
		var order []int // NUMA nodes in order of their lowest-indexed candidate
		for _, c := range rest {
			if c.numa < 0 {
				continue
			}
			if count[c.numa] == 0 {
				order = append(order, c.numa)
			}
			count[c.numa]++
		}
		for _, n := range order {
			if count[n] >= need {
				preferred, found = n, true
				break
			}
		}
		if !found {
			for _, n := range order {
				if !found || count[n] > count[preferred] {
					preferred, found = n, true
				}
			}
		}
	}
	if found {
		sort.SliceStable(rest, func(i, j int) bool {
			return rest[i].numa == preferred && rest[j].numa != preferred
		})
	}
	for _, c := range rest {
		if need == 0 {
			break
		}
		out = append(out, c.id)
		need--
	}
	return out
}
