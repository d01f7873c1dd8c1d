#!/usr/bin/env bash
# Runs the real GPU Feature Discovery once per recorded shape over the mock NVML and writes its labels, sorted,
# with a provenance header, to testing/unit/data/gfd/<shape>.labels. Needs ./build.sh's library and a GFD binary:
#   GOBIN=~/.cache/gpuconform/nvidia/v0.19.3 go install github.com/NVIDIA/k8s-device-plugin/cmd/gpu-feature-discovery@v0.19.3
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
TAG="${GFD_TAG:-v0.19.3}"
GFD="${GFD:-$HOME/.cache/gpuconform/nvidia/$TAG/gpu-feature-discovery}"
LIB="${MOCK_NVML_LIB:-$HOME/.cache/gpuconform/mocknvml/lib}"
OUT="${OUT:-$repo/testing/unit/data/gfd}"
mkdir -p "$OUT"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "mock-machine" > "$tmp/machine-type"

# shape  hardware-config  mig-strategy  plugin-config ("-": none)  what it is
SHAPES="
a-a100x4-none a100x4.conf none - 4x A100-SXM4-40GB, MIG off, strategy none
b-a100x4-single a100x4.conf single - 4x A100-SXM4-40GB, MIG off, strategy single (the GPU operator's default)
b2-a100x4-mixed a100x4.conf mixed - 4x A100-SXM4-40GB, MIG off, strategy mixed
c-a100x4-mig1g5gb-single-ts2 a100x4-mig-1g.5gb.conf single ts-gpu-2.yaml 4x A100-SXM4-40GB all MIG 7x 1g.5gb, strategy single, time-slicing nvidia.com/gpu x2
d-a100-80x2-mig-mixed-ts4 a100-80x2-mig-mixed.conf mixed ts-gpu-4.yaml 2x A100-SXM4-80GB: GPU 0 MIG 7x 1g.10gb, GPU 1 whole, strategy mixed, time-slicing nvidia.com/gpu x4
e-a100pcie2-t4-none a100pcie2-t4.conf none - 2x A100-PCIE-40GB + 1x Tesla T4, strategy none
"
RUNS="${RUNS:-20}"  # GFD labels a node of several GPU models from a Go map: the output can differ run to run
version="$("$GFD" --version 2>&1 | tr '\n' ' ' | sed 's/  */ /g; s/ $//')"
rm -f "$OUT"/*.labels
echo "$SHAPES" | while read -r shape hw mig cfg desc; do
  [ -n "$shape" ] || continue
  args=(--oneshot --no-timestamp --use-node-feature-api=false "--machine-type-file=$tmp/machine-type"
        "--output-file=$tmp/$shape.out" "--mig-strategy=$mig")
  [ "$cfg" = "-" ] || args+=("--config-file=$here/shapes/$cfg")
  rm -rf "$tmp/$shape.d" && mkdir -p "$tmp/$shape.d"
  for i in $(seq 1 "$RUNS"); do
    MOCK_NVML_CONFIG="$here/shapes/$hw" LD_LIBRARY_PATH="$LIB" "$GFD" "${args[@]}" > "$tmp/$shape.log" 2>&1 || {
      echo "$shape: GFD failed"; tail -20 "$tmp/$shape.log"; break; }
    sort "$tmp/$shape.out" > "$tmp/$shape.sorted"
    sum="$(sha1sum < "$tmp/$shape.sorted" | cut -c1-12)"
    cp "$tmp/$shape.sorted" "$tmp/$shape.d/$sum"
    echo "$sum" >> "$tmp/$shape.d/runs"
    cp "$tmp/$shape.log" "$tmp/$shape.d/$sum.log"
  done
  [ -f "$tmp/$shape.d/runs" ] || continue
  # one file per distinct output, named .labels (one output) or .<product>.labels (several), by product label
  distinct="$(sort -u "$tmp/$shape.d/runs")"
  n="$(echo "$distinct" | wc -l)"
  for sum in $distinct; do
    name="$shape"
    if [ "$n" -gt 1 ]; then
      name="$shape.$(sed -n 's/^nvidia.com\/gpu.product=//p' "$tmp/$shape.d/$sum")"
    fi
    seen="$(grep -c "^$sum$" "$tmp/$shape.d/runs")"
    {
      echo "# produced by GPU Feature Discovery $TAG (--version: $version), built with go install from the Go module"
      echo "#   github.com/NVIDIA/k8s-device-plugin/cmd/gpu-feature-discovery@$TAG, on $(date -u +%Y-%m-%d),"
      echo "#   run over localcluster/mocknvml (mock libnvidia-ml.so.1) with hardware localcluster/mocknvml/shapes/$hw"
      echo "# shape: $desc"
      echo "# command: MOCK_NVML_CONFIG=localcluster/mocknvml/shapes/$hw LD_LIBRARY_PATH=<mocknvml lib> gpu-feature-discovery ${args[*]}" \
        | sed "s#$tmp/#<tmp>/#g; s#$here/#localcluster/mocknvml/#g"
      echo "# runs: this output in $seen of $RUNS runs ($n distinct outputs)"
      grep -h "^[WE]" "$tmp/$shape.d/$sum.log" | sed 's/^\([WE]\)[0-9]* [0-9:.]* *[0-9]* /# GFD log \1 /' || true
      cat "$tmp/$shape.d/$sum"
    } > "$OUT/$name.labels"
    echo "$name: $(grep -c '^nvidia.com' "$OUT/$name.labels") labels, $seen/$RUNS runs -> $OUT/$name.labels"
  done
done
