package dra

// How the driver hands over to the next pod of its DaemonSet in a rollout (issue 30's rollout rehearsal).
//
// Healthy, it upgrades seamlessly (kubernetes PR #129832, kubelet support since 1.33): it starts its kubelet plugin
// with kubeletplugin.RollingUpdate(<its pod's UID>) (k8s.io/dynamic-resource-allocation v0.37.2
// kubeletplugin/draplugin.go: a registration socket named after the pod, RollingUpdateRegistrarSocketFile, a DRA
// socket dra-<uid>.sock and gRPC calls serialized across instances by a lock file in the plugin directory), so
// that the old and the new pod run side by side (DaemonSet maxSurge 1, maxUnavailable 0), the kubelet holds both
// registered and the slices are never without a driver: the new pod's ResourceSlice controller finds the old
// pod's slices as it would publish them and keeps them.
//
// With the knob no-seamless-upgrade it behaves as a driver without that support: the fixed socket
// <driver>-reg.sock, the DaemonSet replacing its pod with no overlap (maxUnavailable 1, maxSurge 0), and on SIGTERM
// it deletes the node's ResourceSlices of the driver (Unpublish) after stopping the helper, so that the node has
// none from then until the new pod publishes again. The helper's Stop itself deletes nothing (v0.37.2
// draplugin.go Helper.Stop stops the ResourceSlice controller only); the kubelet deletes a driver's slices 30 s
// after its last instance went away unless a new one registers first (kubernetes v1.37.2
// pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go sync, wipeResourceSlices; pkg/kubelet/cm/dra/manager.go
// defaultWipingDelay), so a quick restart of a driver that only stops its helper keeps its slices: the knob's
// explicit delete makes the gap a driver that cleans up after itself on exit leaves.
//
// NVIDIA's driver (kubernetes-sigs/dra-driver-nvidia-gpu HEAD 95932046) has no seamless-upgrade support: its
// kubelet plugin starts the helper without RollingUpdate (cmd/gpu-kubelet-plugin/driver.go; its health check dials
// the fixed <driver>-reg.sock, "TODO: this needs to adapt when seamless upgrades are enabled"), stops it on
// SIGTERM without deleting slices (driver.go Shutdown), and its chart rolls the DaemonSet with maxUnavailable 100%
// and no surge (deployments/helm/dra-driver-nvidia-gpu/values.yaml kubeletPlugin.updateStrategy).

import (
	"context"
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// RollingUpdateUID is the UID to start the kubelet plugin with (kubeletplugin.RollingUpdate; "" = no rolling
// update): the driver's own pod's (POD_UID, the downward API's metadata.uid), none under no-seamless-upgrade.
func RollingUpdateUID(f Faults, podUID string) types.UID {
	if f.NoSeamlessUpgrade {
		return ""
	}
	return types.UID(strings.TrimSpace(podUID))
}

// Unpublish deletes the node's ResourceSlices of this driver and returns their names. A slice already gone is no
// error; the field selector is repeated by hand (a fake client ignores it).
func Unpublish(ctx context.Context, client kubernetes.Interface, node string) ([]string, error) {
	sel := fields.AndSelectors(fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorNodeName, node),
		fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorDriver, DriverName)).String()
	list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list the node's ResourceSlices: %w", err)
	}
	var deleted []string
	for _, s := range list.Items {
		if s.Spec.Driver != DriverName || s.Spec.NodeName == nil || *s.Spec.NodeName != node {
			continue
		}
		err := client.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return deleted, fmt.Errorf("delete ResourceSlice %s: %w", s.Name, err)
		}
		deleted = append(deleted, s.Name)
	}
	return deleted, nil
}
