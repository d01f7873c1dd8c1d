package plugin

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"gpuconform.local/images/internal/config"
	"gpuconform.local/images/internal/hw"
)

// VisibleDevicesEnv is the environment variable Allocate sets to the granted device IDs.
const VisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES"

// Device is one advertised device: a whole GPU, a MIG device, a phantom, or a time-slicing
// replica of one of these.
type Device struct {
	ID      string        // advertised ID: the UUID, or "<uuid>::<replica>" for a replica
	UUID    string        // the underlying device: GPU-... (whole GPU or phantom) or MIG-...
	Index   int           // physical GPU index, which index-based fault knobs address; phantoms continue after the highest real index
	Replica int           // replica number, -1 when the resource is not replicated
	NUMA    int           // NUMA node reported in the topology; -1 = none
	Healthy bool          //
	Phantom bool          //
	GPU     hw.GPU        // the hardware entry, the parent GPU's for a MIG device (zero for phantoms)
	MIG     *hw.MIGDevice // set for a MIG device
}

// Resource is one extended resource: its own socket, gRPC server and registration, as upstream
// runs one plugin per resource (NVIDIA/k8s-device-plugin internal/rm/nvml_manager.go
// NewNVMLResourceManagers, internal/plugin/server.go).
type Resource struct {
	Name     string
	Socket   string // file name in the device-plugin directory
	Replicas int    // time-slicing replicas per device; 0 when not replicated
	Devices  []Device
	// FailRequestsGreaterThanOne rejects container requests of more than one replica.
	FailRequestsGreaterThanOne bool

	root string
	byID map[string]*Device
}

// Inventory is the plugin's view of its resources, built from the hardware and the config.
type Inventory struct {
	Resources     []*Resource // sorted by name
	Primary       *Resource   // the resource named by resourceName, else the first
	Root          string      // GPU_SIM_ROOT on the host (and, by the same hostPath, in the plugin pod)
	DriverVersion string      // effective: config override or hardware.json
	CUDAVersion   string
	infos         []hw.DeviceInfo
}

// migProfileResource is the mixed-strategy resource of a MIG profile: "mig-" + the profile with
// "+" replaced by "." (upstream internal/rm/rm.go AddDefaultResourcesToConfig).
func migProfileResource(profile string) string {
	return config.ResourceNamePrefix + "/" + strings.ReplaceAll("mig-"+profile, "+", ".")
}

// computeOnlyProfile matches profiles of compute instances smaller than their GPU instance
// ("1c.3g.20gb"); upstream's mixed strategy adds resources only for profiles whose C == G
// (internal/rm/rm.go), so such a device matches no resource (internal/rm/device_map.go).
var computeOnlyProfile = regexp.MustCompile(`^[0-9]+c\.`)

