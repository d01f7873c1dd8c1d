package plugin

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"gpuconform.local/images/internal/config"
	"gpuconform.local/images/internal/hw"
)

// fakeKubelet serves the Registration service on <dir>/kubelet.sock and reports each request.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	srv  *grpc.Server
	reqs chan *pluginapi.RegisterRequest
}

func startKubelet(t *testing.T, dir string) *fakeKubelet {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(dir, KubeletSocketName))
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{srv: grpc.NewServer(), reqs: make(chan *pluginapi.RegisterRequest, 8)}
	pluginapi.RegisterRegistrationServer(k.srv, k)
	go k.srv.Serve(l)
	t.Cleanup(k.srv.Stop)
	return k
}

func (k *fakeKubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.reqs <- r
	return &pluginapi.Empty{}, nil
}

func (k *fakeKubelet) waitRegister(t *testing.T, within time.Duration) *pluginapi.RegisterRequest {
	t.Helper()
	select {
	case r := <-k.reqs:
		return r
	case <-time.After(within):
		t.Fatalf("no Register within %s", within)
		return nil
	}
}

type testLog struct {
	mu sync.Mutex
	t  *testing.T
	b  strings.Builder
}

func (w *testLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	return len(p), nil
}

func (w *testLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func hardwareJSON(n int) string {
	var gpus []string
	for i := 0; i < n; i++ {
		gpus = append(gpus, fmt.Sprintf(`{"index": %d, "uuid": "GPU-%08d-0000-0000-0000-000000000000", "name": "NVIDIA A100-SXM4-40GB", "pciBusId": "00000000:%02X:00.0", "numaNode": %d, "memoryTotalMiB": 40960, "minor": %d}`, i, i, 7+i, i%2, i))
	}
	return `{"driverVersion": "550.54.15", "cudaVersion": "12.4", "gpus": [` + strings.Join(gpus, ",") + "]}"
}

func uuid(i int) string { return fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", i) }

type harness struct {
	root, dp string
	kubelet  *fakeKubelet
	plugin   *Plugin
	cancel   context.CancelFunc
	done     chan error
	log      *testLog
}

func start(t *testing.T, cfg config.Config, gpus int) *harness {
	t.Helper()
	base := t.TempDir()
	h := &harness{root: filepath.Join(base, "sim"), dp: filepath.Join(base, "dp"), log: &testLog{t: t}}
	for _, d := range []string{h.root, h.dp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(hw.HardwarePath(h.root), []byte(hardwareJSON(gpus)), 0o644); err != nil {
		t.Fatal(err)
	}
	h.kubelet = startKubelet(t, h.dp)
	cfg.DevicePluginPath = h.dp
	p, err := New(Options{Config: cfg, Root: h.root, Log: log.New(h.log, "", log.Lmicroseconds), HardwarePoll: 50 * time.Millisecond, KubeletPoll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h.plugin = p
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan error, 1)
	go func() { h.done <- p.Run(ctx) }()
	t.Cleanup(func() {
		h.stop(t)
		if t.Failed() {
			t.Logf("plugin log:\n%s", h.log)
		}
	})
	return h
}

func (h *harness) stop(t *testing.T) {
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("Run did not return after cancel")
	}
}

func (h *harness) client(t *testing.T) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+h.plugin.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ids(devs []*pluginapi.Device) []string {
	var out []string
	for _, d := range devs {
		out = append(out, d.ID)
	}
	return out
}

func TestEndToEnd(t *testing.T) {
	h := start(t, config.Default(), 2)
	r := h.kubelet.waitRegister(t, 5*time.Second)
	if r.Version != "v1beta1" || r.Endpoint != "nvidia-gpu.sock" || r.ResourceName != "nvidia.com/gpu" || !r.GetOptions().GetGetPreferredAllocationAvailable() || r.GetOptions().GetPreStartRequired() {
		t.Fatalf("register request %v", r)
	}
	c := h.client(t)
	ctx := ctxT(t)
	if o, err := c.GetDevicePluginOptions(ctx, &pluginapi.Empty{}); err != nil || !o.GetPreferredAllocationAvailable {
		t.Fatalf("options %v, %v", o, err)
	}
	stream, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(first.Devices); strings.Join(got, " ") != uuid(0)+" "+uuid(1) {
		t.Fatalf("devices %v", got)
	}
	if first.Devices[1].Topology.Nodes[0].ID != 1 || first.Devices[0].Health != "Healthy" {
		t.Fatalf("device %v", first.Devices[1])
	}

	// Device info files for injection.
	data, err := os.ReadFile(filepath.Join(h.root, "run", uuid(1)+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if info, err := hw.ParseDeviceInfo(data); err != nil || info.Minor != 1 || info.DriverVersion != "550.54.15" || info.CUDAVersion != "12.4" {
		t.Fatalf("info %+v, %v", info, err)
	}

	ar, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{uuid(1)}}}})
	if err != nil {
		t.Fatal(err)
	}
	cr := ar.ContainerResponses[0]
	if cr.Envs["NVIDIA_VISIBLE_DEVICES"] != uuid(1) || cr.Devices[0].HostPath != filepath.Join(h.root, "dev/nvidia1") || cr.Mounts[0].HostPath != filepath.Join(h.root, "run", uuid(1)+".json") {
		t.Fatalf("allocate %v", cr)
	}
	_, err = c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"GPU-bogus"}}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "GPU-bogus") {
		t.Fatalf("unknown device: %v", err)
	}
	pr, err := c.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: []string{uuid(1), uuid(0)}, AllocationSize: 1},
	}})
	if err != nil || strings.Join(pr.ContainerResponses[0].DeviceIDs, ",") != uuid(0) {
		t.Fatalf("preferred %v, %v", pr, err)
	}
	if _, err := c.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{}); err != nil {
		t.Fatal(err)
	}

	// hardware.json changes: the stream gets the new list.
	if err := os.WriteFile(hw.HardwarePath(h.root), []byte(hardwareJSON(3)), 0o644); err != nil {
		t.Fatal(err)
	}
	next, err := stream.Recv()
	if err != nil || len(next.Devices) != 3 {
		t.Fatalf("after hardware change: %v, %v", next, err)
	}
	if _, err := os.Stat(filepath.Join(h.root, "run", uuid(2)+".json")); err != nil {
		t.Fatal(err)
	}

	// Kubelet restart: it wipes the directory and serves a new kubelet.sock.
	h.waitLog(t, "registered nvidia.com/gpu", 1)
	h.kubelet.srv.Stop()
	entries, _ := os.ReadDir(h.dp)
	for _, e := range entries {
		os.Remove(filepath.Join(h.dp, e.Name()))
	}
	h.kubelet = startKubelet(t, h.dp)
	r = h.kubelet.waitRegister(t, 5*time.Second)
	if r.Endpoint != "nvidia-gpu.sock" {
		t.Fatalf("re-register %v", r)
	}
	h.waitLog(t, "registered nvidia.com/gpu", 2)
	c2 := h.client(t)
	s2, err := c2.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := s2.Recv(); err != nil || len(l.Devices) != 3 {
		t.Fatalf("after kubelet restart: %v, %v", l, err)
	}

	// Shutdown removes the socket.
	h.stop(t)
	if _, err := os.Stat(h.plugin.SocketPath()); !os.IsNotExist(err) {
		t.Fatalf("socket after stop: %v", err)
	}
	if log := h.log.String(); !strings.Contains(log, "registered nvidia.com/gpu") || !strings.Contains(log, "disappeared or was replaced") {
		t.Fatalf("log lacks steps:\n%s", log)
	}
}

