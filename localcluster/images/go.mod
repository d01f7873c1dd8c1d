// Images for the local GPU conformance test bed (see ../build.sh): a device-plugin v1beta1
// server over simulated hardware, nvidia-smi and vectoradd stand-ins, and a static pause.
module gpuconform.local/images

go 1.26

require (
	google.golang.org/grpc v1.72.1
	k8s.io/kubelet v0.34.4
	sigs.k8s.io/yaml v1.6.0
)

require (
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/net v0.38.0 // indirect
	golang.org/x/sys v0.31.0 // indirect
	golang.org/x/text v0.23.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20250303144028-a0af3efb3deb // indirect
	google.golang.org/protobuf v1.36.5 // indirect
)
