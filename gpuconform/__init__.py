"""gpuconform: the pure decision logic of the GPU device-plugin conformance suite.

Nothing in this package performs I/O except `kube` (API access) and `config` (reading the config file);
everything else takes plain data (dicts as the API returns them, strings as tools print them) and returns
verdicts, so it is unit-tested with recorded objects in testing/unit/.
"""

__version__ = "0.1.0"
