"""The registration checks (gpuconform.checks.registration when installed)."""
