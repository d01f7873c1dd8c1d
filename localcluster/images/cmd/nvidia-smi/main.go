// Command nvidia-smi answers like the real nvidia-smi 550 for the simulated GPUs injected into
// the container (see internal/container for the visibility rule and GPU_SIM_CONTAINER_ROOT).
package main

import (
	"os"
	"strconv"
	"strings"
	"time"

	"gpuconform.local/images/internal/container"
	"gpuconform.local/images/internal/smi"
)

// cpuList reads /sys/devices/system/node/node<N>/cpulist, falling back to "0-1".
func cpuList(node int) string {
	if node >= 0 {
		b, err := os.ReadFile("/sys/devices/system/node/node" + strconv.Itoa(node) + "/cpulist")
		if s := strings.TrimSpace(string(b)); err == nil && s != "" {
			return s
		}
	}
	return "0-1"
}

func main() {
	devs, warnings := container.Visible(container.Root())
	for _, w := range warnings {
		if strings.HasPrefix(w, container.DeniedPrefix) { // what nvidia-smi prints when NVML cannot open a GPU
			os.Stdout.WriteString("Failed to initialize NVML: Unknown Error\n")
			os.Exit(255)
		}
	}
	os.Exit(smi.Run(os.Args[1:], smi.Env{Devices: devs, Now: time.Now(), CPUList: cpuList}, os.Stdout))
}