// NewInventory builds the resources. Whole GPUs go to resourceName; with migStrategy single or
// mixed a GPU with MIG devices is replaced by its MIG devices, in resourceName (single) or in
// nvidia.com/mig-<profile> (mixed), as upstream's internal/rm/device_map.go
// buildGPUDeviceMap/buildMigDeviceMap. cfg.Faults.ExtraDevices phantoms join resourceName. Then
// each time-slicing resource is replaced by R replicas of every device (upstream
// device_map.go updateDeviceMapWithReplicas), renamed <name>.shared with renameByDefault.
func NewInventory(h *hw.Hardware, cfg config.Config, root string) (*Inventory, error) {
	inv := &Inventory{Root: root, DriverVersion: h.DriverVersion, CUDAVersion: h.CUDAVersion}
	if cfg.DriverVersion != "" {
		inv.DriverVersion = cfg.DriverVersion
	}
	strategy := cfg.Flags.MigStrategy
	base := map[string][]Device{}
	var order []string
	add := func(name string, d Device) {
		if _, ok := base[name]; !ok {
			order = append(order, name)
		}
		base[name] = append(base[name], d)
	}
	next, lastNUMA := 0, 0
	whole, migs := 0, 0
	profiles := map[string]bool{}
	for _, g := range h.GPUs {
		info := g
		info.MIGDevices = nil
		inv.infos = append(inv.infos, hw.DeviceInfo{GPU: info, DriverVersion: inv.DriverVersion, CUDAVersion: inv.CUDAVersion})
		for i := range g.MIGDevices {
			m := g.MIGDevices[i]
			inv.infos = append(inv.infos, hw.DeviceInfo{GPU: info, DriverVersion: inv.DriverVersion, CUDAVersion: inv.CUDAVersion, MIG: &m})
		}
		next = g.Index + 1
		lastNUMA = g.NUMANode
		if len(g.MIGDevices) == 0 || strategy == config.MigStrategyNone {
			whole++
			add(cfg.ResourceName, Device{ID: g.UUID, UUID: g.UUID, Index: g.Index, NUMA: g.NUMANode, GPU: info})
			continue
		}
		for i := range g.MIGDevices {
			m := g.MIGDevices[i]
			migs++
			profiles[m.Profile] = true
			name := cfg.ResourceName
			if strategy == config.MigStrategyMixed {
				if computeOnlyProfile.MatchString(m.Profile) {
					return nil, fmt.Errorf("MIG profile '%s' does not match any resource patterns", m.Profile)
				}
				name = migProfileResource(m.Profile)
			}
			add(name, Device{ID: m.UUID, UUID: m.UUID, Index: g.Index, NUMA: g.NUMANode, GPU: info, MIG: &m})
		}
	}
	if strategy == config.MigStrategySingle && migs > 0 {
		// upstream internal/rm/device_map.go buildDeviceMapFromConfigResources and
		// assertAllMigDevicesAreValid.
		if len(profiles) > 1 {
			return nil, fmt.Errorf("invalid MIG configuration: more than one MIG device type present on node")
		}
		if whole > 0 {
			return nil, fmt.Errorf("all devices on the node must be configured with the same migEnabled value")
		}
	}
	if lastNUMA < 0 {
		lastNUMA = 0
	}
	for n := 0; n < cfg.Faults.ExtraDevices; n++ {
		id := hw.PhantomUUID(n)
		add(cfg.ResourceName, Device{ID: id, UUID: id, Index: next + n, NUMA: lastNUMA, Phantom: true})
	}
	if len(order) == 0 {
		add(cfg.ResourceName, Device{})
		base[cfg.ResourceName] = nil
	}

	var failGT1 bool
	if cfg.Sharing.TimeSlicing != nil {
		failGT1 = cfg.Sharing.TimeSlicing.FailRequestsGreaterThanOne
	}
	for _, name := range order {
		devs := base[name]
		for i := range devs {
			d := &devs[i]
			if n, ok := cfg.Faults.NUMAOverride[d.Index]; ok {
				d.NUMA = n
			}
			if d.NUMA < 0 {
				d.NUMA = -1
			}
			d.Healthy = !cfg.Faults.Unhealthy(d.Index)
			d.Replica = -1
		}
		r := &Resource{Name: name, root: root}
		if rr, ok := cfg.Replicated(name); ok && len(devs) > 0 {
			r.Name, r.Replicas, r.FailRequestsGreaterThanOne = cfg.SharedName(name), rr.Replicas, failGT1
			for _, d := range devs {
				for i := 0; i < rr.Replicas; i++ {
					c := d
					c.ID, c.Replica = AnnotatedID(d.UUID, i), i
					r.Devices = append(r.Devices, c)
				}
			}
		} else {
			r.Devices = devs
		}
		r.Socket = cfg.SocketNameFor(r.Name)
		inv.Resources = append(inv.Resources, r)
	}
	sort.Slice(inv.Resources, func(i, j int) bool { return inv.Resources[i].Name < inv.Resources[j].Name })
	sockets := map[string]string{}
	for _, r := range inv.Resources {
		if other, ok := sockets[r.Socket]; ok {
			return nil, fmt.Errorf("resources %s and %s would share the socket %s", other, r.Name, r.Socket)
		}
		sockets[r.Socket] = r.Name
		r.byID = map[string]*Device{}
		for i := range r.Devices {
			r.byID[r.Devices[i].ID] = &r.Devices[i]
		}
	}
	for _, name := range []string{cfg.ResourceName, cfg.SharedName(cfg.ResourceName)} {
		if r := inv.Resource(name); r != nil && inv.Primary == nil {
			inv.Primary = r
		}
	}
	if inv.Primary == nil {
		inv.Primary = inv.Resources[0]
	}
	return inv, nil
}

