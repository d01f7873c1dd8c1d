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

// Plugin is the device plugin: one gRPC server, socket and registration per resource, as upstream
// (NVIDIA/k8s-device-plugin internal/plugin/server.go). Create it with New and run it with Run.
type Plugin struct {
	cfg    config.Config
	root   string
	log    *log.Logger
	hwPoll time.Duration
	kPoll  time.Duration

	mu      sync.Mutex
	inv     *Inventory
	hwRaw   []byte
	changed chan struct{} // closed (and replaced) whenever inv changes

	servers []*server // one per resource ever seen, in start order
}

// server serves one resource's socket and registers it with the kubelet.
type server struct {
	pluginapi.UnimplementedDevicePluginServer

	p          *Plugin
	resource   string
	socket     string // file name in the device-plugin directory
	grpc       *grpc.Server
	socketInfo fs.FileInfo

	kubelet    fs.FileInfo // kubelet.sock as of the last successful registration
	registered bool        // registered at least once
	restarted  bool        // the server was just restarted (already logged)
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
	if p.inv, err = NewInventory(h, p.cfg, p.root); err != nil {
		return nil, fmt.Errorf("%s: %w", hw.HardwarePath(p.root), err)
	}
	p.logInventory("loaded")
	return p, nil
}

// SocketPath is <devicePluginPath>/<socket> of the primary resource (resourceName, or its
// .shared rename, else the first by name).
func (p *Plugin) SocketPath() string {
	return filepath.Join(p.cfg.DevicePluginPath, p.inventory().Primary.Socket)
}

// SocketPaths maps each resource of the current inventory to its socket path.
func (p *Plugin) SocketPaths() map[string]string {
	out := map[string]string{}
	for _, r := range p.inventory().Resources {
		out[r.Name] = filepath.Join(p.cfg.DevicePluginPath, r.Socket)
	}
	return out
}

func (s *server) path() string { return filepath.Join(s.p.cfg.DevicePluginPath, s.socket) }

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
	n := 0
	for _, r := range inv.Resources {
		for _, d := range r.Devices {
			topo := "none"
			if d.NUMA >= 0 {
				topo = fmt.Sprintf("numa=%d", d.NUMA)
			}
			kind := fmt.Sprintf("minor=%d", d.GPU.Minor)
			if d.Phantom {
				kind = "phantom"
			} else if d.MIG != nil {
				kind += fmt.Sprintf(" mig=%s gi=%d ci=%d", d.MIG.Profile, d.MIG.GI, d.MIG.CI)
			}
			health := pluginapi.Healthy
			if !d.Healthy {
				health = pluginapi.Unhealthy
			}
			p.log.Printf("%s device resource=%s index=%d id=%s %s topology=%s %s", what, r.Name, d.Index, d.ID, kind, topo, health)
		}
		p.log.Printf("%s resource %s: %d devices on socket %s", what, r.Name, len(r.Devices), r.Socket)
		n += len(r.Devices)
	}
	p.log.Printf("%s %d devices (driver %s, CUDA %s)", what, n, inv.DriverVersion, inv.CUDAVersion)
}

