// Package smi formats nvidia-smi output (the default table, -L, --query-gpu CSV and topo -m) for
// the simulated devices visible in a container, in the layout of nvidia-smi 550.
package smi

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"gpuconform.local/images/internal/hw"
)

// Device is one visible GPU as nvidia-smi shows it: Index is the renumbered index (0..n-1);
// MIGs are its visible MIG devices (only those injected, as with NVIDIA_VISIBLE_DEVICES=MIG-...).
type Device struct {
	Index int
	hw.DeviceInfo
	MIGs []hw.MIGDevice
}

// Renumber turns visible device infos (sorted by hardware index, a GPU's MIG devices after it)
// into GPUs numbered 0..n-1, as the real tool numbers the GPUs injected into a container. A MIG
// device's info contributes its parent GPU (once) and is listed among that GPU's MIGs.
func Renumber(infos []hw.DeviceInfo) []Device {
	var out []Device
	at := map[string]int{}
	for _, d := range infos {
		i, ok := at[d.UUID]
		if !ok {
			i = len(out)
			at[d.UUID] = i
			parent := d
			parent.MIG = nil
			out = append(out, Device{Index: i, DeviceInfo: parent})
		}
		if d.MIG != nil {
			out[i].MIGs = append(out[i].MIGs, *d.MIG)
		}
	}
	return out
}

// NoDevices is what nvidia-smi prints (on stdout, exit status 6) when it finds no GPU.
const NoDevices = "No devices were found\n"

// ExitNoDevices is nvidia-smi's exit status when no GPU is found.
const ExitNoDevices = 6

// ExitInvalidArgument is nvidia-smi's exit status for an invalid argument or field.
const ExitInvalidArgument = 2

// List formats `nvidia-smi -L`: a GPU line, then one line per visible MIG device of that GPU,
// numbered from 0 within the GPU, with the profile left-aligned in 11 columns as the real tool
// ("  MIG 1g.5gb      Device  0: (UUID: MIG-...)").
func List(devs []Device) string {
	var b strings.Builder
	for _, d := range devs {
		fmt.Fprintf(&b, "GPU %d: %s (UUID: %s)\n", d.Index, d.Name, d.UUID)
		for j, m := range d.MIGs {
			fmt.Fprintf(&b, "  MIG %-11s Device %2d: (UUID: %s)\n", m.Profile, j, m.UUID)
		}
	}
	return b.String()
}

const (
	boxRule    = "+-----------------------------------------------------------------------------------------+\n"
	gpuRule    = "+-----------------------------------------+------------------------+----------------------+\n"
	gpuHeadSep = "|-----------------------------------------+------------------------+----------------------+\n"
	gpuHead    = "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n" +
		"| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n" +
		"|                                         |                        |               MIG M. |\n" +
		"|=========================================+========================+======================|\n"
	procs = "| Processes:                                                                              |\n" +
		"|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |\n" +
		"|        ID   ID                                                               Usage      |\n" +
		"|=========================================================================================|\n" +
		"|  No running processes found                                                             |\n"
)

// product holds the fixed, plausible idle readings shown for a GPU model.
type product struct {
	persistence, ecc, mig, fan string
	powerUsage, powerCap       int
	temp                       int
}

func productOf(name string) product {
	p := product{persistence: "On", ecc: "0", mig: "N/A", fan: "N/A", powerUsage: 45, powerCap: 300, temp: 33}
	switch {
	case strings.Contains(name, "GeForce"):
		p = product{persistence: "Off", ecc: "N/A", mig: "N/A", fan: "0%", powerUsage: 20, powerCap: 350, temp: 35}
	case strings.Contains(name, "A100") && strings.Contains(name, "PCIE"):
		p.powerUsage, p.powerCap, p.mig = 36, 250, "Disabled"
	case strings.Contains(name, "A100"):
		p.powerUsage, p.powerCap, p.mig = 61, 400, "Disabled"
	case strings.Contains(name, "A30"):
		p.powerUsage, p.powerCap, p.mig = 33, 165, "Disabled"
	case strings.Contains(name, "H100") || strings.Contains(name, "H200") || strings.Contains(name, "H800"):
		p.powerUsage, p.powerCap, p.mig = 72, 700, "Disabled"
	case strings.Contains(name, "L4") && !strings.Contains(name, "L40"):
		p.powerUsage, p.powerCap = 16, 72
	case strings.Contains(name, "T4"):
		p.powerUsage, p.powerCap = 26, 70
	}
	return p
}