// AnnotatedID is the ID of replica n of a device: "<uuid>::<n>" (upstream internal/rm/devices.go
// NewAnnotatedID).
func AnnotatedID(uuid string, replica int) string {
	return uuid + "::" + strconv.Itoa(replica)
}

// underlyingID strips a replica annotation: "<uuid>::<n>" -> "<uuid>" (upstream
// internal/rm/devices.go AnnotatedID.GetID).
func underlyingID(id string) string {
	u, _, _ := strings.Cut(id, "::")
	return u
}

// Resource returns the resource with this name, or nil.
func (inv *Inventory) Resource(name string) *Resource {
	for _, r := range inv.Resources {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// Lookup returns the device with this ID.
func (r *Resource) Lookup(id string) (*Device, bool) {
	d, ok := r.byID[id]
	return d, ok
}

// PluginDevices is the ListAndWatch payload.
func (r *Resource) PluginDevices() []*pluginapi.Device {
	out := make([]*pluginapi.Device, 0, len(r.Devices))
	for _, d := range r.Devices {
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

// DeviceInfos returns the per-device info files to write: one per real GPU and one per MIG
// device, whatever the strategy.
func (inv *Inventory) DeviceInfos() []hw.DeviceInfo {
	return inv.infos
}

// UnknownDeviceError reports device IDs that the plugin does not advertise.
type UnknownDeviceError struct{ IDs []string }

func (e *UnknownDeviceError) Error() string {
	return fmt.Sprintf("unknown device IDs: %s", strings.Join(e.IDs, ", "))
}

// RequestTooLargeError is upstream's rejection of more than one replica in one container request
// with failRequestsGreaterThanOne (internal/rm/rm.go ValidateRequest).
type RequestTooLargeError struct{ N int }

func (e *RequestTooLargeError) Error() string {
	return fmt.Sprintf("invalid request: maximum request size for shared resources is 1; found %d", e.N)
}

// ContainerAllocate builds the response for one container's device IDs. Replica IDs map back to
// their device, de-duplicated (upstream internal/plugin/server.go
// uniqueDeviceIDsFromAnnotatedDeviceIDs); NVIDIA_VISIBLE_DEVICES lists those UUIDs (MIG UUIDs for
// MIG devices). Each device gets its GPU's device node (the parent's for MIG, once per node) and
// its info file. With skipInjection only the environment entry is returned; phantom devices
// never get device nodes or mounts. injectOnly replaces the request by the first device of this
// resource whose physical GPU index is *injectOnly.
func (r *Resource) ContainerAllocate(ids []string, skipInjection bool, injectOnly *int) (*pluginapi.ContainerAllocateResponse, error) {
	var unknown []string
	var devs []*Device
	seen := map[string]bool{}
	annotated := false
	for _, id := range ids {
		d, ok := r.Lookup(id)
		if !ok {
			unknown = append(unknown, id)
			continue
		}
		annotated = annotated || d.Replica >= 0
		if !seen[d.UUID] {
			seen[d.UUID] = true
			devs = append(devs, d)
		}
	}
	if len(unknown) > 0 {
		return nil, &UnknownDeviceError{IDs: unknown}
	}
	if r.FailRequestsGreaterThanOne && annotated && len(ids) > 1 {
		return nil, &RequestTooLargeError{N: len(ids)}
	}
	visible := make([]string, 0, len(devs))
	for _, d := range devs {
		visible = append(visible, d.UUID)
	}
	if injectOnly != nil {
		devs = nil
		for i := range r.Devices {
			if r.Devices[i].Index == *injectOnly {
				devs = []*Device{&r.Devices[i]}
				visible = []string{r.Devices[i].UUID}
				break
			}
		}
	}
	resp := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{VisibleDevicesEnv: strings.Join(visible, ",")}}
	if skipInjection {
		return resp, nil
	}
	nodes := map[int]bool{}
	for _, d := range devs {
		if d.Phantom {
			continue
		}
		if !nodes[d.GPU.Minor] {
			nodes[d.GPU.Minor] = true
			resp.Devices = append(resp.Devices, &pluginapi.DeviceSpec{
				ContainerPath: hw.ContainerDevPath(d.GPU.Minor),
				HostPath:      hw.DevNodePath(r.root, d.GPU.Minor),
				Permissions:   "rw",
			})
		}
		resp.Mounts = append(resp.Mounts, &pluginapi.Mount{
			ContainerPath: hw.ContainerInfoPath(d.UUID),
			HostPath:      hw.InfoPath(r.root, d.UUID),
			ReadOnly:      true,
		})
	}
	return resp, nil
}

// Preferred picks size devices from available. For a replicated resource it follows upstream's
// default "distributed" policy (internal/rm/allocate.go greedyAlloc): must-include IDs first,
// then one at a time the replica whose device has the fewest replicas allocated (advertised but
// not available), ties going to the device picked least in this call, then to the lowest index
// and ID. Otherwise see preferredWhole.
func (r *Resource) Preferred(available, mustInclude []string, size int) []string {
	if r.Replicas == 0 {
		return r.preferredWhole(available, mustInclude, size)
	}
	out := append([]string(nil), mustInclude...)
	must := map[string]bool{}
	for _, id := range mustInclude {
		must[id] = true
	}
	avail := map[string]int{}
	var cands []string
	for _, id := range available {
		if !must[id] {
			must[id] = true // also drops duplicates
			cands = append(cands, id)
			avail[underlyingID(id)]++
		}
	}
	total := map[string]int{}
	for _, d := range r.Devices {
		total[d.UUID]++
	}
	index := func(id string) int {
		if d, ok := r.Lookup(id); ok {
			return d.Index
		}
		return int(^uint(0) >> 1)
	}
	picked := map[string]int{}
	for need := size - len(out); need > 0 && len(cands) > 0; need-- {
		sort.SliceStable(cands, func(i, j int) bool {
			a, b := underlyingID(cands[i]), underlyingID(cands[j])
			if x, y := total[a]-avail[a], total[b]-avail[b]; x != y {
				return x < y
			}
			if picked[a] != picked[b] {
				return picked[a] < picked[b]
			}
			if x, y := index(cands[i]), index(cands[j]); x != y {
				return x < y
			}
			return cands[i] < cands[j]
		})
		u := underlyingID(cands[0])
		picked[u]++
		avail[u]--
		out = append(out, cands[0])
		cands = cands[1:]
	}
	return out
}

// preferredWhole picks size devices from available: must-include devices first (by index), then the
// rest preferring one NUMA node (the first must-include device's node, else the lowest-indexed
// node that can hold all the remaining devices, else the node with the most candidates), each
// group by lowest index. IDs the plugin does not know sort last, by ID, on no NUMA node.
func (r *Resource) preferredWhole(available, mustInclude []string, size int) []string {
	type cand struct {
		id    string
		index int
		numa  int
	}
	mk := func(id string) cand {
		if d, ok := r.Lookup(id); ok {
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
