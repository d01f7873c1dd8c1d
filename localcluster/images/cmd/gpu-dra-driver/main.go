// Command gpu-dra-driver is a DRA kubelet plugin for the simulated GPUs of a test-bed node, built on
// k8s.io/dynamic-resource-allocation's kubeletplugin helper as upstream's test driver is
// (kubernetes test/e2e/dra/test-driver/app/kubeletplugin.go): it publishes one pool named after the node under
// the driver gpu.nvidia.com from $GPU_SIM_ROOT/hardware.json, laid out as NVIDIA's driver lays it out for the API
// server's version (internal/dra Slices: G+1 slices on Kubernetes >= 1.35), registers with the kubelet, and on
// NodePrepareResources writes a CDI spec per claim that injects the allocated GPUs (internal/dra). Faults for
// the bed's DRA rows come from $GPU_SIM_DRA_FAULTS. SIGTERM/SIGINT stop it (exit 0). With $POD_UID (the
// DaemonSet's downward API metadata.uid) it upgrades seamlessly: kubeletplugin.RollingUpdate, so that the old and
// the new pod of a rollout overlap and the node's slices stay (internal/dra/upgrade.go); its knob
// no-seamless-upgrade turns that off and deletes the node's slices on SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"gpuconform.local/images/internal/dra"
	"gpuconform.local/images/internal/hw"
)

var logger = log.New(os.Stderr, "gpu-dra-driver: ", log.LUTC|log.Ldate|log.Ltime|log.Lmicroseconds|log.Lmsgprefix)

type driver struct {
	root   string
	cdiDir string
	faults dra.Faults
	hw     *hw.Hardware
	cancel context.CancelFunc
	pool   string
	mu     sync.Mutex
}