// truncName shortens long names the way nvidia-smi does: "NVIDIA RTX 6000 Ada Gene...".
func truncName(name string) string {
	if len(name) > 27 {
		return name[:24] + "..."
	}
	return name
}

// Table formats the default `nvidia-smi` output. now is printed in the first line.
func Table(devs []Device, driver, cuda string, now time.Time) string {
	var b strings.Builder
	b.WriteString(now.Format("Mon Jan _2 15:04:05 2006") + "       \n")
	b.WriteString(boxRule)
	fmt.Fprintf(&b, "| NVIDIA-SMI %-22s Driver Version: %-14s CUDA Version: %-8s |\n", driver, driver, cuda)
	b.WriteString(gpuHeadSep)
	b.WriteString(gpuHead)
	for _, d := range devs {
		p := productOf(d.Name)
		if len(d.MIGs) > 0 {
			p.mig = "Enabled"
		}
		fmt.Fprintf(&b, "|%4d  %-30s %-3s |%19s %3s |%21s |\n", d.Index, truncName(d.Name), p.persistence, d.PCIBusID, "Off", p.ecc)
		fmt.Fprintf(&b, "|%4s  %4s    %-2s %15s / %5s |%11s / %9s |%8s %12s |\n",
			p.fan, strconv.Itoa(p.temp)+"C", "P0", strconv.Itoa(p.powerUsage)+"W", strconv.Itoa(p.powerCap)+"W",
			"0MiB", strconv.Itoa(d.MemoryTotalMiB)+"MiB", "0%", "Default")
		fmt.Fprintf(&b, "|%41s|%24s|%21s |\n", "", "", p.mig)
		b.WriteString(gpuRule)
	}
	b.WriteString(strings.Repeat(" ", 89) + "\n")
	b.WriteString(boxRule)
	b.WriteString(procs)
	b.WriteString(boxRule)
	return b.String()
}

// Format is a parsed --format value.
type Format struct {
	NoHeader bool
	NoUnits  bool
}

// ParseFormat parses --format: "csv" plus optional "noheader" and "nounits", comma-separated.
func ParseFormat(s string) (Format, error) {
	var f Format
	csv := false
	for _, opt := range strings.Split(s, ",") {
		switch strings.TrimSpace(opt) {
		case "csv":
			csv = true
		case "noheader":
			f.NoHeader = true
		case "nounits":
			f.NoUnits = true
		default:
			return Format{}, fmt.Errorf("%q is not a valid format option.", strings.TrimSpace(opt))
		}
	}
	if !csv {
		return Format{}, fmt.Errorf("Only CSV output format is supported: use --format=csv.")
	}
	return f, nil
}

// Field is one --query-gpu property.
type Field struct {
	Name  string // canonical name, as printed in the header (before the unit)
	Unit  string // e.g. "MiB"; empty when unitless
	value func(d Device, total int) string
}