// writeDeviceInfos writes <root>/run/<uuid>.json for every real device (atomically, by rename).
func (p *Plugin) writeDeviceInfos(inv *Inventory) error {
	dir := filepath.Join(p.root, "run")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, info := range inv.DeviceInfos() {
		path := hw.InfoPath(p.root, info.DeviceUUID())
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

// Run serves and registers every resource until ctx is done, then stops the servers, removes
// the sockets and returns nil. It returns an error only when the plugin cannot serve at all.
func (p *Plugin) Run(ctx context.Context) error {
	if err := p.writeDeviceInfos(p.inventory()); err != nil {
		return fmt.Errorf("write device info files: %w", err)
	}
	if err := p.startServers(); err != nil {
		return err
	}
	defer func() {
		for _, s := range p.servers {
			s.stop(true)
		}
	}()

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
		for _, s := range p.servers {
			p.log.Printf("neverRegister fault: serving %s but never registering with the kubelet", s.path())
		}
	}

	waitingLogged := false
	tick := time.NewTicker(p.kPoll)
	defer tick.Stop()
	for {
		// Resources that appeared with a hardware change get their own server.
		if err := p.startServers(); err != nil {
			return err
		}
		for _, s := range p.servers {
			// Our socket gone or replaced (a restarting kubelet wipes the directory): serve anew.
			if cur, err := os.Stat(s.path()); err != nil || !os.SameFile(cur, s.socketInfo) {
				p.log.Printf("plugin socket %s disappeared or was replaced; restarting the gRPC server", s.path())
				s.stop(false)
				if err := s.start(); err != nil {
					return err
				}
				s.kubelet, s.restarted = nil, true // the kubelet lost our stream: register again
			}
		}
		if !f.NeverRegister && !time.Now().Before(registerAfter) {
			cur, err := os.Stat(p.KubeletSocketPath())
			if err != nil {
				if !waitingLogged {
					p.log.Printf("waiting for %s: %v", p.KubeletSocketPath(), err)
					waitingLogged = true
				}
				for _, s := range p.servers {
					s.kubelet = nil
				}
			} else {
				waitingLogged = false
				for _, s := range p.servers {
					if s.kubelet != nil && os.SameFile(cur, s.kubelet) && cur.ModTime().Equal(s.kubelet.ModTime()) {
						continue
					}
					if s.registered && !s.restarted {
						p.log.Printf("%s was re-created (kubelet restart); registering %s again", p.KubeletSocketPath(), s.resource)
					}
					s.restarted = false
					if err := s.register(ctx); err != nil {
						p.log.Printf("register %s failed (retrying in %s): %v", s.resource, p.kPoll, err)
					} else {
						s.kubelet, s.registered = cur, true
					}
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

// startServers starts a server for every resource of the inventory that has none yet.
func (p *Plugin) startServers() error {
	have := map[string]bool{}
	for _, s := range p.servers {
		have[s.resource] = true
	}
	for _, r := range p.inventory().Resources {
		if have[r.Name] {
			continue
		}
		s := &server{p: p, resource: r.Name, socket: r.Socket}
		if err := s.start(); err != nil {
			return err
		}
		p.servers = append(p.servers, s)
	}
	return nil
}

func (s *server) start() error {
	p, path := s.p, s.path()
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
	g := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(g, s)
	s.grpc, s.socketInfo = g, info
	go func() {
		if err := g.Serve(l); err != nil {
			p.log.Printf("gRPC server on %s stopped: %v", path, err)
		}
	}()
	p.log.Printf("serving DevicePlugin v1beta1 for %s on %s", s.resource, path)
	return nil
}

// stop stops the gRPC server; with removeSocket it also removes the socket file (if it is
// still ours).
func (s *server) stop(removeSocket bool) {
	if s.grpc == nil {
		return
	}
	s.grpc.Stop()
	s.grpc = nil
	if removeSocket {
		if cur, err := os.Stat(s.path()); err == nil && os.SameFile(cur, s.socketInfo) {
			if err := os.Remove(s.path()); err == nil {
				s.p.log.Printf("removed socket %s", s.path())
			}
		}
	}
	s.p.log.Printf("gRPC server for %s stopped", s.resource)
}

// register sends Register(version, endpoint = socket file name, resource) to kubelet.sock, as
// upstream's internal/plugin/server.go Register (Endpoint: path.Base(socket)).
func (s *server) register(ctx context.Context) error {
	p := s.p
	kpath := p.KubeletSocketPath()
	conn, err := grpc.NewClient("unix://"+kpath, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	req := &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     s.socket,
		ResourceName: s.resource,
		Options:      &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true},
	}
	p.log.Printf("registering with %s: version=%s endpoint=%s resource=%s", kpath, req.Version, req.Endpoint, req.ResourceName)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := pluginapi.NewRegistrationClient(conn).Register(rctx, req); err != nil {
		return err
	}
	p.log.Printf("registered %s with the kubelet", s.resource)
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
		var inv *Inventory
		if err == nil {
			inv, err = NewInventory(h, p.cfg, p.root)
		}
		if err != nil {
			if err.Error() != lastErr {
				p.log.Printf("hardware.json unusable, keeping the current devices: %v", err)
				lastErr = err.Error()
			}
			continue
		}
		lastErr = ""
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

// resourceOf returns the current inventory's entry for this server's resource, or an empty
// resource when a hardware change removed it (it then lists no devices).
func (s *server) resourceOf() *Resource {
	if r := s.p.inventory().Resource(s.resource); r != nil {
		return r
	}
	return &Resource{Name: s.resource, Socket: s.socket}
}

// GetDevicePluginOptions implements DevicePluginServer.
func (s *server) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

// ListAndWatch implements DevicePluginServer: the full list now and after every change.
func (s *server) ListAndWatch(_ *pluginapi.Empty, st grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	p := s.p
	p.log.Printf("ListAndWatch %s: stream opened", s.resource)
	for {
		p.mu.Lock()
		changed := p.changed
		p.mu.Unlock()
		devs := s.resourceOf().PluginDevices()
		if err := st.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			p.log.Printf("ListAndWatch %s: send failed: %v", s.resource, err)
			return err
		}
		p.log.Printf("ListAndWatch %s: sent %d devices", s.resource, len(devs))
		select {
		case <-changed:
		case <-st.Context().Done():
			p.log.Printf("ListAndWatch %s: stream closed", s.resource)
			return nil
		}
	}
}

// GetPreferredAllocation implements DevicePluginServer.
func (s *server) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	r := s.resourceOf()
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, cr := range req.ContainerRequests {
		ids := r.Preferred(cr.AvailableDeviceIDs, cr.MustIncludeDeviceIDs, int(cr.AllocationSize))
		s.p.log.Printf("GetPreferredAllocation %s: available=%v mustInclude=%v size=%d -> %v", s.resource, cr.AvailableDeviceIDs, cr.MustIncludeDeviceIDs, cr.AllocationSize, ids)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// Allocate implements DevicePluginServer. The fault knobs apply to every resource.
func (s *server) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	p := s.p
	f := p.cfg.Faults
	for _, cr := range req.ContainerRequests {
		p.log.Printf("Allocate %s: request for %v", s.resource, cr.DevicesIds)
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
	r := s.resourceOf()
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.ContainerRequests {
		cresp, err := r.ContainerAllocate(cr.DevicesIds, f.SkipInjection, f.InjectOnlyIndex)
		var tooLarge *RequestTooLargeError
		if errors.As(err, &tooLarge) {
			// upstream internal/plugin/server.go Allocate: a plain error (gRPC Unknown).
			p.log.Printf("Allocate %s: %v", s.resource, err)
			return nil, fmt.Errorf("invalid allocation request for %q: %w", s.resource, err)
		}
		if err != nil {
			p.log.Printf("Allocate %s: %v", s.resource, err)
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		p.log.Printf("Allocate %s: %s=%s, %d device nodes, %d mounts", s.resource, VisibleDevicesEnv, cresp.Envs[VisibleDevicesEnv], len(cresp.Devices), len(cresp.Mounts))
		resp.ContainerResponses = append(resp.ContainerResponses, cresp)
	}
	return resp, nil
}

// PreStartContainer implements DevicePluginServer (not requested in the options; a no-op).
func (s *server) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
