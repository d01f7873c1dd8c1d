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
	DefaultResourceName = "nvidia.com/gpu"
	// DefaultSocketName is the socket derived for DefaultResourceName (see SocketNameFor).
	DefaultSocketName       = "nvidia-gpu.sock"
	DefaultDevicePluginPath = "/var/lib/kubelet/device-plugins/"
)

// Version is the only accepted value of the optional "version" key, as in upstream
// NVIDIA/k8s-device-plugin api/config/v1/config.go (Version = "v1", "unknown version" otherwise).
const Version = "v1"

// MIG strategies, the values of flags.migStrategy (upstream api/config/v1/consts.go,
// validated like cmd/nvidia-device-plugin/main.go: "unknown MIG strategy").
const (
	MigStrategyNone   = "none"
	MigStrategySingle = "single"
	MigStrategyMixed  = "mixed"
)

// ResourceNamePrefix is prepended to a time-slicing resource name without a domain, and is the
// domain of the per-profile MIG resources (upstream api/config/v1/consts.go ResourceNamePrefix,
// api/config/v1/resources.go NewResourceName).
const ResourceNamePrefix = "nvidia.com"

// SharedSuffix is appended to a replicated resource's name with renameByDefault (upstream
// api/config/v1/consts.go DefaultSharedResourceNameSuffix, resources.go DefaultSharedRename).
const SharedSuffix = ".shared"

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
	// Version, when given, must be "v1" (upstream api/config/v1/config.go).
	Version string `json:"version"`
	// Flags holds upstream's flags.* settings that the simulation honours.
	Flags Flags `json:"flags"`
	// Sharing holds upstream's sharing.* settings (time-slicing only).
	Sharing Sharing `json:"sharing"`
	// Faults are the injectable failure modes.
	Faults Faults `json:"faults"`
}

// Flags mirrors the part of upstream's api/config/v1/flags.go CommandLineFlags that is simulated.
type Flags struct {
	// MigStrategy is none (default), single or mixed (upstream flags.go "migStrategy").
	MigStrategy string `json:"migStrategy"`
}

// Sharing mirrors upstream's api/config/v1/sharing.go Sharing (MPS is not simulated).
type Sharing struct {
	// TimeSlicing replicates devices (upstream sharing.go "timeSlicing").
	TimeSlicing *TimeSlicing `json:"timeSlicing"`
}

// TimeSlicing mirrors upstream's api/config/v1/replicas.go ReplicatedResources.
type TimeSlicing struct {
	// RenameByDefault advertises each replicated resource as <name>.shared.
	RenameByDefault bool `json:"renameByDefault"`
	// FailRequestsGreaterThanOne rejects an Allocate of more than one replica per container
	// (upstream internal/rm/rm.go ValidateRequest). Off unless set, as upstream for time-slicing.
	FailRequestsGreaterThanOne bool `json:"failRequestsGreaterThanOne"`
	// Resources lists the resources to replicate; at least one (upstream: "no resources specified").
	Resources []ReplicatedResource `json:"resources"`
}

// ReplicatedResource mirrors upstream's api/config/v1/replicas.go ReplicatedResource.
type ReplicatedResource struct {
	// Name is the resource to replicate; without a domain it gets "nvidia.com/" (upstream
	// resources.go NewResourceName).
	Name string `json:"name"`
	// Replicas per device, >= 2 (upstream replicas.go: "number of replicas must be >= 2").
	Replicas int `json:"replicas"`
	// Devices, when given, must be "all": upstream's cmd/nvidia-device-plugin/main.go calls
	// DisableResourceNamingInConfig (api/config/v1/config.go), which replicates all devices anyway.
	Devices string `json:"devices"`
}

// Replicated returns the time-slicing entry for the resource name, if any.
func (c Config) Replicated(name string) (ReplicatedResource, bool) {
	if c.Sharing.TimeSlicing != nil {
		for _, r := range c.Sharing.TimeSlicing.Resources {
			if r.Name == name {
				return r, true
			}
		}
	}
	return ReplicatedResource{}, false
}

// SharedName is the name a replicated resource is advertised under: name + ".shared" with
// renameByDefault (upstream replicas.go ReplicatedResources.UnmarshalJSON), else name.
func (c Config) SharedName(name string) string {
	if c.Sharing.TimeSlicing != nil && c.Sharing.TimeSlicing.RenameByDefault {
		return name + SharedSuffix
	}
	return name
}

