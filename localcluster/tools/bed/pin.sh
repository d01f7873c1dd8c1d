#!/usr/bin/env bash
# Writes go.mod and go.sum here: one module for the bed's Go tools other than Kubernetes itself (kwok, NVIDIA's device
# plugin and GPU Feature Discovery, node-feature-discovery's master, containerd 2 for the DRA node), built by
# ../../build.sh, pinned to the Kubernetes build's own versions (../k8s/versions/$K8S_PINS.mod) wherever a tool
# builds with them. Each tool's own release pins other k8s.io/api, apimachinery and client-go versions (kwok v0.36.1,
# the plugin v0.35.5, NFD v0.32.3, containerd v0.37.0), so built apart, those libraries and everything under them
# were compiled once per tool; built here, the Go build cache holds them once, from the Kubernetes build.
#   * the Kubernetes staging modules and every module in the Kubernetes build list take the Kubernetes build's version
#     (replace lines), except NEWER: modules a tool needs newer than Kubernetes pins (containerd does not build with
#     them; none is under client-go), which keep what the tools require;
#   * go.opentelemetry.io/otel modules Kubernetes does not use follow its otel release where they are newer (an
#     exporter newer than otel itself does not build);
#   * NFD's master stays at NFD (the release NVIDIA's chart at NVIDIA depends on), although the plugin's module
#     requires a newer NFD for GFD's NodeFeature API; GFD builds against NFD's api/nfd at NFD.
# Usage: tools/bed/pin.sh (needs the Go module proxy). Editing a version below means running it again.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
K8S_PINS=${K8S_PINS:-v1.37.2}
KWOK=v0.8.0 NVIDIA=v0.19.3 NFD=v0.17.3 CONTAINERD=v2.4.2
NEWER=(github.com/containerd/containerd/api github.com/containerd/log github.com/sirupsen/logrus)
pins=$here/../k8s/versions/$K8S_PINS.mod
[[ -f $pins ]] || { echo "pin.sh: no $pins (run ../k8s/pin.sh $K8S_PINS first)" >&2; exit 2; }
k8s_list=$(cd "$here/../k8s" && go list -m -modfile="$pins" -f '{{.Path}} {{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' all)

write() {  # write EXTRA_REPLACE_LINES
  {
    echo "// The bed's Go tools other than Kubernetes, pinned to Kubernetes $K8S_PINS's build list (written by pin.sh)."
    echo "module gpuconform.local/bedtools"
    echo
    grep -m1 '^go ' "$pins"
    echo
    echo "replace ("
    grep -E '^\s*k8s\.io/[a-z0-9-]+ => ' "$pins"
    printf '\tsigs.k8s.io/node-feature-discovery => sigs.k8s.io/node-feature-discovery %s\n' "$NFD"
    printf '\tsigs.k8s.io/node-feature-discovery/api/nfd => sigs.k8s.io/node-feature-discovery/api/nfd %s\n' "$NFD"
    printf '%s' "$1"
    echo ")"
    echo
    echo "tool ("
    for t in sigs.k8s.io/kwok/cmd/kwok github.com/NVIDIA/k8s-device-plugin/cmd/nvidia-device-plugin \
             github.com/NVIDIA/k8s-device-plugin/cmd/gpu-feature-discovery sigs.k8s.io/node-feature-discovery/cmd/nfd-master \
             github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2; do
      printf '\t%s\n' "$t"
    done
    echo ")"
    echo
    echo "require ("
    printf '\t%s %s\n' k8s.io/kubernetes "$K8S_PINS" sigs.k8s.io/kwok "$KWOK" github.com/NVIDIA/k8s-device-plugin "$NVIDIA" \
      sigs.k8s.io/node-feature-discovery "$NFD" github.com/containerd/containerd/v2 "$CONTAINERD"
    echo ")"
  } > "$here/go.mod"
  rm -f "$here/go.sum"
  (cd "$here" && go mod tidy)
}
write ""
# What the tools alone resolve, then every module Kubernetes also uses back at Kubernetes's version.
extra=$(cd "$here" && go list -m -f '{{.Path}} {{.Version}}' all | K8S_LIST="$k8s_list" NEWER="${NEWER[*]}" python3 -c '
import os, sys
k8s = dict(l.split() for l in os.environ["K8S_LIST"].splitlines() if len(l.split()) == 2)
newer = set(os.environ["NEWER"].split())
otel = k8s["go.opentelemetry.io/otel"]
def ver(v): return tuple(int(x) for x in v.lstrip("v").split("-")[0].split("."))
for line in sys.stdin:
    path, _, v = line.partition(" ")
    v = v.strip()
    if not v or path.startswith("k8s.io/") and path != "k8s.io/kubernetes" and path in k8s and k8s[path].startswith("v0.0.0"):
        continue
    if path in k8s and k8s[path] != v and path not in newer:
        print(f"\t{path} => {path} {k8s[path]}")
    elif path not in k8s and path.startswith("go.opentelemetry.io/otel/") and v.startswith("v1.") and ver(v) > ver(otel):
        print(f"\t{path} => {path} {otel}")
')
write "$extra"$'\n'
echo "$here/go.mod: kwok $KWOK, NVIDIA's plugin and GFD $NVIDIA, NFD $NFD, containerd $CONTAINERD over Kubernetes $K8S_PINS's build list ($(grep -c ' => ' "$here/go.mod") replace lines)"
