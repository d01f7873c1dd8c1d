// Package plugin implements a device-plugin v1beta1 gRPC server over the simulated GPU hardware:
// it serves its socket in the kubelet's device-plugin directory, registers with kubelet.sock,
// re-registers after a kubelet restart, and follows changes to hardware.json.
package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"gpuconform.local/images/internal/config"
	"gpuconform.local/images/internal/hw"
)

// KubeletSocketName is the kubelet's registration socket inside the device-plugin directory.
const KubeletSocketName = "kubelet.sock"

// Options configure a Plugin.
type Options struct {
	Config config.Config
	// Root is GPU_SIM_ROOT: hardware.json, dev/ and run/ live below it (same path on host and in pod).
	Root string
	// Log receives one line per step; nil means the standard logger.
	Log *log.Logger
	// HardwarePoll is how often hardware.json is re-read (default 2s).
	HardwarePoll time.Duration
	// KubeletPoll is how often kubelet.sock and the plugin socket are checked (default 1s).
	KubeletPoll time.Duration
}

// Plugin is the device plugin. Create it with New and run it with Run.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	cfg    config.Config
	root   string
	log    *log.Logger
	hwPoll time.Duration
	kPoll  time.Duration

	mu      sync.Mutex
	inv     *Inventory
	hwRaw   []byte
	changed chan struct{} // closed (and replaced) whenever inv changes

	server     *grpc.Server
	socketInfo fs.FileInfo
}

// New loads the hardware and builds the inventory; it fails when hardware.json is unusable.
func New(o Options) (*Plugin, error) {
	p := &Plugin{cfg: o.Config, root: o.Root, log: o.Log, hwPoll: o.HardwarePoll, kPoll: o.KubeletPoll, changed: make(chan struct{})}
	if p.log == nil {
		p.log = log.Default()
	}
	if p.hwPoll <= 0 {
		p.hwPoll = 2 * time.Second
	}
	if p.kPoll <= 0 {
		p.kPoll = time.Second
	}
	raw, err := os.ReadFile(hw.HardwarePath(p.root))
	if err != nil {
		return nil, fmt.Errorf("read hardware: %w", err)
	}
	h, err := hw.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", hw.HardwarePath(p.root), err)
	}
	p.hwRaw = raw
	p.inv = NewInventory(h, p.cfg, p.root)
	p.logInventory("loaded")
	return p, nil
}

// SocketPath is <devicePluginPath>/<socketName>.
func (p *Plugin) SocketPath() string {
	return filepath.Join(p.cfg.DevicePluginPath, p.cfg.SocketName)
}

// KubeletSocketPath is <devicePluginPath>/kubelet.sock.
func (p *Plugin) KubeletSocketPath() string {
	return filepath.Join(p.cfg.DevicePluginPath, KubeletSocketName)
}

func (p *Plugin) inventory() *Inventory {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inv
}

func (p *Plugin) logInventory(what string) {
	inv := p.inv
	for _, d := range inv.Devices {
		topo := "none"
		if d.NUMA >= 0 {
			topo = fmt.Sprintf("numa=%d", d.NUMA)
		}
		kind := fmt.Sprintf("minor=%d", d.GPU.Minor)
		if d.Phantom {
			kind = "phantom"
		}
		health := pluginapi.Healthy
		if !d.Healthy {
			health = pluginapi.Unhealthy
		}
		p.log.Printf("%s device index=%d id=%s %s topology=%s %s", what, d.Index, d.ID, kind, topo, health)
	}
	p.log.Printf("%s %d devices (driver %s, CUDA %s)", what, len(inv.Devices), inv.DriverVersion, inv.CUDAVersion)
}

// writeDeviceInfos writes <root>/run/<uuid>.json for every real device (atomically, by rename).
func (p *Plugin) writeDeviceInfos(inv *Inventory) error {
	dir := filepath.Join(p.root, "run")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, info := range inv.DeviceInfos() {
		path := hw.InfoPath(p.root, info.UUID)
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, hw.MarshalDeviceInfo(info), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
		p.log.Printf("wrote device info %s", path)
	}
	return nil
}

