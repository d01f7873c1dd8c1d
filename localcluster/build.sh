#!/usr/bin/env bash
# Builds every binary the local test bed needs from Go modules (never from clones) and caches them
# outside the work tree, each group keyed on its pinned versions, sources and build flags:
#   $GPUCONFORM_CACHE (default ~/.cache/gpuconform)/{k8s,kwok,images}/<key>/
# A warm cache makes this a no-op; a warm Go build cache (~/.cache/go-build) turns a rebuild into a relink.
# stdout: one NAME=DIR line per group (K8S_BIN, K8S_TOOLS_BIN, KWOK_BIN, IMAGES_BIN, NVIDIA_BIN, CONTAINERD2_BIN, MOCKNVML_LIB); progress goes to stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${GPUCONFORM_CACHE:-$HOME/.cache/gpuconform}
export GOFLAGS=-buildvcs=false CGO_ENABLED=0
KWOK_VERSION=v0.8.0
start=$SECONDS
log() { printf '[build %s +%ss] %s\n' "$(date +%H:%M:%S)" "$((SECONDS - start))" "$*" >&2; }
hash() { cat "$@" | sha256sum | cut -c1-12; }

# group NAME DIR FUNC: runs FUNC (which fills $tmp) unless DIR is complete; prints NAME=DIR.
group() {
  local name=$1 dir=$2 fn=$3
  if [[ ! -f "$dir/.complete" ]]; then
    tmp="$dir.partial"; mkdir -p "$tmp"
    local t=$SECONDS
    "$fn"
    echo "build_seconds=$((SECONDS - t))" > "$tmp/.complete"
    rm -rf "$dir"; mv "$tmp" "$dir"
    log "$name ready in $dir"
  else
    log "$name cached in $dir"
  fi
  echo "$name=$dir"
}
# step FILE CMD...: one build step with timing; skipped when a killed earlier run already produced FILE.
step() {
  local file=$1; shift
  if [[ -e "$tmp/$file" ]]; then log "$file: kept from an earlier partial build"; return; fi
  local t=$SECONDS
  log "building $file${hint:-} ..."
  "$@"
  log "built $file in $((SECONDS - t))s"
}

tools=$here/tools/k8s
# K8S_VERSION (default: the newest served stable release) picks tools/k8s/versions/$K8S_VERSION.mod, written by
# tools/k8s/pin.sh; another release needs `tools/k8s/pin.sh vX.Y.Z` first.
K8S_VERSION=${K8S_VERSION:-v1.37.2}
modfile=$tools/versions/$K8S_VERSION.mod
if [[ ! -f $modfile ]]; then
  echo "build.sh: no pins for Kubernetes $K8S_VERSION (have: $(cd "$tools/versions" && ls *.mod | sed 's/\.mod$//' | tr '\n' ' ')); run localcluster/tools/k8s/pin.sh $K8S_VERSION" >&2
  exit 2
fi
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
# Stamp versions like hack/lib/version.sh does; buildDate is fixed so relinks are reproducible.
ld="-s -w"
for kv in gitVersion=$K8S_VERSION gitMajor=1 gitMinor=$minor gitTreeState=clean \
          gitCommit=0000000000000000000000000000000000000000 buildDate=2000-01-01T00:00:00Z; do
  ld="$ld -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
done
k8s_tags=selinux,notest
k8s_cmd() { (cd "$tools" && go build -modfile="$modfile" -trimpath -tags "$k8s_tags" -ldflags "$ld" -o "$tmp/$1" "k8s.io/kubernetes/cmd/$1"); }
build_k8s() {
  local hint=" (a cold build of the Kubernetes binaries took about 8 min on 2 cores here)"
  # Node-side pieces first: a usable kubelet/kubectl early, and the apiserver link reuses their compile cache.
  for c in kubectl kubelet kube-scheduler kube-controller-manager kube-apiserver; do step "$c" k8s_cmd "$c"; done
  # etcd at the version Kubernetes itself pins (required by the tools module, so it resolves the same way).
  step etcd bash -c "cd '$tools' && go build -modfile='$modfile' -trimpath -ldflags '-s -w' -o '$tmp/etcd' go.etcd.io/etcd/server/v3"
}
build_kwok() { step kwok env GOBIN="$tmp" go install -trimpath -ldflags '-s -w' "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"; }
build_images() { (cd "$here/images" && go build -trimpath -ldflags '-s -w' -o "$tmp/" ./cmd/...); }
# The bed's own Go tools in tools/k8s/cmd (checkpoint-share, for the double-assigned fault), built against the pinned
# kubelet packages with the Kubernetes build tags; keyed on their own sources, so editing one never rebuilds Kubernetes.
build_k8s_tools() { (cd "$tools" && go build -modfile="$modfile" -trimpath -tags "$k8s_tags" -ldflags '-s -w' -o "$tmp/" ./cmd/...); }

