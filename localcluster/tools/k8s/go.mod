// The bed's Kubernetes build module. Its requirements live in versions/<release>.mod (+ .sum), one per Kubernetes
// release the bed can run, written by pin.sh; build.sh builds with -modfile=versions/$K8S_VERSION.mod. This file
// only marks the module root (`go build -modfile` still needs one) and is not read.
module gpuconform.local/k8stools

go 1.26
