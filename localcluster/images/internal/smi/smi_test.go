package smi

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"gpuconform.local/images/internal/hw"
)

func twoGPUs() []hw.DeviceInfo {
	return []hw.DeviceInfo{
		{GPU: hw.GPU{Index: 2, UUID: "GPU-11111111-2222-3333-4444-555555555555", Name: "NVIDIA A100-SXM4-40GB", PCIBusID: "00000000:07:00.0", NUMANode: 0, MemoryTotalMiB: 40960, Minor: 2}, DriverVersion: "550.54.15", CUDAVersion: "12.4"},
		{GPU: hw.GPU{Index: 5, UUID: "GPU-66666666-7777-8888-9999-aaaaaaaaaaaa", Name: "NVIDIA A100-SXM4-40GB", PCIBusID: "00000000:0F:00.0", NUMANode: -1, MemoryTotalMiB: 40960, Minor: 5}, DriverVersion: "550.54.15", CUDAVersion: "12.4"},
	}
}

func env() Env {
	return Env{
		Devices: twoGPUs(),
		Now:     time.Date(2024, 7, 1, 2, 58, 34, 0, time.UTC),
		CPUList: func(n int) string {
			if n == 0 {
				return "0-15"
			}
			return "0-1"
		},
	}
}

func run(t *testing.T, e Env, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	code := Run(args, e, &out)
	return out.String(), code
}

const goldenTable = `Mon Jul  1 02:58:34 2024       
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA A100-SXM4-40GB          On  |   00000000:07:00.0 Off |                    0 |
| N/A   33C    P0             61W /  400W |       0MiB /  40960MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
|   1  NVIDIA A100-SXM4-40GB          On  |   00000000:0F:00.0 Off |                    0 |
| N/A   33C    P0             61W /  400W |       0MiB /  40960MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+
                                                                                         
+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|  No running processes found                                                             |
+-----------------------------------------------------------------------------------------+
`

func TestTableGolden(t *testing.T) {
	out, code := run(t, env())
	if code != 0 || out != goldenTable {
		t.Fatalf("code %d, output:\n%s\nwant:\n%s", code, out, goldenTable)
	}
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n")[1:] {
		if len(l) != 91 && len(l) != 89 {
			t.Errorf("line %d has width %d: %q", i+1, len(l), l)
		}
	}
}

func TestTableRowLayout(t *testing.T) {
	// Long names are cut to 26 characters like the real tool; other models get their own readings.
	devs := []Device{{Index: 0, DeviceInfo: hw.DeviceInfo{GPU: hw.GPU{Name: "NVIDIA RTX 6000 Ada Generation", PCIBusID: "00000000:01:00.0", MemoryTotalMiB: 49140}}}}
	out := Table(devs, "550.54.15", "12.4", time.Time{})
	want := "|   0  NVIDIA RTX 6000 Ada Gene...    On  |   00000000:01:00.0 Off |                    0 |\n" +
		"| N/A   33C    P0             45W /  300W |       0MiB /  49140MiB |      0%      Default |\n" +
		"|                                         |                        |                  N/A |\n"
	if !strings.Contains(out, want) {
		t.Fatalf("rows:\n%s\nwant:\n%s", out, want)
	}
	devs[0].Name = "Tesla T4"
	if out := Table(devs, "550.54.15", "12.4", time.Time{}); !strings.Contains(out, "| N/A   33C    P0             26W /   70W |") {
		t.Fatalf("T4 power row missing:\n%s", out)
	}
}

func TestList(t *testing.T) {
	out, code := run(t, env(), "-L")
	want := "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-11111111-2222-3333-4444-555555555555)\n" +
		"GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-66666666-7777-8888-9999-aaaaaaaaaaaa)\n"
	if code != 0 || out != want {
		t.Fatalf("code %d, got %q", code, out)
	}
	if out, _ := run(t, env(), "--list-gpus", "-i", "1"); out != strings.SplitAfter(want, "\n")[1] {
		t.Fatalf("-i 1: got %q", out)
	}
}

