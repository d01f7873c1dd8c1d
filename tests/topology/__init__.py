"""The topology checks (gpuconform.checks.topology when installed)."""
