"""The allocation checks (gpuconform.checks.allocation when installed)."""