// Run serves and registers until ctx is done, then stops the server, removes the socket and
// returns nil. It returns an error only when the plugin cannot serve at all.
func (p *Plugin) Run(ctx context.Context) error {
	if err := p.writeDeviceInfos(p.inventory()); err != nil {
		return fmt.Errorf("write device info files: %w", err)
	}
	if err := p.startServer(); err != nil {
		return err
	}
	defer p.stopServer(true)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); p.watchHardware(ctx) }()
	defer wg.Wait()

	f := p.cfg.Faults
	if f.RegisterDelaySeconds > 0 {
		p.log.Printf("registerDelaySeconds fault: waiting %ds before registering", f.RegisterDelaySeconds)
	}
	registerAfter := time.Now().Add(time.Duration(f.RegisterDelaySeconds) * time.Second)
	if f.NeverRegister {
		p.log.Printf("neverRegister fault: serving %s but never registering with the kubelet", p.SocketPath())
	}

	var kubelet fs.FileInfo // kubelet.sock as of the last successful registration
	registered := false     // registered at least once
	restarted := false      // our server was just restarted (already logged)
	waitingLogged := false
	tick := time.NewTicker(p.kPoll)
	defer tick.Stop()
	for {
		// Our socket gone or replaced (a restarting kubelet wipes the directory): serve anew.
		if cur, err := os.Stat(p.SocketPath()); err != nil || !os.SameFile(cur, p.socketInfo) {
			p.log.Printf("plugin socket %s disappeared or was replaced; restarting the gRPC server", p.SocketPath())
			p.stopServer(false)
			if err := p.startServer(); err != nil {
				return err
			}
			kubelet, restarted = nil, true // the kubelet lost our stream: register again
		}
		if !f.NeverRegister && !time.Now().Before(registerAfter) {
			cur, err := os.Stat(p.KubeletSocketPath())
			switch {
			case err != nil:
				if !waitingLogged {
					p.log.Printf("waiting for %s: %v", p.KubeletSocketPath(), err)
					waitingLogged = true
				}
				kubelet = nil
			case kubelet == nil || !os.SameFile(cur, kubelet) || !cur.ModTime().Equal(kubelet.ModTime()):
				waitingLogged = false
				if registered && !restarted {
					p.log.Printf("%s was re-created (kubelet restart); registering again", p.KubeletSocketPath())
				}
				restarted = false
				if err := p.register(ctx); err != nil {
					p.log.Printf("register failed (retrying in %s): %v", p.kPoll, err)
				} else {
					kubelet, registered = cur, true
				}
			}
		}
		select {
		case <-ctx.Done():
			p.log.Printf("shutting down: %v", context.Cause(ctx))
			return nil
		case <-tick.C:
		}
	}
}

func (p *Plugin) startServer() error {
	path := p.SocketPath()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.Remove(path); err == nil {
		p.log.Printf("removed stale socket %s", path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", path, err)
	}
	// The socket file is removed explicitly; closing must not unlink a file someone else put there.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	info, err := os.Stat(path)
	if err != nil {
		l.Close()
		return err
	}
	s := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(s, p)
	p.server, p.socketInfo = s, info
	go func() {
		if err := s.Serve(l); err != nil {
			p.log.Printf("gRPC server on %s stopped: %v", path, err)
		}
	}()
	p.log.Printf("serving DevicePlugin v1beta1 on %s", path)
	return nil
}

// stopServer stops the gRPC server; with removeSocket it also removes our socket file (if it is
// still ours).
func (p *Plugin) stopServer(removeSocket bool) {
	if p.server == nil {
		return
	}
	p.server.Stop()
	p.server = nil
	if removeSocket {
		if cur, err := os.Stat(p.SocketPath()); err == nil && os.SameFile(cur, p.socketInfo) {
			if err := os.Remove(p.SocketPath()); err == nil {
				p.log.Printf("removed socket %s", p.SocketPath())
			}
		}
	}
	p.log.Printf("gRPC server stopped")
}

func (p *Plugin) register(ctx context.Context) error {
	kpath := p.KubeletSocketPath()
	conn, err := grpc.NewClient("unix://"+kpath, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	req := &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     p.cfg.SocketName,
		ResourceName: p.cfg.ResourceName,
		Options:      &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true},
	}
	p.log.Printf("registering with %s: version=%s endpoint=%s resource=%s", kpath, req.Version, req.Endpoint, req.ResourceName)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := pluginapi.NewRegistrationClient(conn).Register(rctx, req); err != nil {
		return err
	}
	p.log.Printf("registered %s with the kubelet", p.cfg.ResourceName)
	return nil
}

