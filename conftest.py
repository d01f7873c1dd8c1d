"""Loads gpuconform's pytest plugin (gpuconform/pytest_plugin) and the fixtures the checks use (fixtures/)."""

pytest_plugins = ["gpuconform.pytest_plugin.plugin"]
