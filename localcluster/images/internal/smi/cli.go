package smi

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"gpuconform.local/images/internal/hw"
)

// Env is everything nvidia-smi reads from its surroundings.
type Env struct {
	Devices []hw.DeviceInfo           // visible devices, sorted by hardware index
	Now     time.Time                 // for the table's first line
	CPUList func(numaNode int) string // CPU affinity of a NUMA node
}

// Command is a parsed command line.
type Command struct {
	Mode   string // "table", "list", "query", "topo", "help"
	Fields []Field
	Format Format
	IDs    []string // -i/--id selection; empty = all
}

const invalidCombination = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"

const help = `NVIDIA System Management Interface -- v%s (simulated by gpuconform)

Supported:
    nvidia-smi                                        the summary table
    nvidia-smi -L, --list-gpus                        list GPUs with their UUIDs
    nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]
        fields: index, uuid (gpu_uuid), name (gpu_name), pci.bus_id (gpu_bus_id),
                memory.total, driver_version, count, serial (gpu_serial), minor_number
    nvidia-smi topo -m, --matrix                      the GPU topology matrix
    -i, --id=<index,uuid,pci.bus_id,...>              restrict to these GPUs
`

// argError is a command-line problem: the message goes to stdout and the status is 2.
type argError struct{ msg string }

func (e *argError) Error() string { return e.msg }

// Parse parses nvidia-smi's arguments (without the program name).
func Parse(args []string) (Command, error) {
	c := Command{Mode: "table"}
	query, format := "", ""
	haveQuery, haveFormat := false, false
	// value returns the value of an option given as --opt=value, or as the next argument.
	value := func(i *int, arg, name string) (string, bool) {
		if v, ok := strings.CutPrefix(arg, name+"="); ok {
			return v, true
		}
		if arg == name && *i+1 < len(args) {
			*i++
			return args[*i], true
		}
		return "", false
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-h" || a == "--help":
			return Command{Mode: "help"}, nil
		case a == "-L" || a == "--list-gpus":
			c.Mode = "list"
		case a == "topo" && i == 0:
			if len(args) == 2 && (args[1] == "-m" || args[1] == "--matrix") {
				return Command{Mode: "topo"}, nil
			}
			return Command{}, &argError{invalidCombination}
		case strings.HasPrefix(a, "--query-gpu"):
			v, ok := value(&i, a, "--query-gpu")
			if !ok {
				return Command{}, &argError{invalidCombination}
			}
			query, haveQuery = v, true
		case strings.HasPrefix(a, "--format"):
			v, ok := value(&i, a, "--format")
			if !ok {
				return Command{}, &argError{invalidCombination}
			}
			format, haveFormat = v, true
		case strings.HasPrefix(a, "--id") || a == "-i":
			name := "--id"
			if a == "-i" {
				name = "-i"
			}
			v, ok := value(&i, a, name)
			if !ok || v == "" {
				return Command{}, &argError{invalidCombination}
			}
			for _, id := range strings.Split(v, ",") {
				c.IDs = append(c.IDs, strings.TrimSpace(id))
			}
		case strings.HasPrefix(a, "-i") && len(a) > 2:
			for _, id := range strings.Split(a[2:], ",") {
				c.IDs = append(c.IDs, strings.TrimSpace(id))
			}
		default:
			return Command{}, &argError{invalidCombination}
		}
	}
	if haveQuery {
		if c.Mode == "list" {
			return Command{}, &argError{invalidCombination}
		}
		fs, err := ParseFields(query)
		if err != nil {
			return Command{}, &argError{err.Error() + "\n"}
		}
		if !haveFormat {
			return Command{}, &argError{"Option --format must be given with --query-gpu (e.g. --format=csv).\n"}
		}
		f, err := ParseFormat(format)
		if err != nil {
			return Command{}, &argError{err.Error() + "\n"}
		}
		c.Mode, c.Fields, c.Format = "query", fs, f
	} else if haveFormat {
		return Command{}, &argError{invalidCombination}
	}
	return c, nil
}

// selectIDs keeps the devices named by index, UUID or PCI bus ID.
func selectIDs(devs []Device, ids []string) []Device {
	if len(ids) == 0 {
		return devs
	}
	var out []Device
	for _, d := range devs {
		for _, id := range ids {
			if id == strconv.Itoa(d.Index) || strings.EqualFold(id, d.UUID) || strings.EqualFold(id, d.PCIBusID) {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// Run executes nvidia-smi with args against env and returns the exit status.
func Run(args []string, env Env, stdout io.Writer) int {
	devs := Renumber(env.Devices)
	driver, cuda := "N/A", "N/A"
	if len(devs) > 0 {
		driver, cuda = devs[0].DriverVersion, devs[0].CUDAVersion
	}
	c, err := Parse(args)
	if err != nil {
		fmt.Fprint(stdout, err.Error())
		return ExitInvalidArgument
	}
	if c.Mode == "help" {
		fmt.Fprintf(stdout, help, driver)
		return 0
	}
	total := len(devs)
	devs = selectIDs(devs, c.IDs)
	if len(devs) == 0 {
		fmt.Fprint(stdout, NoDevices)
		return ExitNoDevices
	}
	switch c.Mode {
	case "list":
		fmt.Fprint(stdout, List(devs))
	case "query":
		fmt.Fprint(stdout, Query(devs, total, c.Fields, c.Format))
	case "topo":
		fmt.Fprint(stdout, Topo(devs, env.CPUList))
	default:
		fmt.Fprint(stdout, Table(devs, driver, cuda, env.Now))
	}
	return 0
}