// watchHardware re-reads hardware.json every HardwarePoll and, when its content changed and
// parses, rebuilds the inventory, rewrites the device info files and wakes ListAndWatch streams.
func (p *Plugin) watchHardware(ctx context.Context) {
	tick := time.NewTicker(p.hwPoll)
	defer tick.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		raw, err := os.ReadFile(hw.HardwarePath(p.root))
		if err == nil && bytes.Equal(raw, p.hwRaw) {
			lastErr = ""
			continue
		}
		var h *hw.Hardware
		if err == nil {
			h, err = hw.Parse(raw)
		}
		if err != nil {
			if err.Error() != lastErr {
				p.log.Printf("hardware.json unusable, keeping the current devices: %v", err)
				lastErr = err.Error()
			}
			continue
		}
		lastErr = ""
		inv := NewInventory(h, p.cfg, p.root)
		if err := p.writeDeviceInfos(inv); err != nil {
			p.log.Printf("write device info files: %v", err)
		}
		p.mu.Lock()
		p.hwRaw, p.inv = raw, inv
		close(p.changed)
		p.changed = make(chan struct{})
		p.logInventory("hardware changed:")
		p.mu.Unlock()
	}
}

// GetDevicePluginOptions implements DevicePluginServer.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

// ListAndWatch implements DevicePluginServer: the full list now and after every change.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	p.log.Printf("ListAndWatch: stream opened")
	for {
		p.mu.Lock()
		devs, changed := p.inv.PluginDevices(), p.changed
		p.mu.Unlock()
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			p.log.Printf("ListAndWatch: send failed: %v", err)
			return err
		}
		p.log.Printf("ListAndWatch: sent %d devices", len(devs))
		select {
		case <-changed:
		case <-s.Context().Done():
			p.log.Printf("ListAndWatch: stream closed")
			return nil
		}
	}
}

// GetPreferredAllocation implements DevicePluginServer.
func (p *Plugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	inv := p.inventory()
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.ContainerRequests {
		ids := inv.Preferred(cr.AvailableDeviceIDs, cr.MustIncludeDeviceIDs, int(cr.AllocationSize))
		p.log.Printf("GetPreferredAllocation: available=%v mustInclude=%v size=%d -> %v", cr.AvailableDeviceIDs, cr.MustIncludeDeviceIDs, cr.AllocationSize, ids)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// Allocate implements DevicePluginServer.
func (p *Plugin) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	f := p.cfg.Faults
	for _, cr := range req.ContainerRequests {
		p.log.Printf("Allocate: request for %v", cr.DevicesIds)
	}
	if f.AllocateDelayMs > 0 {
		p.log.Printf("allocateDelayMs fault: sleeping %dms", f.AllocateDelayMs)
		select {
		case <-time.After(time.Duration(f.AllocateDelayMs) * time.Millisecond):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	if f.AllocateError != "" {
		p.log.Printf("allocateError fault: failing Allocate with %q", f.AllocateError)
		return nil, status.Error(codes.Internal, f.AllocateError)
	}
	inv := p.inventory()
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.ContainerRequests {
		r, err := inv.ContainerAllocate(cr.DevicesIds, f.SkipInjection, f.InjectOnlyIndex)
		if err != nil {
			p.log.Printf("Allocate: %v", err)
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		p.log.Printf("Allocate: %s=%s, %d device nodes, %d mounts", VisibleDevicesEnv, r.Envs[VisibleDevicesEnv], len(r.Devices), len(r.Mounts))
		resp.ContainerResponses = append(resp.ContainerResponses, r)
	}
	return resp, nil
}

// PreStartContainer implements DevicePluginServer (not requested in the options; a no-op).
func (p *Plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
