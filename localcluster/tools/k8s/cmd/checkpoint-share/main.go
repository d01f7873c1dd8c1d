// Command checkpoint-share rewrites the kubelet's device manager checkpoint
// (<kubelet root>/device-plugins/kubelet_internal_checkpoint) so that one container's device entry holds
// another container's device IDs: the record a stale or corrupted checkpoint leaves behind, which a
// restarted kubelet loads as its own assignment state (the "double-assigned" fault of the local test bed,
// localcluster/sharedfault.py). Run it only while the kubelet is stopped: a running kubelet rewrites the
// file from memory whenever devices or allocations change.
//
//	checkpoint-share [-resource R] [-from POD_UID[/CONTAINER]] [-to POD_UID[/CONTAINER]] [-ids-only]
//	                 [-forget-registered] [-dry-run] FILE
//	checkpoint-share -show [-resource R] FILE
//
// Without -from/-to it takes the first two entries of resource R in file order (the kubelet writes them in
// map order, so which two is arbitrary; pass UIDs to choose). The target ("to") entry gets a copy of the
// source's DeviceIDs and, unless -ids-only, its AllocResp too (the plugin's Allocate response: env, mounts,
// device nodes), so a restart of the target container would be created with the source's device.
//
// -forget-registered also drops R from the checkpoint's RegisteredDevices, as a checkpoint the kubelet wrote
// while no plugin for R was registered has it (GetCapacity deletes a resource whose endpoint stayed stopped past
// endpointStopGracePeriod, then writeCheckpoint; manager.go). Why it matters: a restarted kubelet that finds R
// registered in the checkpoint publishes capacity/allocatable 0 for R until the plugin re-registers (readCheckpoint
// creates an empty healthy set; GetCapacity reports it; pkg/kubelet/nodestatus/setters.go MachineInfo), and then
// re-admits the running pods against allocatable raised only to the number of DISTINCT allocated devices
// (sanitizeNodeAllocatable counts the set union, manager.go): with one device held twice that is one short, and
// the second holder fails admission (OutOf<resource>). Without R in RegisteredDevices the node keeps its last
// published capacity until the plugin re-registers, so both holders are re-admitted.
//
// Everything goes through the kubelet's own packages (k8s.io/kubernetes v1.34.4):
//   - pkg/kubelet/cm/devicemanager/checkpoint/checkpoint.go: the file format (Data, PodDevicesEntry,
//     DevicesPerNUMA), New, MarshalCheckpoint (recomputes the checksum) and VerifyChecksum;
//   - pkg/kubelet/checkpointmanager/checkpoint_manager.go: GetCheckpoint (read + checksum check, as the kubelet's
//     readCheckpoint/getCheckpoint in pkg/kubelet/cm/devicemanager/manager.go do) and CreateCheckpoint, whose
//     file store (pkg/kubelet/util/store/filestore.go writeFile) writes a temp file, fsyncs and renames: atomic.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"k8s.io/kubernetes/pkg/kubelet/checkpointmanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/checkpoint"
)

// selector picks one checkpoint entry of a resource: a pod UID and, optionally, a container name.
type selector struct{ pod, container string }

func parseSelector(s string) selector {
	pod, ctr, _ := strings.Cut(s, "/")
	return selector{pod: pod, container: ctr}
}

func (s selector) String() string {
	if s.container == "" {
		return s.pod
	}
	return s.pod + "/" + s.container
}

func (s selector) matches(e checkpoint.PodDevicesEntry) bool {
	return e.PodUID == s.pod && (s.container == "" || e.ContainerName == s.container)
}

// change describes one edit: entry `to` now holds the devices of entry `from`.
type change struct {
	Resource             string
	FromPod, FromCtr     string
	ToPod, ToCtr         string
	OldIDs, NewIDs       []string
	AllocRespCopied, Nop bool
	ForgotRegistered     bool
}

