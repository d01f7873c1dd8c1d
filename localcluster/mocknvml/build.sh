#!/usr/bin/env bash
# Builds the mock NVML: $OUT/libnvidia-ml.so.1 (default: ~/.cache/gpuconform/mocknvml/lib), from mocknvml.c and
# stubs generated from go-nvml's nvml.h. The header comes from $NVML_H, else from the Go module cache at the
# go-nvml version the device plugin pins (downloaded with `go mod download` when absent).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
OUT="${OUT:-$HOME/.cache/gpuconform/mocknvml/lib}"
GO_NVML="${GO_NVML:-github.com/NVIDIA/go-nvml@v0.13.0-1.0.20260212130905-92cf8c963449}"  # k8s-device-plugin v0.19.3 go.mod
export GOMODCACHE="${GOMODCACHE:-$HOME/.cache/go/mod}"
if [ -z "${NVML_H:-}" ]; then
  dir="$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "$GO_NVML" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  NVML_H="$dir/pkg/nvml/nvml.h"
fi
mkdir -p "$OUT"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$NVML_H" "$work/nvml.h"
python3 "$here/gen_stubs.py" "$work/nvml.h" "$here/mocknvml.c" "$work/stubs.c"
CFLAGS=(-O2 -fPIC -pthread -fvisibility=default -DNVML_NO_UNVERSIONED_FUNC_DEFS -I"$work" -Wall -Wno-unused-parameter)
${CC:-gcc} "${CFLAGS[@]}" -c "$here/mocknvml.c" -o "$work/mocknvml.o"
${CC:-gcc} "${CFLAGS[@]}" -Wno-deprecated-declarations -c "$work/stubs.c" -o "$work/stubs.o"
${CC:-gcc} -shared -pthread -Wl,-soname,libnvidia-ml.so.1 -o "$OUT/libnvidia-ml.so.1" "$work/mocknvml.o" "$work/stubs.o"
ln -sf libnvidia-ml.so.1 "$OUT/libnvidia-ml.so"
echo "$OUT/libnvidia-ml.so.1 ($(nm -D --defined-only "$OUT/libnvidia-ml.so.1" | grep -c ' T nvml') nvml symbols)"
