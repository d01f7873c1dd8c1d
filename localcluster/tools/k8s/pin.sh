#!/usr/bin/env bash
# Writes versions/<VERSION>.mod and .sum: the module file that pins k8s.io/kubernetes VERSION and the staging
# modules it carries (k8s.io/kubernetes requires them at v0.0.0 and resolves them with ./staging replace lines that
# a consumer ignores; each is mapped here to its v0.<minor>.<patch> tag, read from that version's own go.mod, since
# the list changes between minors: 1.37 added k8s.io/cri-streaming and k8s.io/streaming). build.sh builds with
# `go build -modfile=versions/$K8S_VERSION.mod`. Usage: tools/k8s/pin.sh v1.37.2 (needs the Go module proxy).
set -euo pipefail
ver=${1:?usage: pin.sh vMAJOR.MINOR.PATCH}
[[ $ver =~ ^v1\.[0-9]+\.[0-9]+$ ]] || { echo "pin.sh: $ver is not a Kubernetes release version (v1.N.M)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
staging=v0.${ver#v1.}
gomod=$(cd /tmp && go mod download -json "k8s.io/kubernetes@$ver" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
goline=$(grep -m1 '^go ' "$gomod")
godebug=$(grep -m1 '^godebug ' "$gomod" || true)
out=$here/versions/$ver.mod
{
  echo "// Pins k8s.io/kubernetes $ver and its staging modules for the bed's build (written by ../pin.sh $ver)."
  echo "module gpuconform.local/k8stools"
  echo
  echo "$goline"
  [[ -z $godebug ]] || echo "$godebug"
  echo
  echo "replace ("
  grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$gomod" | awk -v v="$staging" '{printf "\t%s => %s %s\n", $1, $1, v}'
  echo ")"
  echo
  echo "tool ("
  for t in go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
           k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kubelet; do
    printf '\t%s\n' "$t"
  done
  echo ")"
  echo
  echo "require k8s.io/kubernetes $ver"
} > "$out"
rm -f "${out%.mod}.sum"
(cd "$here" && go mod tidy -modfile="$out")
echo "$out: k8s.io/kubernetes $ver, etcd $(grep -m1 'go.etcd.io/etcd/server/v3 ' "$out" | awk '{print $2}')"
