// Command pause is a static stand-in for Kubernetes' pause container: it blocks until SIGINT or
// SIGTERM (exit 0) and reaps any child that gets re-parented to it.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (gpuconform)")
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		name := "Terminated"
		if sig == syscall.SIGINT {
			name = "Interrupt"
		}
		fmt.Fprintf(os.Stderr, "Shutting down, got signal: %s\n", name)
		os.Exit(0)
	}
}
