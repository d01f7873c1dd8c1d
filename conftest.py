"""A checkout's pytest set-up: loads gpuconform's entry module (gpuconform/pytest_plugin/entry.py), which an
installed gpuconform registers as its pytest11 entry point (then pytest finds it registered under the same name and
skips it here). It adds the --gpuconform-* options and loads the plugin and the `check` fixture only when the run
asks for gpuconform: `pytest tests ...` (the checks) or any --gpuconform-* option; `pytest testing/...` runs without
it (docs/install.md, "When the plugin is active")."""

pytest_plugins = ["gpuconform.pytest_plugin.entry"]
