#!/usr/bin/env bash
# Builds every binary the local test bed needs from Go modules (never from clones) and caches them
# outside the work tree, each group keyed on its pinned versions, sources and build flags:
#   $GPUCONFORM_CACHE (default ~/.cache/gpuconform)/{k8s,kwok,images}/<key>/
# A warm cache makes this a no-op; a warm Go build cache (~/.cache/go-build) turns a rebuild into a relink.
# stdout: one NAME=DIR line per group (K8S_BIN, K8S_TOOLS_BIN, KWOK_BIN, IMAGES_BIN, NVIDIA_BIN, CONTAINERD2_BIN, MOCKNVML_LIB); progress goes to stderr.
#
# Groups that need building run as background jobs, one `go build` per Go module where the binaries share packages
# (the Kubernetes binaries, etcd and the bed's own tools in one; the plugin and GFD in one): a cold build's jobs
# overlap one module's downloads and links with another's compiles. The Kubernetes job, the longest, runs at normal
# priority, the others under `nice`, so they fill the CPU it leaves idle rather than slow it down. Each step logs
# one line when it starts and one with its time when it ends; the go tool's own output goes to
# $GPUCONFORM_CACHE/logs/<job>.log, whose tail is shown when a step fails. Any failed job fails the build (exit 1)
# once the others have finished (their results stay cached). Ctrl-C stops every job.
#
#   build.sh [all|k8s|k8s-tools|kwok|images|nvidia|containerd|mocknvml|nvidia-prev]
# `nvidia-prev` (never part of `all`) builds NVIDIA's device plugin at NVIDIA_PREV_TAG (default v0.18.2), the
# release before NVIDIA_TAG, for `cluster.py plugin-version` (nvidia.py): NVIDIA_PREV_BIN.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${GPUCONFORM_CACHE:-$HOME/.cache/gpuconform}
export GOFLAGS=-buildvcs=false CGO_ENABLED=0
KWOK_VERSION=v0.8.0
start=$SECONDS
logs=$cache/logs
mkdir -p "$logs"
log() { printf '[build %s +%ss] %s\n' "$(date +%H:%M:%S)" "$((SECONDS - start))" "$*" >&2; }
hash() { cat "$@" | sha256sum | cut -c1-12; }

declare -a order=()        # the groups asked for, in output order
declare -A dir_of=()       # group -> its cache directory
declare -A part=()         # group -> the directory its job fills (renamed to dir_of once complete)
declare -A pid_of=()       # job -> pid (also its process group: set -m)
declare -a jobs_started=()
set -m                     # each job in its own process group, so one kill stops the go tool under it too