func (c change) String() string {
	if c.Nop {
		return fmt.Sprintf("%s: pod %s container %s already holds %v (as pod %s container %s): nothing to change",
			c.Resource, c.ToPod, c.ToCtr, c.NewIDs, c.FromPod, c.FromCtr)
	}
	resp := "its own Allocate response kept (-ids-only)"
	if c.AllocRespCopied {
		resp = "Allocate response copied too"
	}
	if c.ForgotRegistered {
		resp += "; " + c.Resource + " dropped from RegisteredDevices"
	}
	return fmt.Sprintf("%s: pod %s container %s: devices %v -> %v, now also held by pod %s container %s; %s",
		c.Resource, c.ToPod, c.ToCtr, c.OldIDs, c.NewIDs, c.FromPod, c.FromCtr, resp)
}

// find returns the index of the one entry of `resource` that sel matches (skipping index `not`).
func find(entries []checkpoint.PodDevicesEntry, resource string, sel selector, not int) (int, error) {
	idx := -1
	for i, e := range entries {
		if i == not || e.ResourceName != resource || !sel.matches(e) {
			continue
		}
		if idx >= 0 {
			return -1, fmt.Errorf("%s matches more than one %s entry (containers %q and %q): add /CONTAINER",
				sel, resource, entries[idx].ContainerName, e.ContainerName)
		}
		idx = i
	}
	if idx < 0 {
		return -1, fmt.Errorf("no %s entry for %s in the checkpoint", resource, sel)
	}
	return idx, nil
}

// pick resolves the source and target entries; an empty selector means "the first (other) entry of resource".
func pick(entries []checkpoint.PodDevicesEntry, resource string, from, to selector) (int, int, error) {
	first := func(not int) int {
		for i, e := range entries {
			if i != not && e.ResourceName == resource && len(e.DeviceIDs.Devices()) > 0 {
				return i
			}
		}
		return -1
	}
	var src, dst int
	var err error
	if from.pod == "" {
		src = first(-1)
		if src < 0 {
			return -1, -1, fmt.Errorf("the checkpoint has no %s entry with devices", resource)
		}
	} else if src, err = find(entries, resource, from, -1); err != nil {
		return -1, -1, err
	}
	if to.pod == "" {
		if dst = first(src); dst < 0 {
			return -1, -1, fmt.Errorf("the checkpoint has only one %s entry with devices: need two containers", resource)
		}
	} else if dst, err = find(entries, resource, to, src); err != nil {
		return -1, -1, err
	}
	return src, dst, nil
}

func sortedIDs(d checkpoint.DevicesPerNUMA) []string {
	ids := d.Devices().UnsortedList()
	sort.Strings(ids)
	return ids
}

func cloneDevices(d checkpoint.DevicesPerNUMA) checkpoint.DevicesPerNUMA {
	out := checkpoint.NewDevicesPerNUMA()
	for numa, ids := range d {
		out[numa] = slices.Clone(ids)
	}
	return out
}

// share makes entry `to` hold the device IDs (and, unless idsOnly, the Allocate response) of entry `from`.
// It edits entries in place.
func share(entries []checkpoint.PodDevicesEntry, resource string, from, to selector, idsOnly bool) (change, error) {
	src, dst, err := pick(entries, resource, from, to)
	if err != nil {
		return change{}, err
	}
	s, d := &entries[src], &entries[dst]
	ch := change{Resource: resource, FromPod: s.PodUID, FromCtr: s.ContainerName, ToPod: d.PodUID,
		ToCtr: d.ContainerName, OldIDs: sortedIDs(d.DeviceIDs), NewIDs: sortedIDs(s.DeviceIDs)}
	if len(ch.NewIDs) == 0 {
		return change{}, fmt.Errorf("pod %s container %s holds no %s device to share", s.PodUID, s.ContainerName, resource)
	}
	if slices.Equal(ch.OldIDs, ch.NewIDs) && (idsOnly || slices.Equal(s.AllocResp, d.AllocResp)) {
		ch.Nop = true
		return ch, nil
	}
	d.DeviceIDs = cloneDevices(s.DeviceIDs)
	if !idsOnly {
		d.AllocResp = slices.Clone(s.AllocResp)
		ch.AllocRespCopied = true
	}
	return ch, nil
}

