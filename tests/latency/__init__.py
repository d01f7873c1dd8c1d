"""The latency checks (gpuconform.checks.latency when installed)."""