func TestQuery(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--query-gpu=index,uuid,pci.bus_id", "--format=csv"},
			"index, uuid, pci.bus_id\n0, GPU-11111111-2222-3333-4444-555555555555, 00000000:07:00.0\n1, GPU-66666666-7777-8888-9999-aaaaaaaaaaaa, 00000000:0F:00.0\n"},
		{[]string{"--query-gpu=index,uuid,name,pci.bus_id,memory.total,driver_version", "--format=csv"},
			"index, uuid, name, pci.bus_id, memory.total [MiB], driver_version\n" +
				"0, GPU-11111111-2222-3333-4444-555555555555, NVIDIA A100-SXM4-40GB, 00000000:07:00.0, 40960 MiB, 550.54.15\n" +
				"1, GPU-66666666-7777-8888-9999-aaaaaaaaaaaa, NVIDIA A100-SXM4-40GB, 00000000:0F:00.0, 40960 MiB, 550.54.15\n"},
		{[]string{"--query-gpu", "memory.total,count", "--format", "csv,noheader,nounits"}, "40960, 2\n40960, 2\n"},
		{[]string{"--query-gpu=memory.total", "--format=csv,nounits"}, "memory.total [MiB]\n40960\n40960\n"},
		{[]string{"--query-gpu=gpu_name,minor_number,count", "--format=csv,noheader", "-i", "1"}, "NVIDIA A100-SXM4-40GB, 5, 2\n"},
		{[]string{"--format=csv,noheader", "--query-gpu=serial"}, Serial("GPU-11111111-2222-3333-4444-555555555555") + "\n" + Serial("GPU-66666666-7777-8888-9999-aaaaaaaaaaaa") + "\n"},
	}
	for _, c := range cases {
		out, code := run(t, env(), c.args...)
		if code != 0 || out != c.want {
			t.Errorf("%v: code %d, got %q, want %q", c.args, code, out, c.want)
		}
	}
}

func TestSerial(t *testing.T) {
	s := Serial("GPU-11111111-2222-3333-4444-555555555555")
	if len(s) != 13 || s != Serial("GPU-11111111-2222-3333-4444-555555555555") || s == Serial("GPU-other") {
		t.Fatalf("serial %q: want 13 stable digits differing per uuid", s)
	}
}

func TestQueryErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--query-gpu=index,bogus", "--format=csv"}, "Field \"bogus\" is not a valid field to query.\n"},
		{[]string{"--query-gpu=", "--format=csv"}, "Field \"\" is not a valid field to query.\n"},
		{[]string{"--query-gpu=index", "--format=json"}, "\"json\" is not a valid format option.\n"},
		{[]string{"--query-gpu=index", "--format=noheader"}, "Only CSV output format is supported: use --format=csv.\n"},
		{[]string{"--query-gpu=index"}, "Option --format must be given with --query-gpu (e.g. --format=csv).\n"},
		{[]string{"--bogus"}, invalidCombination},
		{[]string{"topo"}, invalidCombination},
		{[]string{"-L", "--query-gpu=index", "--format=csv"}, invalidCombination},
	}
	for _, c := range cases {
		out, code := run(t, env(), c.args...)
		if code != ExitInvalidArgument || out != c.want {
			t.Errorf("%v: code %d, got %q, want %q", c.args, code, out, c.want)
		}
	}
	var uf *UnknownFieldError
	if _, err := ParseFields("index,temperature.gpu"); !errors.As(err, &uf) || uf.Field != "temperature.gpu" {
		t.Fatalf("ParseFields: %v", err)
	}
}

const goldenTopo = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n" +
	"GPU0\t X \tNV12\t0-15\t0\t\tN/A\n" +
	"GPU1\tNV12\t X \t0-1\tN/A\t\tN/A\n" +
	`
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
`

func TestTopoGolden(t *testing.T) {
	for _, args := range [][]string{{"topo", "-m"}, {"topo", "--matrix"}} {
		out, code := run(t, env(), args...)
		if code != 0 || out != goldenTopo {
			t.Fatalf("%v: code %d, got:\n%q\nwant:\n%q", args, code, out, goldenTopo)
		}
	}
}

func TestNoDevices(t *testing.T) {
	e := env()
	e.Devices = nil
	for _, args := range [][]string{nil, {"-L"}, {"--query-gpu=index", "--format=csv"}, {"topo", "-m"}} {
		out, code := run(t, e, args...)
		if code != 6 || out != "No devices were found\n" {
			t.Errorf("%v: code %d, got %q", args, code, out)
		}
	}
	if out, code := run(t, env(), "-L", "-i", "7"); code != 6 || out != NoDevices {
		t.Errorf("-i 7: code %d, got %q", code, out)
	}
	// Argument errors win over the missing devices, like the real tool.
	if _, code := run(t, e, "--query-gpu=nope", "--format=csv"); code != 2 {
		t.Errorf("unknown field without devices: code %d", code)
	}
}

