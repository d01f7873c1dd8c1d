// Package cudasample reproduces what NVIDIA's cuda-samples vectorAdd prints, deciding success
// from the simulated devices visible in the container and their driver version.
package cudasample

import (
	"gpuconform.local/images/internal/hw"
)

// MinDriverMajor is the lowest driver branch that supports the sample's CUDA runtime (12.4).
const MinDriverMajor = 550

// Banner is the sample's first line, printed before any CUDA call.
const Banner = "[Vector addition of 50000 elements]\n"

// Success is the sample's full stdout when the kernel runs.
const Success = Banner +
	"Copy input data from the host memory to the CUDA device\n" +
	"CUDA kernel launch with 196 blocks of 256 threads\n" +
	"Copy output data from the CUDA device to the host memory\n" +
	"Test PASSED\n" +
	"Done\n"

// CUDA runtime error strings the sample reports.
const (
	ErrNoDevice           = "no CUDA-capable device is detected"
	ErrInsufficientDriver = "CUDA driver version is insufficient for CUDA runtime version"
)

// VectorAdd returns the sample's stdout, stderr and exit status for the visible devices (sorted
// by index). The effective driver version is the first device's.
func VectorAdd(devs []hw.DeviceInfo) (stdout, stderr string, code int) {
	if len(devs) == 0 {
		return Banner, allocFailure(ErrNoDevice), 1
	}
	if major, err := hw.DriverMajor(devs[0].DriverVersion); err != nil || major < MinDriverMajor {
		return Banner, allocFailure(ErrInsufficientDriver), 1
	}
	return Success, "", 0
}

func allocFailure(cudaErr string) string {
	return "Failed to allocate device vector A (error code " + cudaErr + ")!\n"
}
