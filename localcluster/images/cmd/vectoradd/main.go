// Command vectoradd stands in for NVIDIA's cuda-sample vectoradd image: it succeeds when a
// simulated GPU is injected into the container and its driver is new enough.
package main

import (
	"fmt"
	"os"

	"gpuconform.local/images/internal/container"
	"gpuconform.local/images/internal/cudasample"
)

func main() {
	devs, _ := container.Visible(container.Root())
	stdout, stderr, code := cudasample.VectorAdd(devs)
	fmt.Fprint(os.Stdout, stdout)
	fmt.Fprint(os.Stderr, stderr)
	os.Exit(code)
}