# want NAME DIR: registers a group for the NAME=DIR line; succeeds when DIR must be built (no .complete in it).
want() {
  order+=("$1"); dir_of[$1]=$2
  if [[ -f "$2/.complete" ]]; then log "$1 cached in $2"; return 1; fi
  part[$1]="$2.partial"
}
# job NAME NICE FUNC GROUP...: runs FUNC in the background (niceness NICE) to fill each GROUP's ${part[GROUP]}, then
# marks each complete and moves it in place. Steps in FUNC log as NAME and write the go tool's output to NAME.log.
job() {
  local name=$1 niceness=$2 fn=$3; shift 3
  (
    job=$name
    [[ $niceness == 0 ]] || renice -n "$niceness" -p "$BASHPID" >/dev/null
    : > "$logs/$name.log"
    local t=$SECONDS g
    for g in "$@"; do rm -rf "${part[$g]}"; mkdir -p "${part[$g]}"; done
    "$fn"
    for g in "$@"; do
      echo "build_seconds=$((SECONDS - t))" > "${part[$g]}/.complete"
      rm -rf "${dir_of[$g]}"; mv "${part[$g]}" "${dir_of[$g]}"
      log "$g ready in ${dir_of[$g]}"
    done
    log "$name: done in $((SECONDS - t))s"
  ) &
  pid_of[$name]=$!
  jobs_started+=("$name")
}
# step WHAT CMD...: one timed build step of the current job; CMD's output goes to the job's log.
step() {
  local what=$1 t=$SECONDS rc; shift
  log "$job: building $what${hint:-} ..."
  if "$@" >>"$logs/$job.log" 2>&1; then
    log "$job: built $what in $((SECONDS - t))s"
  else
    rc=$?
    log "$job: FAILED building $what after $((SECONDS - t))s (exit $rc); the end of $logs/$job.log:"
    tail -n 25 "$logs/$job.log" | sed 's/^/    /' >&2
    return "$rc"
  fi
}
stop_jobs() {
  local j
  for j in "${jobs_started[@]}"; do kill -TERM -- "-${pid_of[$j]}" 2>/dev/null || true; done
}
trap 'log "interrupted: stopping the build jobs"; stop_jobs; exit 130' INT TERM

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
K8S_CMDS=(kubectl kubelet kube-scheduler kube-controller-manager kube-apiserver)
# One `go build` for the Kubernetes binaries, etcd (at the version Kubernetes itself pins: required by the tools
# module, so it resolves the same way) and, when they are not cached, the bed's own Go tools in tools/k8s/cmd
# (checkpoint-share, for the double-assigned fault, built against the pinned kubelet packages): one package graph,
# each shared package compiled once, the links overlapping the compiles. The tools are keyed on their own sources,
# so editing one never rebuilds Kubernetes (that job builds ./cmd/... alone: a relink with a warm Go cache).
k8s_go_build() { (cd "$tools" && go build -modfile="$modfile" -trimpath -tags "$k8s_tags" -ldflags "$ld" -o "$1/" "${@:2}"); }
build_k8s() {
  local hint=" (cold: 12-17 min on 2 cores here, the longest job)" pkgs=() c
  for c in "${K8S_CMDS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  pkgs+=(go.etcd.io/etcd/server/v3)
  [[ -z ${part[K8S_TOOLS_BIN]:-} ]] || pkgs+=(./cmd/...)
  step "${K8S_CMDS[*]} etcd${part[K8S_TOOLS_BIN]:+ and tools/k8s/cmd}" k8s_go_build "${part[K8S_BIN]}" "${pkgs[@]}"
  mv "${part[K8S_BIN]}/server" "${part[K8S_BIN]}/etcd"  # go names a .../server/v3 main package's binary "server"
  if [[ -n ${part[K8S_TOOLS_BIN]:-} ]]; then
    for c in "$tools"/cmd/*/; do c=$(basename "$c"); mv "${part[K8S_BIN]}/$c" "${part[K8S_TOOLS_BIN]}/"; done
  fi
}
build_k8s_tools() { step tools/k8s/cmd k8s_go_build "${part[K8S_TOOLS_BIN]}" ./cmd/...; }
build_kwok() { step kwok env GOBIN="${part[KWOK_BIN]}" go install -trimpath -ldflags '-s -w' "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"; }
build_images() { step "images/cmd (simulated plugin and DRA driver, nvidia-smi, vector-add, pause)" \
  bash -c "cd '$here/images' && go build -trimpath -ldflags '-s -w' -o '${part[IMAGES_BIN]}/' ./cmd/..."; }

# NVIDIA's device plugin and GPU Feature Discovery (cgo: go-nvml dlopens libnvidia-ml.so.1) from their module at
# NVIDIA_TAG (one `go install`: they share most packages), and node-feature-discovery's master at the version the
# plugin's chart depends on (tools/nfd/go.mod: NFD's go.mod has replace lines, so `go install pkg@version` refuses
# it), with NFD's CRDs. Two modules, so two go commands at once.
NVIDIA_TAG=${NVIDIA_TAG:-v0.19.3}
NVIDIA_PREV_TAG=${NVIDIA_PREV_TAG:-v0.18.2}
nvidia_install() {  # DIR TAG CMD...
  local dir=$1 tag=$2 c pkgs=(); shift 2
  for c in "$@"; do pkgs+=("github.com/NVIDIA/k8s-device-plugin/cmd/$c@$tag"); done
  env CGO_ENABLED=1 GOBIN="$dir" go install -trimpath -ldflags '-s -w' "${pkgs[@]}"
}
build_nvidia() {
  local out=${part[NVIDIA_BIN]} nfd p
  step "nvidia-device-plugin gpu-feature-discovery $NVIDIA_TAG" nvidia_install "$out" "$NVIDIA_TAG" nvidia-device-plugin gpu-feature-discovery &
  p=$!
  step nfd-master bash -c "cd '$here/tools/nfd' && go build -trimpath -ldflags '-s -w' -o '$out/nfd-master' sigs.k8s.io/node-feature-discovery/cmd/nfd-master"
  wait "$p"
  nfd=$(cd "$here/tools/nfd" && go list -m -f '{{.Dir}}' sigs.k8s.io/node-feature-discovery)
  cp "$nfd/deployment/base/nfd-crds/nfd-api-crds.yaml" "$out/"
}
# The previous release's plugin only (its DaemonSet is what `cluster.py plugin-version` rolls; GFD stays at NVIDIA_TAG).
build_nvidia_prev() { step "nvidia-device-plugin $NVIDIA_PREV_TAG" nvidia_install "${part[NVIDIA_PREV_BIN]}" "$NVIDIA_PREV_TAG" nvidia-device-plugin; }
# containerd 2.x and its runc shim for the DRA node (tools/containerd/go.mod; dranode.py): CDI for DRA claims.
build_containerd() {
  step "containerd containerd-shim-runc-v2" bash -c "cd '$here/tools/containerd' && go build -trimpath -tags 'no_btrfs no_devmapper no_zfs' \
    -ldflags '-s -w' -o '${part[CONTAINERD2_BIN]}/' github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
}
# The mock NVML (mocknvml/build.sh), keyed on its sources.
build_mocknvml() { step libnvidia-ml.so.1 env OUT="${part[MOCKNVML_LIB]}" "$here/mocknvml/build.sh"; }

what=${1:-all}
case $what in all|k8s|k8s-tools|kwok|images|nvidia|containerd|mocknvml|nvidia-prev) ;;
  *) echo "usage: build.sh [all|k8s|k8s-tools|kwok|images|nvidia|containerd|mocknvml|nvidia-prev]" >&2; exit 2 ;;
esac
is() { [[ $what == all || $what == "$1" ]]; }
k8s_cold=; tools_cold=
if is k8s && want K8S_BIN "$cache/k8s/$K8S_VERSION-$( (cat "$modfile" "${modfile%.mod}.sum"; echo "$ld $k8s_tags") | hash)"; then k8s_cold=1; fi
if is k8s-tools && want K8S_TOOLS_BIN "$cache/k8s-tools/$( (cat "$modfile" "${modfile%.mod}.sum" $(find "$tools/cmd" -name '*.go' | sort); echo "$ld $k8s_tags") | hash)"; then tools_cold=1; fi
if [[ -n $k8s_cold ]]; then
  k8s_groups=(K8S_BIN); [[ -z $tools_cold ]] || k8s_groups+=(K8S_TOOLS_BIN)
  job k8s 0 build_k8s "${k8s_groups[@]}"
elif [[ -n $tools_cold ]]; then
  job k8s-tools 0 build_k8s_tools K8S_TOOLS_BIN
fi
if is kwok && want KWOK_BIN "$cache/kwok/$KWOK_VERSION-$(echo "$ld" | hash)"; then job kwok 10 build_kwok KWOK_BIN; fi
if is images && want IMAGES_BIN "$cache/images/$(hash "$here/images/go.mod" "$here/images/go.sum" $(find "$here/images" -name '*.go' | sort))"; then
  job images 10 build_images IMAGES_BIN
fi
if is nvidia && want NVIDIA_BIN "$cache/nvidia/$NVIDIA_TAG-$(hash "$here/tools/nfd/go.mod" "$here/tools/nfd/go.sum")"; then
  job nvidia 10 build_nvidia NVIDIA_BIN
fi
if is containerd && want CONTAINERD2_BIN "$cache/containerd2/$(hash "$here/tools/containerd/go.mod" "$here/tools/containerd/go.sum")"; then
  job containerd 10 build_containerd CONTAINERD2_BIN
fi
if is mocknvml && want MOCKNVML_LIB "$cache/mocknvml/$(hash "$here/mocknvml/mocknvml.c" "$here/mocknvml/gen_stubs.py" "$here/mocknvml/build.sh")"; then
  job mocknvml 10 build_mocknvml MOCKNVML_LIB
fi
if [[ $what == nvidia-prev ]] && want NVIDIA_PREV_BIN "$cache/nvidia-prev/$NVIDIA_PREV_TAG-$(echo "-s -w" | hash)"; then
  job nvidia-prev 0 build_nvidia_prev NVIDIA_PREV_BIN
fi

failed=()
for j in "${jobs_started[@]}"; do
  rc=0; wait "${pid_of[$j]}" || rc=$?
  [[ $rc == 0 ]] || failed+=("$j (exit $rc)")
done
if (( ${#jobs_started[@]} )); then
  log "${#jobs_started[@]} build job(s) (${jobs_started[*]}) finished in $((SECONDS - start))s${failed[*]:+; FAILED: ${failed[*]}}"
fi
for g in "${order[@]}"; do [[ ! -f "${dir_of[$g]}/.complete" ]] || echo "$g=${dir_of[$g]}"; done
(( ${#failed[@]} == 0 )) || exit 1
