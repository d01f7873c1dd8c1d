"""The conformance checks. This directory is the source of the installed package `gpuconform.checks`
(pyproject.toml maps it; nothing is copied): run them from a checkout with `pytest tests ...` or, installed, from
any directory with `pytest --pyargs gpuconform.checks ...`. Each check takes one fixture, `check`
(gpuconform/fixtures/check.py), which the plugin brings."""