func TestFaults(t *testing.T) {
	cfg := config.Default()
	cfg.ResourceName = "example.com/simgpu"
	cfg.SocketName = "sim.sock"
	cfg.DriverVersion = "470.82.01"
	cfg.Faults.AllocateError = "simulated allocation failure"
	cfg.Faults.AllocateDelayMs = 200
	cfg.Faults.ExtraDevices = 1
	cfg.Faults.UnhealthyDevices = []int{0}
	cfg.Faults.NUMAOverride = map[int]int{1: -1}
	h := start(t, cfg, 2)
	r := h.kubelet.waitRegister(t, 5*time.Second)
	if r.Endpoint != "sim.sock" || r.ResourceName != "example.com/simgpu" {
		t.Fatalf("register %v", r)
	}
	c := h.client(t)
	ctx := ctxT(t)
	stream, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := stream.Recv()
	if err != nil || len(l.Devices) != 3 || l.Devices[0].Health != "Unhealthy" || l.Devices[1].Topology != nil || l.Devices[2].ID != hw.PhantomUUID(0) {
		t.Fatalf("devices %v, %v", l, err)
	}
	began := time.Now()
	_, err = c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{uuid(0)}}}})
	if status.Code(err) != codes.Internal || status.Convert(err).Message() != "simulated allocation failure" {
		t.Fatalf("allocate error %v", err)
	}
	if d := time.Since(began); d < 200*time.Millisecond {
		t.Fatalf("allocate returned after %s, before the delay", d)
	}
	data, err := os.ReadFile(filepath.Join(h.root, "run", uuid(0)+".json"))
	if err != nil || !strings.Contains(string(data), `"driverVersion": "470.82.01"`) {
		t.Fatalf("driver override not injected: %s, %v", data, err)
	}
}