func main() {
	registrar := flag.String("registrar-dir", "/var/lib/kubelet/plugins_registry", "the kubelet's plugin registration directory (host path, mounted at the same path)")
	pluginDir := flag.String("plugin-dir", "/var/lib/kubelet/plugins/"+dra.DriverName, "this driver's socket directory (host path, mounted at the same path)")
	cdiDir := flag.String("cdi-dir", "/var/run/cdi", "where CDI specs are written for the container runtime")
	terminationLog := flag.String("termination-log", "/dev/termination-log", "file the fatal message is written to")
	readyFile := flag.String("ready-file", "/gpu-dra-driver.registered", "file written (in the container) once the kubelet registered this instance")
	probe := flag.Bool("probe", false, "exit 0 if -ready-file exists, else 1 (the DaemonSet's startupProbe)")
	flag.Parse()
	if *probe {
		if _, err := os.Stat(*readyFile); err != nil {
			fmt.Fprintf(os.Stderr, "not registered with the kubelet yet: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	fatal := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		logger.Printf("FATAL: %s", msg)
		_ = os.WriteFile(*terminationLog, []byte(msg+"\n"), 0o644)
		os.Exit(1)
	}

	node := os.Getenv("NODE_NAME")
	if node == "" {
		fatal("NODE_NAME is not set (the DaemonSet passes spec.nodeName)")
	}
	faults, err := dra.ParseFaults(os.Getenv("GPU_SIM_DRA_FAULTS"))
	if err != nil {
		fatal("%v", err)
	}
	root := hw.Root()
	h, err := hw.Load(hw.HardwarePath(root))
	if err != nil {
		fatal("%v", err)
	}
	logger.Printf("node %q, GPU_SIM_ROOT=%s, %d GPU(s), faults %+v", node, root, len(h.GPUs), faults)
	cfg, err := rest.InClusterConfig()
	if err != nil {
		fatal("in-cluster config: %v", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fatal("client: %v", err)
	}
	dra.SysfsRoot = filepath.Join(root, "sys")
	split, err := splitSlices(client)
	if err != nil {
		fatal("%v", err)
	}
	for _, d := range []string{*pluginDir, *cdiDir, filepath.Join(root, "run")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			fatal("%v", err)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	d := &driver{root: root, cdiDir: *cdiDir, faults: faults, hw: h, cancel: cancel, pool: node}
	opts := []kubeletplugin.Option{
		kubeletplugin.DriverName(dra.DriverName), kubeletplugin.NodeName(node), kubeletplugin.KubeClient(client),
		kubeletplugin.RegistrarDirectoryPath(*registrar), kubeletplugin.PluginDataDirectoryPath(*pluginDir),
		kubeletplugin.RegistrationService(!faults.NoRegister), kubeletplugin.HealthService(true)}
	// Seamless upgrades (internal/dra/upgrade.go): this pod's own sockets, so that the next pod of a rollout can
	// run beside it; none under no-seamless-upgrade, or where the DaemonSet passes no POD_UID.
	uid := dra.RollingUpdateUID(faults, os.Getenv("POD_UID"))
	if uid != "" {
		opts = append(opts, kubeletplugin.RollingUpdate(uid))
	}
	switch {
	case uid != "":
		logger.Printf("seamless upgrade: on (rolling update as pod %s)", uid)
	case faults.NoSeamlessUpgrade:
		logger.Printf("seamless upgrade: off (%s-reg.sock; on SIGTERM the node's slices are deleted)", dra.DriverName)
	default:
		logger.Printf("seamless upgrade: off (%s-reg.sock): no POD_UID", dra.DriverName)
	}
	helper, err := kubeletplugin.Start(ctx, d, opts...)
	if err != nil {
		fatal("start kubelet plugin: %v", err)
	}
	defer helper.Stop()
	go markRegistered(ctx, helper, *readyFile, faults.NoRegister)
	devices, nslices := dra.Devices(h, faults), 1
	if faults.PoolIncomplete {
		// Not through the helper (it keeps its pools complete): one slice that says its pool has two.
		slice, err := client.ResourceV1().ResourceSlices().Create(ctx, dra.IncompleteSlice(node, devices), metav1.CreateOptions{})
		if err != nil {
			fatal("publish the incomplete pool: %v", err)
		}
		defer func() {
			_ = client.ResourceV1().ResourceSlices().Delete(context.Background(), slice.Name, metav1.DeleteOptions{})
		}()
	} else {
		slices := dra.Slices(h, faults, split)
		nslices = len(slices)
		if err := helper.PublishResources(ctx, resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
			node: {Slices: slices}}}); err != nil {
			fatal("publish resources: %v", err)
		}
		if faults.TaintOnSignal {
			go taintOnSignal(ctx, helper, h, faults, split, node)
		}
	}
	logger.Printf("published pool %q with %d device(s) and %d counter set(s) in %d slice(s) (complete: %v); "+
		"registration with the kubelet %v", node, len(devices), len(dra.CounterSets(h, faults)), nslices,
		!faults.PoolIncomplete, !faults.NoRegister)
	<-ctx.Done()
	if faults.NoSeamlessUpgrade {
		// A driver without seamless upgrades cleans up after itself: the helper stopped first (its ResourceSlice
		// controller would publish them again), then the node's slices deleted, within the pod's grace period.
		helper.Stop()
		cleanup, done := context.WithTimeout(context.Background(), 3*time.Second)
		names, err := dra.Unpublish(cleanup, client, node)
		done()
		logger.Printf("no-seamless-upgrade: deleted the node's ResourceSlices %v (error: %v)", names, err)
	}
	logger.Printf("exiting")
}

// splitSlices reports whether the API server is Kubernetes 1.35 or later, where NVIDIA's driver publishes its
// shared counters in a slice of their own (kubernetes-sigs/dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/driver.go
// shouldUseSplitResourceSlices).
func splitSlices(client kubernetes.Interface) (bool, error) {
	info, err := client.Discovery().ServerVersion()
	if err != nil {
		return false, fmt.Errorf("API server version: %w", err)
	}
	v, err := version.ParseGeneric(info.GitVersion)
	if err != nil {
		return false, fmt.Errorf("API server version %q: %w", info.GitVersion, err)
	}
	logger.Printf("API server %s: %s", info.GitVersion, map[bool]string{true: "a counters-only slice and one slice per GPU",
		false: "one slice per GPU with its counters"}[v.AtLeast(version.MajorMinor(1, 35))])
	return v.AtLeast(version.MajorMinor(1, 35)), nil
}

// PrepareResourceClaims writes each claim's CDI spec and returns its CDI device IDs.
func (d *driver) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, c := range claims {
		out[c.UID] = d.prepare(c)
	}
	return out, nil
}

func (d *driver) prepare(c *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	ref := c.Namespace + "/" + c.Name
	if d.faults.PrepareFails {
		logger.Printf("prepare %s: prepare-fails fault", ref)
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("simulated failure preparing %s: failed to initialize NVML: Unknown Error", ref)}
	}
	if c.Status.Allocation == nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s is not allocated", ref)}
	}
	gpus := map[string]dra.Prepared{}
	var devices []kubeletplugin.Device
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver != dra.DriverName {
			continue
		}
		g, ok := dra.Lookup(d.hw, r.Device, d.faults)
		if !ok {
			return kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s: device %q is not on this node", ref, r.Device)}
		}
		if err := d.writeInfo(g); err != nil {
			return kubeletplugin.PrepareResult{Err: err}
		}
		gpus[r.Device] = g
		devices = append(devices, kubeletplugin.Device{Requests: []string{r.Request}, PoolName: r.Pool,
			DeviceName: r.Device, CDIDeviceIDs: []string{dra.CDIKind + "=" + dra.CDIName(string(c.UID), r.Device)}})
	}
	path := dra.CDIFile(d.cdiDir, string(c.UID))
	if err := writeAtomically(path, dra.CDISpec(d.root, string(c.UID), gpus)); err != nil {
		return kubeletplugin.PrepareResult{Err: err}
	}
	logger.Printf("prepared %s (%s): %d device(s), CDI spec %s", ref, c.UID, len(devices), path)
	return kubeletplugin.PrepareResult{Devices: devices}
}

