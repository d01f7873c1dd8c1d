#!/usr/bin/env bash
# Builds every binary the local test bed needs from Go modules (never from clones) and caches them
# outside the work tree, each group keyed on its pinned versions, sources and build flags:
#   $GPUCONFORM_CACHE (default ~/.cache/gpuconform)/{k8s,k8s-tools,kwok,nfd,nvidia,containerd2,images,mocknvml}/<key>/
# A warm cache makes this a no-op; a warm Go build cache (~/.cache/go-build) turns a rebuild into a relink.
# stdout: one NAME=DIR line per group (K8S_BIN, K8S_TOOLS_BIN, KWOK_BIN, NFD_BIN, NVIDIA_BIN, CONTAINERD2_BIN,
# IMAGES_BIN, MOCKNVML_LIB) as soon as that group is ready: at once when cached, else when its step ends. So a reader
# can start what needs one group while later ones still build (bed.py's Bins: cluster.py up starts the control plane
# while the bed's other tools compile). Progress goes to stderr.
#
# Three Go modules, which share their client libraries at the same versions so that each is compiled once, built one
# after another in one job (`go`), in the order cluster.py up needs them: the Kubernetes binaries, etcd and the bed's
# own tools (tools/k8s, Kubernetes's own pins: the control plane); the simulated plugin and DRA driver with their
# images' binaries (images/); NVIDIA's plugin and GFD, NFD's master (with images/, the device-plugin node's images),
# containerd 2 (the DRA node) and kwok (tools/bed, pinned to the Kubernetes build's versions). Under `nice` beside it:
# the later modules' downloads while Kubernetes compiles, and the mock NVML (C). Each step logs one line when it
# starts and one with its time when it ends; the go tool's own output goes to $GPUCONFORM_CACHE/logs/<job>.log, whose
# tail is shown when a step fails. A failed step fails the build (exit 1) once the rest has finished (what was built
# stays cached). Ctrl-C stops every job.
#
#   build.sh [all|k8s|k8s-tools|bedtools|images|mocknvml|nvidia-prev]
# `nvidia-prev` (never part of `all`) builds NVIDIA's device plugin at NVIDIA_PREV_TAG (default v0.18.2), the
# release before the one tools/bed pins, for `cluster.py plugin-version` (nvidia.py): NVIDIA_PREV_BIN.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${GPUCONFORM_CACHE:-$HOME/.cache/gpuconform}
# Every go command here: no VCS stamping, no local paths in binaries, and no DWARF from the compiler (the links strip it
# anyway, -ldflags -s -w; generating it cost about 12% of a cold build's compile time here).
export GOFLAGS="-buildvcs=false -trimpath -gcflags=all=-dwarf=false" CGO_ENABLED=0
start=$SECONDS
logs=$cache/logs
mkdir -p "$logs"
log() { printf '[build %s +%ss] %s\n' "$(date +%H:%M:%S)" "$((SECONDS - start))" "$*" >&2; }
hash() { cat "$@" | sha256sum | cut -c1-12; }

declare -A dir_of=()       # group -> its cache directory
declare -A part=()         # group -> the directory its job fills (renamed to dir_of once complete)
declare -A pid_of=()       # job -> pid (also its process group: set -m)
declare -a jobs_started=()
set -m                     # each job in its own process group, so one kill stops the go tool under it too

