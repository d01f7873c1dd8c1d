// Command gpu-device-plugin is a device-plugin v1beta1 server for the simulated GPUs of a test-bed
// node. It reads its config (--config, default /etc/gpu-sim/config.yaml; a missing file means
// defaults), the hardware under $GPU_SIM_ROOT (default /var/lib/gpu-sim), serves its socket in
// the kubelet's device-plugin directory and registers with kubelet.sock. SIGTERM/SIGINT stop it
// cleanly (exit 0); fatal errors go to stderr and the termination log and exit 1.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"os/signal"
	"syscall"

	"gpuconform.local/images/internal/config"
	"gpuconform.local/images/internal/hw"
	"gpuconform.local/images/internal/plugin"
)

var logger = log.New(os.Stderr, "gpu-device-plugin: ", log.LUTC|log.Ldate|log.Ltime|log.Lmicroseconds|log.Lmsgprefix)

func main() {
	configPath := flag.String("config", config.DefaultPath, "plugin config file (YAML or JSON); a missing file means defaults")
	terminationLog := flag.String("termination-log", "/dev/termination-log", "file the fatal message is written to")
	flag.Parse()

	fatal := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		logger.Printf("FATAL: %s", msg)
		if err := os.WriteFile(*terminationLog, []byte(msg+"\n"), 0o644); err != nil {
			logger.Printf("cannot write termination log %s: %v", *terminationLog, err)
		}
		os.Exit(1)
	}

	logger.Printf("starting on node %q (pid %d)", os.Getenv("NODE_NAME"), os.Getpid())
	cfg, err := config.Load(*configPath)
	if err != nil {
		fatal("%v", err)
	}
	source := *configPath
	if _, err := os.Stat(*configPath); errors.Is(err, fs.ErrNotExist) {
		source = *configPath + " (absent: defaults)"
	}
	cj, _ := json.Marshal(cfg)
	logger.Printf("config from %s: %s", source, cj)
	if cfg.Faults.CrashAtStart {
		fatal("crashAtStart fault: failed to initialize NVML: simulated driver initialization failure")
	}

	root := hw.Root()
	logger.Printf("GPU_SIM_ROOT=%s", root)
	p, err := plugin.New(plugin.Options{Config: cfg, Root: root, Log: logger})
	if err != nil {
		fatal("%v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := p.Run(ctx); err != nil {
		fatal("%v", err)
	}
	logger.Printf("exiting")
}