func (d *driver) writeInfo(p dra.Prepared) error {
	g := p.GPU
	g.MIGDevices = nil
	info := hw.DeviceInfo{GPU: g, DriverVersion: d.hw.DriverVersion, CUDAVersion: d.hw.CUDAVersion, MIG: p.MIG}
	return writeAtomically(hw.InfoPath(d.root, p.UUID()), hw.MarshalDeviceInfo(info))
}

// UnprepareResourceClaims removes each claim's CDI spec (idempotent: a missing file is no error).
func (d *driver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]error, len(claims))
	for _, c := range claims {
		err := os.Remove(dra.CDIFile(d.cdiDir, string(c.UID)))
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		out[c.UID] = err
		logger.Printf("unprepared %s (%s)", c.String(), c.UID)
	}
	return out, nil
}

// HandleError logs background errors (publishing slices) and stops on those that retrying cannot fix.
func (d *driver) HandleError(_ context.Context, err error, msg string) {
	logger.Printf("%s: %v", msg, err)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.cancel()
	}
}

// WatchHealthStatus reports every device's health to the kubelet (dra.HealthReport), again every third of the
// report's timeout so that none decays to Unknown, until the kubelet's stream ends.
func (d *driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case reports <- dra.HealthReport(d.hw, d.faults, d.pool, time.Now()):
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(dra.HealthTimeout / 3):
		}
	}
}

func writeAtomically(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// taintOnSignal publishes the pool again with the last GPU tainted out of service once SIGUSR1 arrives: a GPU that
// fails while the driver runs (NVIDIA's driver taints on the XID it sees: device_health.go healthEventToTaint).
func taintOnSignal(ctx context.Context, helper *kubeletplugin.Helper, h *hw.Hardware, f dra.Faults, split bool, node string) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	defer signal.Stop(sig)
	select {
	case <-ctx.Done():
		return
	case <-sig:
	}
	f.TaintUnhealthy = true
	if err := helper.PublishResources(ctx, resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		node: {Slices: dra.Slices(h, f, split)}}}); err != nil {
		logger.Printf("publish the tainted pool: %v", err)
		return
	}
	logger.Printf("SIGUSR1: the last GPU failed: published it tainted %s=%s:%s", dra.UnhealthyTaint.Key,
		dra.UnhealthyTaint.Value, dra.UnhealthyTaint.Effect)
}

// markRegistered writes readyFile once the kubelet reports this instance registered (its NotifyRegistrationStatus),
// and logs when: the DaemonSet's startupProbe (-probe) holds the pod un-Ready until then, so that in a rollout with
// surge the old pod is deleted only after the kubelet took the new one (the helper offers no notification, so it
// looks every 100 ms). Under no-register the file is written at once: that fault's pod looks healthy.
func markRegistered(ctx context.Context, helper *kubeletplugin.Helper, readyFile string, noRegister bool) {
	for !noRegister {
		if st := helper.RegistrationStatus(); st != nil && st.PluginRegistered {
			logger.Printf("the kubelet registered this instance")
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := os.WriteFile(readyFile, []byte("registered\n"), 0o644); err != nil {
		logger.Printf("write %s: %v", readyFile, err)
	}
}