# want NAME DIR: registers a group; when DIR is complete, says NAME=DIR at once and fails; else succeeds (build it).
want() {
  dir_of[$1]=$2
  if [[ -f "$2/.complete" ]]; then log "$1 cached in $2"; echo "$1=$2"; return 1; fi
  part[$1]="$2.partial"
}
# job NAME NICE STAGE...: runs its stages one after another in the background (niceness NICE); a STAGE is
# FUNC:GROUP[,GROUP...], FUNC filling each GROUP's ${part[GROUP]}; once FUNC succeeds its groups are marked complete
# and moved in place, so a later stage's failure keeps them. A failed stage fails the job, after the stages behind
# it have run. Steps log as NAME and write the go tool's output to NAME.log.
job() {
  local name=$1 niceness=$2; shift 2
  (
    job=$name
    [[ $niceness == 0 ]] || renice -n "$niceness" -p "$BASHPID" >/dev/null
    : > "$logs/$name.log"
    local t=$SECONDS st fn groups g rc=0
    for st in "$@"; do
      fn=${st%%:*}; IFS=, read -ra groups <<< "${st#*:}"
      for g in "${groups[@]}"; do rm -rf "${part[$g]}"; mkdir -p "${part[$g]}"; done
      local ts=$SECONDS st_rc
      set +e; ( set -e; "$fn" ); st_rc=$?; set -e  # (set -e would be ignored under `if`)
      if (( st_rc )); then rc=$st_rc; continue; fi
      for g in "${groups[@]}"; do
        echo "build_seconds=$((SECONDS - ts))" > "${part[$g]}/.complete"
        rm -rf "${dir_of[$g]}"; mv "${part[$g]}" "${dir_of[$g]}"
        log "$g ready in ${dir_of[$g]}"
        echo "$g=${dir_of[$g]}"
      done
    done
    log "$name: done in $((SECONDS - t))s"
    exit "$rc"
  ) &
  pid_of[$name]=$!
  jobs_started+=("$name")
}
# step WHAT CMD...: one timed build step of the current job; CMD's output goes to the job's log.
step() {
  local what=$1 t=$SECONDS rc; shift
  log "$job: ${verb:-building} $what${hint:-} ..."
  if "$@" >>"$logs/$job.log" 2>&1; then
    log "$job: ${verbed:-built} $what in $((SECONDS - t))s"
  else
    rc=$?
    log "$job: FAILED ${verb:-building} $what after $((SECONDS - t))s (exit $rc); the end of $logs/$job.log:"
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
k8s_go_build() { (cd "$tools" && go build -modfile="$modfile" -tags "$k8s_tags" -ldflags "$ld" -o "$1/" "${@:2}"); }
build_k8s() {
  local hint=" (cold: 5.5-6 min on 2 cores here, the longest step)" pkgs=() c
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
build_images() { step "images/cmd (simulated plugin and DRA driver, nvidia-smi, vector-add, pause)" \
  bash -c "cd '$here/images' && go build -ldflags '-s -w' -o '${part[IMAGES_BIN]}/' ./cmd/..."; }

# The bed's other Go tools, from one module pinned to the Kubernetes build's own library versions (tools/bed/go.mod,
# written by tools/bed/pin.sh), one `go build` each, in the order cluster.py up needs them:
# - NVIDIA's device plugin and GPU Feature Discovery (cgo: go-nvml dlopens libnvidia-ml.so.1), with Go's own resolver
#   and user lookup (netgo, osusergo: what the pure-Go builds use). Under plain cgo, net compiles differently and every
#   package above it compiled again (48 s of a cold build here); with the tags, net's export data is the pure-Go
#   build's, and only the plugin's packages compile (with what it shares with the steps after it). The binaries still
#   link libc, for dlopen.
# - node-feature-discovery's master (the release NVIDIA's chart depends on), with its CRDs.
# - containerd 2 with its runc shim: the DRA node's runtime (CDI for DRA claims); the largest, 40-100 s cold.
# - kwok, last: the bed starts the kwok nodes last, so the DRA node comes up while it compiles.
# Each tool's own release pins other client-library versions, so built apart, k8s.io/api, apimachinery, client-go and
# what lies under them were compiled once per tool; here they come from the Kubernetes build's compile cache, and a
# later step from an earlier one's.
bedtools=$here/tools/bed
bedtools_build() { local cgo=$1 out=$2; shift 2; (cd "$bedtools" && CGO_ENABLED=$cgo go build -ldflags '-s -w' -o "$out/" "$@"); }
build_nfd() {
  local nfd
  step nfd-master bedtools_build 0 "${part[NFD_BIN]}" sigs.k8s.io/node-feature-discovery/cmd/nfd-master
  nfd=$(cd "$bedtools" && go list -m -f '{{if .Replace}}{{.Replace.Dir}}{{else}}{{.Dir}}{{end}}' sigs.k8s.io/node-feature-discovery)
  cp "$nfd/deployment/base/nfd-crds/nfd-api-crds.yaml" "${part[NFD_BIN]}/"
}
build_containerd2() {
  step "containerd containerd-shim-runc-v2" bedtools_build 0 "${part[CONTAINERD2_BIN]}" -tags no_btrfs,no_devmapper,no_zfs \
    github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
}
build_kwok() { step kwok bedtools_build 0 "${part[KWOK_BIN]}" sigs.k8s.io/kwok/cmd/kwok; }
nvidia_tags=netgo,osusergo
build_nvidia() {
  step "nvidia-device-plugin gpu-feature-discovery (cgo)" bedtools_build 1 "${part[NVIDIA_BIN]}" -tags "$nvidia_tags" \
    github.com/NVIDIA/k8s-device-plugin/cmd/nvidia-device-plugin github.com/NVIDIA/k8s-device-plugin/cmd/gpu-feature-discovery
}
NVIDIA_PREV_TAG=${NVIDIA_PREV_TAG:-v0.18.2}
# The previous release's plugin only, by `go install` at its own release's pins (its DaemonSet is what
# `cluster.py plugin-version` rolls; GFD stays at the release tools/bed pins).
build_nvidia_prev() {
  step "nvidia-device-plugin $NVIDIA_PREV_TAG" env CGO_ENABLED=1 GOBIN="${part[NVIDIA_PREV_BIN]}" \
    go install -ldflags '-s -w' "github.com/NVIDIA/k8s-device-plugin/cmd/nvidia-device-plugin@$NVIDIA_PREV_TAG"
}
# The mock NVML (mocknvml/build.sh), keyed on its sources.
build_mocknvml() { step libnvidia-ml.so.1 env OUT="${part[MOCKNVML_LIB]}" "$here/mocknvml/build.sh"; }

what=${1:-all}
case $what in all|k8s|k8s-tools|bedtools|images|mocknvml|nvidia-prev) ;;
  *) echo "usage: build.sh [all|k8s|k8s-tools|bedtools|images|mocknvml|nvidia-prev]" >&2; exit 2 ;;