// SocketNameFor is the socket file name for a resource: socketName when set explicitly and the
// resource is resourceName, else upstream's derivation "nvidia-" + the part after the domain +
// ".sock" (upstream internal/plugin/server.go getPluginSocketPath).
func (c Config) SocketNameFor(resource string) string {
	if c.SocketName != "" && resource == c.ResourceName {
		return c.SocketName
	}
	_, name, ok := strings.Cut(resource, "/")
	if !ok {
		name = resource
	}
	return "nvidia-" + name + ".sock"
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
		DevicePluginPath: DefaultDevicePluginPath,
		Flags:            Flags{MigStrategy: MigStrategyNone},
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

// checkKeys rejects keys of m that are not JSON field names of struct type t, and recurses into
// values that are mappings of struct fields (or lists of them: "<key>[<i>].").
func checkKeys(prefix string, m map[string]any, t reflect.Type) error {
	known := map[string]reflect.Type{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		known[name] = t.Field(i).Type
		names = append(names, prefix+name)
	}
	var unknown []string
	for k := range m {
		if _, ok := known[k]; !ok {
			unknown = append(unknown, fmt.Sprintf("%q", prefix+k))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("unknown key %s (valid keys: %s)", strings.Join(unknown, ", "), strings.Join(names, ", "))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ft := known[k]
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch v := m[k].(type) {
		case map[string]any:
			if ft.Kind() == reflect.Struct {
				if err := checkKeys(prefix+k+".", v, ft); err != nil {
					return err
				}
			}
		case []any:
			if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
				for i, e := range v {
					if em, ok := e.(map[string]any); ok {
						if err := checkKeys(fmt.Sprintf("%s%s[%d].", prefix, k, i), em, ft.Elem()); err != nil {
							return err
						}
					}
				}
			}
		}
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

// Validate checks field values; empty resourceName, devicePluginPath and flags.migStrategy fall
// back to defaults (an empty socketName means "derive it from the resource name").
func (c *Config) Validate() error {
	if c.ResourceName == "" {
		c.ResourceName = DefaultResourceName
	}
	if c.Flags.MigStrategy == "" {
		c.Flags.MigStrategy = MigStrategyNone
	}
	if c.DevicePluginPath == "" {
		c.DevicePluginPath = DefaultDevicePluginPath
	}
	domain, name, ok := strings.Cut(c.ResourceName, "/")
	if !ok || domain == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("resourceName %q: want <domain>/<name>", c.ResourceName)
	}
	if c.SocketName != "" && (strings.Contains(c.SocketName, "/") || c.SocketName == "kubelet.sock" || c.SocketName == "." || c.SocketName == "..") {
		return fmt.Errorf("socketName %q: want a plain file name other than kubelet.sock", c.SocketName)
	}
	if c.Version != "" && c.Version != Version {
		return fmt.Errorf("version %q: unknown version (want %q)", c.Version, Version)
	}
	switch c.Flags.MigStrategy {
	case MigStrategyNone, MigStrategySingle, MigStrategyMixed:
	default:
		return fmt.Errorf("flags.migStrategy %q: unknown MIG strategy (want none, single or mixed)", c.Flags.MigStrategy)
	}
	if ts := c.Sharing.TimeSlicing; ts != nil {
		if len(ts.Resources) == 0 {
			return fmt.Errorf("sharing.timeSlicing.resources: no resources specified")
		}
		seen := map[string]bool{}
		for i := range ts.Resources {
			r := &ts.Resources[i]
			key := fmt.Sprintf("sharing.timeSlicing.resources[%d]", i)
			if r.Name == "" {
				return fmt.Errorf("%s.name: no resource name specified", key)
			}
			if !strings.Contains(r.Name, "/") {
				r.Name = ResourceNamePrefix + "/" + r.Name
			}
			domain, name, _ := strings.Cut(r.Name, "/")
			if domain == "" || name == "" || strings.Contains(name, "/") {
				return fmt.Errorf("%s.name %q: want <name> or <domain>/<name>", key, r.Name)
			}
			if seen[r.Name] {
				return fmt.Errorf("%s.name %q: listed twice", key, r.Name)
			}
			seen[r.Name] = true
			if r.Replicas < 2 {
				return fmt.Errorf("%s.replicas %d: number of replicas must be >= 2", key, r.Replicas)
			}
			if r.Devices != "" && r.Devices != "all" {
				return fmt.Errorf("%s.devices %q: only \"all\" is supported (upstream replicates all devices)", key, r.Devices)
			}
		}
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