# NVIDIA's device plugin and GPU Feature Discovery (cgo: go-nvml dlopens libnvidia-ml.so.1) from their module at
# NVIDIA_TAG, and node-feature-discovery's master at the version the plugin's chart depends on (tools/nfd/go.mod:
# NFD's go.mod has replace lines, so `go install pkg@version` refuses it), with NFD's CRDs.
NVIDIA_TAG=${NVIDIA_TAG:-v0.19.3}
build_nvidia() {
  step nvidia-device-plugin env CGO_ENABLED=1 GOBIN="$tmp" go install -trimpath -ldflags '-s -w' \
    "github.com/NVIDIA/k8s-device-plugin/cmd/nvidia-device-plugin@$NVIDIA_TAG" "github.com/NVIDIA/k8s-device-plugin/cmd/gpu-feature-discovery@$NVIDIA_TAG"
  step nfd-master bash -c "cd '$here/tools/nfd' && go build -trimpath -ldflags '-s -w' -o '$tmp/nfd-master' sigs.k8s.io/node-feature-discovery/cmd/nfd-master"
  local nfd
  nfd=$(cd "$here/tools/nfd" && go list -m -f '{{.Dir}}' sigs.k8s.io/node-feature-discovery)
  cp "$nfd/deployment/base/nfd-crds/nfd-api-crds.yaml" "$tmp/"
}
# containerd 2.x and its runc shim for the DRA node (tools/containerd/go.mod; dranode.py): CDI for DRA claims.
build_containerd() {
  (cd "$here/tools/containerd" && go build -trimpath -tags "no_btrfs no_devmapper no_zfs" -ldflags '-s -w' -o "$tmp/" \
    github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2)
}
# The mock NVML (mocknvml/build.sh), keyed on its sources.
build_mocknvml() { OUT="$tmp" "$here/mocknvml/build.sh" >&2; }

what=${1:-all}
if [[ $what == all || $what == k8s ]]; then
  group K8S_BIN "$cache/k8s/$K8S_VERSION-$( (cat "$modfile" "${modfile%.mod}.sum"; echo "$ld $k8s_tags") | hash)" build_k8s
fi
if [[ $what == all || $what == k8s-tools ]]; then
  group K8S_TOOLS_BIN "$cache/k8s-tools/$( (cat "$modfile" "${modfile%.mod}.sum" $(find "$tools/cmd" -name '*.go' | sort); echo "$k8s_tags") | hash)" build_k8s_tools
fi
if [[ $what == all || $what == kwok ]]; then
  group KWOK_BIN "$cache/kwok/$KWOK_VERSION-$(echo "$ld" | hash)" build_kwok
fi
if [[ $what == all || $what == images ]]; then
  group IMAGES_BIN "$cache/images/$(hash "$here/images/go.mod" "$here/images/go.sum" $(find "$here/images" -name '*.go' | sort))" build_images
fi
if [[ $what == all || $what == nvidia ]]; then
  group NVIDIA_BIN "$cache/nvidia/$NVIDIA_TAG-$(hash "$here/tools/nfd/go.mod" "$here/tools/nfd/go.sum")" build_nvidia
fi
if [[ $what == all || $what == containerd ]]; then
  group CONTAINERD2_BIN "$cache/containerd2/$(hash "$here/tools/containerd/go.mod" "$here/tools/containerd/go.sum")" build_containerd
fi
if [[ $what == all || $what == mocknvml ]]; then
  group MOCKNVML_LIB "$cache/mocknvml/$(hash "$here/mocknvml/mocknvml.c" "$here/mocknvml/gen_stubs.py" "$here/mocknvml/build.sh")" build_mocknvml
fi