esac
is() { [[ $what == all || $what == "$1" ]]; }
# The cold Go builds run in one job, one after another, the Kubernetes build first: the bed's tools and images use
# the same client libraries at the same versions, so after it they compile only what it did not. Side by side they
# took longer (measured: the three after Kubernetes took 226 s at once against 191 s one after another, 2 cores): two
# builds at once compile a shared package twice, and on 2 cores there is no idle CPU for them to fill. The modules
# they need download beside the Kubernetes build, under nice (network, not CPU), in a job of their own.
stages=()
prefetch=()
k8s_cold=; tools_cold=
if is k8s && want K8S_BIN "$cache/k8s/$K8S_VERSION-$( (cat "$modfile" "${modfile%.mod}.sum"; echo "$ld $k8s_tags $GOFLAGS") | hash)"; then k8s_cold=1; fi
if is k8s-tools && want K8S_TOOLS_BIN "$cache/k8s-tools/$( (cat "$modfile" "${modfile%.mod}.sum" $(find "$tools/cmd" -name '*.go' | sort); echo "$ld $k8s_tags $GOFLAGS") | hash)"; then tools_cold=1; fi
if [[ -n $k8s_cold ]]; then
  stages+=("build_k8s:K8S_BIN${tools_cold:+,K8S_TOOLS_BIN}")
elif [[ -n $tools_cold ]]; then
  stages+=(build_k8s_tools:K8S_TOOLS_BIN)
fi
if is images && want IMAGES_BIN "$cache/images/$( (cat "$here/images/go.mod" "$here/images/go.sum" $(find "$here/images" -name '*.go' | sort); echo "$GOFLAGS") | hash)"; then
  stages+=(build_images:IMAGES_BIN); prefetch+=("$here/images")
fi
if is bedtools; then
  key=$( (cat "$bedtools/go.mod" "$bedtools/go.sum"; echo "$GOFLAGS") | hash)
  bt_cold=
  if want NVIDIA_BIN "$cache/nvidia/$(echo "$key $nvidia_tags" | hash)"; then stages+=(build_nvidia:NVIDIA_BIN); bt_cold=1; fi
  if want NFD_BIN "$cache/nfd/$key"; then stages+=(build_nfd:NFD_BIN); bt_cold=1; fi
  if want CONTAINERD2_BIN "$cache/containerd2/$key"; then stages+=(build_containerd2:CONTAINERD2_BIN); bt_cold=1; fi
  if want KWOK_BIN "$cache/kwok/$key"; then stages+=(build_kwok:KWOK_BIN); bt_cold=1; fi
  [[ -z $bt_cold ]] || prefetch+=("$bedtools")
fi
prefetch_modules() {
  local d verb=downloading verbed=downloaded
  for d in "${prefetch[@]}"; do step "the modules of ${d#"$here/"}" bash -c "cd '$d' && go mod download"; done
}
if [[ -n $k8s_cold ]] && (( ${#prefetch[@]} )); then job download 10 prefetch_modules:; fi
(( ${#stages[@]} == 0 )) || job go 0 "${stages[@]}"
if is mocknvml && want MOCKNVML_LIB "$cache/mocknvml/$(hash "$here/mocknvml/mocknvml.c" "$here/mocknvml/gen_stubs.py" "$here/mocknvml/build.sh")"; then
  job mocknvml 10 build_mocknvml:MOCKNVML_LIB
fi
if [[ $what == nvidia-prev ]] && want NVIDIA_PREV_BIN "$cache/nvidia-prev/$NVIDIA_PREV_TAG-$(echo "-s -w $GOFLAGS" | hash)"; then
  job nvidia-prev 0 build_nvidia_prev:NVIDIA_PREV_BIN
fi

failed=()
for j in "${jobs_started[@]}"; do
  rc=0; wait "${pid_of[$j]}" || rc=$?
  [[ $rc == 0 ]] || failed+=("$j (exit $rc)")
done
if (( ${#jobs_started[@]} )); then
  log "${#jobs_started[@]} build job(s) (${jobs_started[*]}) finished in $((SECONDS - start))s${failed[*]:+; FAILED: ${failed[*]}}"
fi
(( ${#failed[@]} == 0 )) || exit 1
