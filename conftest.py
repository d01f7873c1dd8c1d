"""Loads gpuconform's pytest plugin (gpuconform/pytest_plugin) and the fixture the checks take (fixtures/)."""

pytest_plugins = ["gpuconform.pytest_plugin.plugin", "fixtures.check"]
