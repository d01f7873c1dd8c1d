// Package config parses the gpu-device-plugin configuration: a YAML (or JSON) document, normally
// a mounted ConfigMap, whose keys are all optional and whose unknown keys are rejected.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// DefaultPath is where the plugin looks for its config when --config is not given.
const DefaultPath = "/etc/gpu-sim/config.yaml"

// Defaults.
const (
	DefaultResourceName     = "nvidia.com/gpu"
	DefaultSocketName       = "nvidia-gpu.sock"
	DefaultDevicePluginPath = "/var/lib/kubelet/device-plugins/"
)

// Config is the plugin configuration.
type Config struct {
	// ResourceName is the extended resource advertised to the kubelet.
	ResourceName string `json:"resourceName"`
	// SocketName is the plugin's socket file name inside DevicePluginPath (the Register endpoint).
	SocketName string `json:"socketName"`
	// DevicePluginPath is the kubelet's device-plugin directory (holds kubelet.sock).
	DevicePluginPath string `json:"devicePluginPath"`
	// DriverVersion, when non-empty, replaces hardware.json's driverVersion in what is injected.
	DriverVersion string `json:"driverVersion"`
	// Faults are the injectable failure modes.
	Faults Faults `json:"faults"`
}

// Faults are the failure modes the plugin can be told to simulate.
type Faults struct {
	// CrashAtStart: log a fatal message, write it to the termination log, exit 1.
	CrashAtStart bool `json:"crashAtStart"`
	// NeverRegister: serve the socket and stay alive, but never call Register.
	NeverRegister bool `json:"neverRegister"`
	// RegisterDelaySeconds: wait this long after serving before the first Register.
	RegisterDelaySeconds int `json:"registerDelaySeconds"`
	// ExtraDevices: advertise this many phantom devices beyond the hardware.
	ExtraDevices int `json:"extraDevices"`
	// UnhealthyDevices: device indexes reported Unhealthy (phantoms continue the index space).
	UnhealthyDevices []int `json:"unhealthyDevices"`
	// NUMAOverride: device index -> NUMA node reported in the topology; -1 means no topology.
	NUMAOverride map[int]int `json:"numaOverride"`
	// AllocateDelayMs: sleep this long in Allocate.
	AllocateDelayMs int `json:"allocateDelayMs"`
	// AllocateError: when non-empty, Allocate fails with this message (gRPC code Internal).
	AllocateError string `json:"allocateError"`
	// SkipInjection: Allocate returns only NVIDIA_VISIBLE_DEVICES, no device nodes or mounts.
	SkipInjection bool `json:"skipInjection"`
	// InjectOnlyIndex: Allocate ignores the requested IDs and injects the device with this index into
	// every container (a broken ID-to-device mapping): concurrent pods share one GPU.
	InjectOnlyIndex *int `json:"injectOnlyIndex"`
}

// Default returns the configuration used when no file exists.
func Default() Config {
	return Config{
		ResourceName:     DefaultResourceName,
		SocketName:       DefaultSocketName,
		DevicePluginPath: DefaultDevicePluginPath,
	}
}

// Parse decodes a YAML or JSON document on top of the defaults, rejecting unknown and duplicate
// keys, and validates the result. An empty document yields the defaults.
func Parse(data []byte) (Config, error) {
	c := Default()
	if len(strings.TrimSpace(string(data))) > 0 {
		if err := decodeStrict(data, &c); err != nil {
			return Config{}, fmt.Errorf("invalid config: %w", err)
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("invalid config: %w", err)
	}
	return c, nil
}

// decodeStrict converts YAML (or JSON) to JSON, rejecting duplicate keys, checks every key of
// the document and of "faults" against the fields of Config, then decodes into c.
func decodeStrict(data []byte, c *Config) error {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return err
	}
	var doc any
	if err := json.Unmarshal(j, &doc); err != nil {
		return err
	}
	switch top := doc.(type) {
	case nil:
		return nil // a document of comments only
	case map[string]any:
		if err := checkKeys("", top, reflect.TypeOf(Config{})); err != nil {
			return err
		}
		if faults, ok := top["faults"].(map[string]any); ok {
			if err := checkKeys("faults.", faults, reflect.TypeOf(Faults{})); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("want a mapping of settings at the top level, got %s", strings.TrimSpace(string(j)))
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("%s: cannot use a %s value as %s", te.Field, te.Value, te.Type)
		}
		return err
	}
	return nil
}

// checkKeys rejects keys of m that are not JSON field names of struct type t.
func checkKeys(prefix string, m map[string]any, t reflect.Type) error {
	known := map[string]bool{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		known[name] = true
		names = append(names, prefix+name)
	}
	var unknown []string
	for k := range m {
		if !known[k] {
			unknown = append(unknown, fmt.Sprintf("%q", prefix+k))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("unknown key %s (valid keys: %s)", strings.Join(unknown, ", "), strings.Join(names, ", "))
	}
	return nil
}

// Load reads the config file at path; a missing file yields the defaults.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Default(), nil
	}
	if err != nil {
		return Config{}, err
	}
	c, err := Parse(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Validate checks field values; empty strings for the three paths/names fall back to defaults.
func (c *Config) Validate() error {
	if c.ResourceName == "" {
		c.ResourceName = DefaultResourceName
	}
	if c.SocketName == "" {
		c.SocketName = DefaultSocketName
	}
	if c.DevicePluginPath == "" {
		c.DevicePluginPath = DefaultDevicePluginPath
	}
	domain, name, ok := strings.Cut(c.ResourceName, "/")
	if !ok || domain == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("resourceName %q: want <domain>/<name>", c.ResourceName)
	}
	if strings.Contains(c.SocketName, "/") || c.SocketName == "kubelet.sock" || c.SocketName == "." || c.SocketName == ".." {
		return fmt.Errorf("socketName %q: want a plain file name other than kubelet.sock", c.SocketName)
	}
	if !strings.HasPrefix(c.DevicePluginPath, "/") {
		return fmt.Errorf("devicePluginPath %q: want an absolute path", c.DevicePluginPath)
	}
	f := c.Faults
	if f.RegisterDelaySeconds < 0 {
		return fmt.Errorf("faults.registerDelaySeconds %d: must not be negative", f.RegisterDelaySeconds)
	}
	if f.ExtraDevices < 0 {
		return fmt.Errorf("faults.extraDevices %d: must not be negative", f.ExtraDevices)
	}
	if f.AllocateDelayMs < 0 {
		return fmt.Errorf("faults.allocateDelayMs %d: must not be negative", f.AllocateDelayMs)
	}
	for _, i := range f.UnhealthyDevices {
		if i < 0 {
			return fmt.Errorf("faults.unhealthyDevices: index %d must not be negative", i)
		}
	}
	if f.InjectOnlyIndex != nil && *f.InjectOnlyIndex < 0 {
		return fmt.Errorf("faults.injectOnlyIndex: index %d must not be negative", *f.InjectOnlyIndex)
	}
	for i, n := range f.NUMAOverride {
		if i < 0 {
			return fmt.Errorf("faults.numaOverride: index %d must not be negative", i)
		}
		if n < -1 {
			return fmt.Errorf("faults.numaOverride[%d] = %d: want a NUMA node >= 0, or -1 for no topology", i, n)
		}
	}
	return nil
}

// Unhealthy reports whether the device with this index is configured Unhealthy.
func (f Faults) Unhealthy(index int) bool {
	for _, i := range f.UnhealthyDevices {
		if i == index {
			return true
		}
	}
	return false
}
