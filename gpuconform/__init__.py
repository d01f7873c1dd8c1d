"""gpuconform: the decision logic of the GPU device-plugin conformance suite, and its API client.

I/O happens in `kube`, `watch` and `cleanup` (the API), `config` (the config file), `nodeprobe` (the program the
node probe pod runs on the node) and `docs` (writes docs/). Every other module takes plain data (dicts as the API
returns them, strings as tools print them) and returns verdicts or data, unit-tested with recorded objects in
testing/unit/.
"""

__version__ = "0.1.0"
