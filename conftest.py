"""Loads gpuconform's pytest plugin (options, config, fixtures, outcomes, summary) for the whole tree."""

pytest_plugins = ["fixtures.plugin"]
