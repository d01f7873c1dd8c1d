package cudasample

import (
	"testing"

	"gpuconform.local/images/internal/hw"
)

func dev(driver string) hw.DeviceInfo {
	return hw.DeviceInfo{GPU: hw.GPU{UUID: "GPU-x"}, DriverVersion: driver, CUDAVersion: "12.4"}
}

func TestVectorAdd(t *testing.T) {
	cases := []struct {
		name        string
		devs        []hw.DeviceInfo
		out, errOut string
		code        int
	}{
		{"ok", []hw.DeviceInfo{dev("550.54.15")}, "[Vector addition of 50000 elements]\n" +
			"Copy input data from the host memory to the CUDA device\n" +
			"CUDA kernel launch with 196 blocks of 256 threads\n" +
			"Copy output data from the CUDA device to the host memory\n" +
			"Test PASSED\n" +
			"Done\n", "", 0},
		{"newer driver", []hw.DeviceInfo{dev("560.35.03")}, Success, "", 0},
		{"no device", nil, "[Vector addition of 50000 elements]\n",
			"Failed to allocate device vector A (error code no CUDA-capable device is detected)!\n", 1},
		{"old driver", []hw.DeviceInfo{dev("470.82.01")}, "[Vector addition of 50000 elements]\n",
			"Failed to allocate device vector A (error code CUDA driver version is insufficient for CUDA runtime version)!\n", 1},
		{"unparsable driver", []hw.DeviceInfo{dev("")}, Banner, "Failed to allocate device vector A (error code " + ErrInsufficientDriver + ")!\n", 1},
	}
	for _, c := range cases {
		out, errOut, code := VectorAdd(c.devs)
		if out != c.out || errOut != c.errOut || code != c.code {
			t.Errorf("%s: got (%q, %q, %d)", c.name, out, errOut, code)
		}
	}
}

func TestVectorAddMIG(t *testing.T) {
	d := dev("550.54.15")
	d.MIG = &hw.MIGDevice{Profile: "1g.5gb", UUID: "MIG-x"}
	if out, errOut, code := VectorAdd([]hw.DeviceInfo{d}); out != Success || errOut != "" || code != 0 {
		t.Fatalf("got (%q, %q, %d)", out, errOut, code)
	}
}