var fields = map[string]Field{
	"index":          {Name: "index", value: func(d Device, _ int) string { return strconv.Itoa(d.Index) }},
	"uuid":           {Name: "uuid", value: func(d Device, _ int) string { return d.UUID }},
	"name":           {Name: "name", value: func(d Device, _ int) string { return d.Name }},
	"pci.bus_id":     {Name: "pci.bus_id", value: func(d Device, _ int) string { return d.PCIBusID }},
	"memory.total":   {Name: "memory.total", Unit: "MiB", value: func(d Device, _ int) string { return strconv.Itoa(d.MemoryTotalMiB) }},
	"driver_version": {Name: "driver_version", value: func(d Device, _ int) string { return d.DriverVersion }},
	"count":          {Name: "count", value: func(_ Device, total int) string { return strconv.Itoa(total) }},
	"serial":         {Name: "serial", value: func(d Device, _ int) string { return Serial(d.UUID) }},
	"minor_number":   {Name: "minor_number", value: func(d Device, _ int) string { return strconv.Itoa(d.Minor) }},
}

var aliases = map[string]string{
	"gpu_uuid":   "uuid",
	"gpu_name":   "name",
	"gpu_bus_id": "pci.bus_id",
	"gpu_serial": "serial",
}

// UnknownFieldError is returned by ParseFields for a property nvidia-smi does not know.
type UnknownFieldError struct{ Field string }

func (e *UnknownFieldError) Error() string {
	return fmt.Sprintf("Field %q is not a valid field to query.", e.Field)
}

// ParseFields parses a --query-gpu list such as "index,uuid,memory.total".
func ParseFields(s string) ([]Field, error) {
	var out []Field
	for _, raw := range strings.Split(s, ",") {
		name := strings.TrimSpace(raw)
		key := strings.ToLower(name)
		if a, ok := aliases[key]; ok {
			key = a
		}
		f, ok := fields[key]
		if !ok {
			return nil, &UnknownFieldError{Field: name}
		}
		out = append(out, f)
	}
	return out, nil
}

// Query formats `--query-gpu` output: an optional header, then one line per device, values
// separated by ", ". total is the number of GPUs present (the "count" field), selected or not.
func Query(devs []Device, total int, fs []Field, f Format) string {
	var b strings.Builder
	if !f.NoHeader {
		hs := make([]string, len(fs))
		for i, fl := range fs {
			hs[i] = fl.Name
			if fl.Unit != "" { // the header names the unit even with nounits, like the real tool
				hs[i] += " [" + fl.Unit + "]"
			}
		}
		b.WriteString(strings.Join(hs, ", ") + "\n")
	}
	for _, d := range devs {
		vs := make([]string, len(fs))
		for i, fl := range fs {
			vs[i] = fl.value(d, total)
			if fl.Unit != "" && !f.NoUnits {
				vs[i] += " " + fl.Unit
			}
		}
		b.WriteString(strings.Join(vs, ", ") + "\n")
	}
	return b.String()
}

// Serial returns a fake, stable 13-digit board serial number derived from the UUID.
func Serial(uuid string) string {
	h := fnv.New64a()
	h.Write([]byte(uuid))
	return fmt.Sprintf("132%010d", h.Sum64()%10_000_000_000)
}

const topoLegend = `
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
`

// Topo formats `nvidia-smi topo -m`: every pair of GPUs is linked by NV12; cpuList returns the
// CPU affinity of a NUMA node (it is called with -1 for a GPU without one).
func Topo(devs []Device, cpuList func(numaNode int) string) string {
	var b strings.Builder
	for _, d := range devs {
		fmt.Fprintf(&b, "\tGPU%d", d.Index)
	}
	b.WriteString("\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n")
	for _, d := range devs {
		fmt.Fprintf(&b, "GPU%d", d.Index)
		for _, o := range devs {
			if o.Index == d.Index {
				b.WriteString("\t X ")
			} else {
				b.WriteString("\tNV12")
			}
		}
		numa := "N/A"
		if d.NUMANode >= 0 {
			numa = strconv.Itoa(d.NUMANode)
		}
		fmt.Fprintf(&b, "\t%s\t%s\t\tN/A\n", cpuList(d.NUMANode), numa)
	}
	b.WriteString(topoLegend)
	return b.String()
}
