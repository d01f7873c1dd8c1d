#!/usr/bin/env bash
# Builds every binary the local test bed needs from Go modules (never from clones) and caches them
# outside the work tree, each group keyed on its pinned versions, sources and build flags:
#   $GPUCONFORM_CACHE (default ~/.cache/gpuconform)/{k8s,kwok,images}/<key>/
# A warm cache makes this a no-op; a warm Go build cache (~/.cache/go-build) turns a rebuild into a relink.
# stdout: one NAME=DIR line per group (K8S_BIN, K8S_TOOLS_BIN, KWOK_BIN, IMAGES_BIN); progress goes to stderr.
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
  log "building $file (a cold build of the Kubernetes binaries took about 8 min on 2 cores here) ..."
  "$@"
  log "built $file in $((SECONDS - t))s"
}

tools=$here/tools/k8s
K8S_VERSION=$(cd "$tools" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
# Stamp versions like hack/lib/version.sh does; buildDate is fixed so relinks are reproducible.
ld="-s -w"
for kv in gitVersion=$K8S_VERSION gitMajor=1 gitMinor=$minor gitTreeState=clean \
          gitCommit=0000000000000000000000000000000000000000 buildDate=2000-01-01T00:00:00Z; do
  ld="$ld -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
done
k8s_tags=selinux,notest
k8s_cmd() { (cd "$tools" && go build -trimpath -tags "$k8s_tags" -ldflags "$ld" -o "$tmp/$1" "k8s.io/kubernetes/cmd/$1"); }
build_k8s() {
  # Node-side pieces first: a usable kubelet/kubectl early, and the apiserver link reuses their compile cache.
  for c in kubectl kubelet kube-scheduler kube-controller-manager kube-apiserver; do step "$c" k8s_cmd "$c"; done
  # etcd at the version Kubernetes itself pins (required by the tools module, so it resolves the same way).
  step etcd bash -c "cd '$tools' && go build -trimpath -ldflags '-s -w' -o '$tmp/etcd' go.etcd.io/etcd/server/v3"
}
build_kwok() { step kwok env GOBIN="$tmp" go install -trimpath -ldflags '-s -w' "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"; }
build_images() { (cd "$here/images" && go build -trimpath -ldflags '-s -w' -o "$tmp/" ./cmd/...); }
# The bed's own Go tools in tools/k8s/cmd (checkpoint-share, for the double-assigned fault), built against the pinned
# kubelet packages with the Kubernetes build tags; keyed on their own sources, so editing one never rebuilds Kubernetes.
build_k8s_tools() { (cd "$tools" && go build -trimpath -tags "$k8s_tags" -ldflags '-s -w' -o "$tmp/" ./cmd/...); }

what=${1:-all}
if [[ $what == all || $what == k8s ]]; then
  group K8S_BIN "$cache/k8s/$K8S_VERSION-$( (cat "$tools/go.mod" "$tools/go.sum"; echo "$ld $k8s_tags") | hash)" build_k8s
fi
if [[ $what == all || $what == k8s-tools ]]; then
  group K8S_TOOLS_BIN "$cache/k8s-tools/$( (cat "$tools/go.mod" "$tools/go.sum" $(find "$tools/cmd" -name '*.go' | sort); echo "$k8s_tags") | hash)" build_k8s_tools
fi
if [[ $what == all || $what == kwok ]]; then
  group KWOK_BIN "$cache/kwok/$KWOK_VERSION-$(echo "$ld" | hash)" build_kwok
fi
if [[ $what == all || $what == images ]]; then
  group IMAGES_BIN "$cache/images/$(hash "$here/images/go.mod" "$here/images/go.sum" $(find "$here/images" -name '*.go' | sort))" build_images
fi