func TestNeverRegister(t *testing.T) {
	cfg := config.Default()
	cfg.Faults.NeverRegister = true
	h := start(t, cfg, 1)
	select {
	case r := <-h.kubelet.reqs:
		t.Fatalf("registered despite neverRegister: %v", r)
	case <-time.After(400 * time.Millisecond):
	}
	// The socket is served all the same.
	o, err := h.client(t).GetDevicePluginOptions(ctxT(t), &pluginapi.Empty{})
	if err != nil || !o.GetPreferredAllocationAvailable {
		t.Fatalf("options %v, %v", o, err)
	}
}

func TestRegisterDelay(t *testing.T) {
	cfg := config.Default()
	cfg.Faults.RegisterDelaySeconds = 1
	began := time.Now()
	h := start(t, cfg, 1)
	h.kubelet.waitRegister(t, 5*time.Second)
	if d := time.Since(began); d < time.Second {
		t.Fatalf("registered after %s, before the 1s delay", d)
	}
}

// simDirs makes a sim root holding hardwareJSON and an empty device-plugin dir under a temp dir.
func simDirs(t *testing.T, hardwareJSON string) (root, dp string) {
	base := t.TempDir()
	root, dp = filepath.Join(base, "sim"), filepath.Join(base, "dp")
	os.MkdirAll(root, 0o755)
	os.MkdirAll(dp, 0o755)
	os.WriteFile(hw.HardwarePath(root), []byte(hardwareJSON), 0o644)
	return root, dp
}

func TestStaleSocketAndLateKubelet(t *testing.T) {
	root, dp := simDirs(t, hardwareJSON(1))
	os.WriteFile(filepath.Join(dp, "nvidia-gpu.sock"), nil, 0o644) // stale file in the way
	cfg := config.Default()
	cfg.DevicePluginPath = dp
	lw := &testLog{t: t}
	p, err := New(Options{Config: cfg, Root: root, Log: log.New(lw, "", 0), HardwarePoll: 50 * time.Millisecond, KubeletPoll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	time.Sleep(200 * time.Millisecond) // no kubelet yet: the plugin waits
	k := startKubelet(t, dp)
	k.waitRegister(t, 5*time.Second)
	if !strings.Contains(lw.String(), "removed stale socket") || !strings.Contains(lw.String(), "waiting for") {
		t.Fatalf("log:\n%s", lw)
	}
}

func TestNewFailsWithoutHardware(t *testing.T) {
	if _, err := New(Options{Config: config.Default(), Root: t.TempDir()}); err == nil {
		t.Fatal("no error without hardware.json")
	}
}

// waitLog waits until the plugin log contains s at least n times.
func (h *harness) waitLog(t *testing.T, s string, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if strings.Count(h.log.String(), s) >= n {
			return
		}
	}
	t.Fatalf("log never had %d× %q", n, s)
}

func TestKubeletSocketRecreated(t *testing.T) {
	h := start(t, config.Default(), 1)
	h.kubelet.waitRegister(t, 5*time.Second)
	h.waitLog(t, "registered nvidia.com/gpu", 1)
	// A new kubelet.sock while our socket survives: register again, keep serving.
	h.kubelet.srv.Stop()
	os.Remove(filepath.Join(h.dp, KubeletSocketName))
	time.Sleep(100 * time.Millisecond)
	h.kubelet = startKubelet(t, h.dp)
	h.kubelet.waitRegister(t, 5*time.Second)
	h.waitLog(t, "registered nvidia.com/gpu", 2)
	if !strings.Contains(h.log.String(), "re-created (kubelet restart)") {
		t.Fatalf("log:\n%s", h.log)
	}
}

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

func clientFor(t *testing.T, socket string) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

func mustStream(t *testing.T, c pluginapi.DevicePluginClient) (*pluginapi.ListAndWatchResponse, error) {
	t.Helper()
	s, err := c.ListAndWatch(ctxT(t), &pluginapi.Empty{})
	if err != nil {
		return nil, err
	}
	return s.Recv()
}