func TestHelp(t *testing.T) {
	out, code := run(t, env(), "-h")
	if code != 0 || !strings.Contains(out, "--query-gpu") {
		t.Fatalf("code %d, got %q", code, out)
	}
}

func TestListMIG(t *testing.T) {
	gpu := func(idx int, uuid string) hw.GPU {
		return hw.GPU{Index: idx, UUID: uuid, Name: "NVIDIA A100-SXM4-40GB", PCIBusID: "00000000:07:00.0", MemoryTotalMiB: 40960, Minor: idx}
	}
	mig := func(g hw.GPU, profile, uuid string) hw.DeviceInfo {
		return hw.DeviceInfo{GPU: g, DriverVersion: "550.54.15", CUDAVersion: "12.4", MIG: &hw.MIGDevice{Profile: profile, UUID: uuid}}
	}
	g0, g3 := gpu(0, "GPU-513536b6-7d19-9063-b049-1e69664bb298"), gpu(3, "GPU-d8594bd4-0fc3-8595-e355-7c98138f3b95")
	e := env()
	e.Devices = []hw.DeviceInfo{
		mig(g0, "1g.5gb", "MIG-ce861fb0-a248-58ce-a9a8-f9adbc22a66a"),
		mig(g0, "1g.5gb", "MIG-a45882f0-9215-5733-a0c1-49286ab31cb5"),
		mig(g3, "3g.20gb", "MIG-f00d722c-f4e1-52c9-aa31-750441ae1bfe"),
	}
	out, code := run(t, e, "-L")
	want := "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-513536b6-7d19-9063-b049-1e69664bb298)\n" +
		"  MIG 1g.5gb      Device  0: (UUID: MIG-ce861fb0-a248-58ce-a9a8-f9adbc22a66a)\n" +
		"  MIG 1g.5gb      Device  1: (UUID: MIG-a45882f0-9215-5733-a0c1-49286ab31cb5)\n" +
		"GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-d8594bd4-0fc3-8595-e355-7c98138f3b95)\n" +
		"  MIG 3g.20gb     Device  0: (UUID: MIG-f00d722c-f4e1-52c9-aa31-750441ae1bfe)\n"
	if code != 0 || out != want {
		t.Fatalf("code %d:\n%s\nwant:\n%s", code, out, want)
	}
	// The column layout of a real A100 MIG listing (testing/unit/samples/smi_l_a100_mig_mixed.txt).
	if got := List([]Device{{Index: 0, DeviceInfo: hw.DeviceInfo{GPU: hw.GPU{Name: "NVIDIA A100-SXM4-80GB", UUID: "GPU-513536b6-7d19-9063-b049-1e69664bb298"}},
		MIGs: []hw.MIGDevice{{Profile: "1g.20gb", UUID: "MIG-ce861fb0-a248-58ce-a9a8-f9adbc22a66a"}}}}); got != "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-513536b6-7d19-9063-b049-1e69664bb298)\n"+
		"  MIG 1g.20gb     Device  0: (UUID: MIG-ce861fb0-a248-58ce-a9a8-f9adbc22a66a)\n" {
		t.Fatalf("sample layout:\n%s", got)
	}
	// --query-gpu and topo -m list the parent GPUs; the table shows MIG mode enabled.
	out, _ = run(t, e, "--query-gpu=index,uuid,count", "--format=csv,noheader")
	if out != "0, GPU-513536b6-7d19-9063-b049-1e69664bb298, 2\n1, GPU-d8594bd4-0fc3-8595-e355-7c98138f3b95, 2\n" {
		t.Fatalf("query:\n%s", out)
	}
	if out, _ = run(t, e, "topo", "-m"); !strings.HasPrefix(out, "\tGPU0\tGPU1\tCPU Affinity") {
		t.Fatalf("topo:\n%s", out)
	}
	if out, _ = run(t, e); strings.Count(out, "Enabled |") != 2 {
		t.Fatalf("table:\n%s", out)
	}
}

func TestListReplicaSeesOneGPU(t *testing.T) {
	// A time-sliced replica injects its GPU's info file once: the pod sees that one GPU.
	e := env()
	e.Devices = twoGPUs()[:1]
	if out, code := run(t, e, "-L"); code != 0 || out != "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-11111111-2222-3333-4444-555555555555)\n" {
		t.Fatalf("code %d: %q", code, out)
	}
}