// load reads and checksum-verifies a checkpoint file the way the kubelet does (manager.go getCheckpoint).
func load(path string) (checkpointmanager.CheckpointManager, *checkpoint.Data, error) {
	mgr, err := checkpointmanager.NewCheckpointManager(filepath.Dir(path))
	if err != nil {
		return nil, nil, err
	}
	cp := checkpoint.New(make([]checkpoint.PodDevicesEntry, 0), make(map[string][]string))
	if err := mgr.GetCheckpoint(filepath.Base(path), cp); err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return mgr, cp.(*checkpoint.Data), nil
}

// rewrite applies share to the checkpoint at path and writes it back (checksum recomputed, atomic rename),
// then reads it back through the checksum check. It returns a one-line report.
func rewrite(path, resource string, from, to selector, idsOnly, forgetRegistered, dryRun bool) (string, error) {
	mgr, cp, err := load(path)
	if err != nil {
		return "", err
	}
	entries, registered := cp.GetData()
	ch, err := share(entries, resource, from, to, idsOnly)
	if err != nil {
		return "", err
	}
	if _, ok := registered[resource]; ok && forgetRegistered {
		delete(registered, resource)
		ch.Nop, ch.ForgotRegistered = false, true
	}
	if ch.Nop {
		return ch.String(), nil
	}
	if dryRun {
		return ch.String() + " (dry run: file unchanged)", nil
	}
	out := checkpoint.New(entries, registered).(*checkpoint.Data)
	if err := mgr.CreateCheckpoint(filepath.Base(path), out); err != nil { // MarshalCheckpoint sets out.Checksum
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	if _, _, err := load(path); err != nil {
		return "", fmt.Errorf("the rewritten checkpoint does not verify: %w", err)
	}
	return fmt.Sprintf("%s; checksum %d -> %d", ch, uint64(cp.Checksum), uint64(out.Checksum)), nil
}

// show lists the entries (of resource, or all when empty) and every device ID held by more than one container.
func show(path, resource string) (string, error) {
	_, cp, err := load(path)
	if err != nil {
		return "", err
	}
	entries, _ := cp.GetData()
	var b strings.Builder
	fmt.Fprintf(&b, "%s: checksum %d verifies\n", path, uint64(cp.Checksum))
	holders := map[string][]string{}
	for _, e := range entries {
		if resource != "" && e.ResourceName != resource {
			continue
		}
		ids := sortedIDs(e.DeviceIDs)
		fmt.Fprintf(&b, "%s pod %s container %s: %v\n", e.ResourceName, e.PodUID, e.ContainerName, ids)
		for _, id := range ids {
			k := e.ResourceName + " " + id
			holders[k] = append(holders[k], e.PodUID+"/"+e.ContainerName)
		}
	}
	keys := make([]string, 0, len(holders))
	for k := range holders {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if len(holders[k]) > 1 {
			fmt.Fprintf(&b, "SHARED %s: %s\n", k, strings.Join(holders[k], ", "))
		}
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

func main() {
	resource := flag.String("resource", "nvidia.com/gpu", "the extended resource whose entries are edited")
	from := flag.String("from", "", "POD_UID[/CONTAINER] whose devices are copied (default: the first entry of -resource)")
	to := flag.String("to", "", "POD_UID[/CONTAINER] that gets them (default: the next entry of -resource)")
	idsOnly := flag.Bool("ids-only", false, "copy only the device IDs, keep the target's own Allocate response")
	forget := flag.Bool("forget-registered", false, "also drop -resource from RegisteredDevices, so a restarted "+
		"kubelet keeps the node's last capacity until the plugin re-registers (see the package comment)")
	dryRun := flag.Bool("dry-run", false, "report the change without writing the file")
	showOnly := flag.Bool("show", false, "list the entries and the device IDs held twice; change nothing")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [flags] KUBELET_ROOT/device-plugins/kubelet_internal_checkpoint\n",
			filepath.Base(os.Args[0]))
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	var msg string
	var err error
	if *showOnly {
		msg, err = show(flag.Arg(0), *resource)
	} else {
		msg, err = rewrite(flag.Arg(0), *resource, parseSelector(*from), parseSelector(*to), *idsOnly, *forget, *dryRun)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "checkpoint-share:", err)
		os.Exit(1)
	}
	fmt.Println(msg)
}
