package dra

import (
	"context"
	"reflect"
	"sort"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestRollingUpdateIsOnWithThePodUIDUnlessTheKnobTurnsItOff(t *testing.T) {
	f, err := ParseFaults("no-seamless-upgrade")
	if err != nil || !f.NoSeamlessUpgrade {
		t.Fatalf("knob: %+v %v", f, err)
	}
	if got := RollingUpdateUID(Faults{}, " 5f0c-uid\n"); got != "5f0c-uid" {
		t.Fatalf("healthy: %q", got)
	}
	if got := RollingUpdateUID(Faults{}, ""); got != "" {
		t.Fatalf("no POD_UID: %q", got)
	}
	if got := RollingUpdateUID(f, "5f0c-uid"); got != "" {
		t.Fatalf("no-seamless-upgrade: %q", got)
	}
}

func TestUnpublishDeletesOnlyThisNodesSlicesOfTheDriver(t *testing.T) {
	slice := func(name, driver, node string) *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.ResourceSliceSpec{Driver: driver, Pool: resourceapi.ResourcePool{Name: node}}}
		if node != "" {
			s.Spec.NodeName = &node
		}
		return s
	}
	client := fake.NewClientset(slice("mine-0", DriverName, "gpu-node-dra"), slice("mine-1", DriverName, "gpu-node-dra"),
		slice("nic", "nic.example.com", "gpu-node-dra"), slice("other-node", DriverName, "gpu-node-0"),
		slice("network", DriverName, ""))
	ctx := context.Background()
	deleted, err := Unpublish(ctx, client, "gpu-node-dra")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(deleted)
	if !reflect.DeepEqual(deleted, []string{"mine-0", "mine-1"}) {
		t.Fatalf("deleted %v", deleted)
	}
	left, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range left.Items {
		names = append(names, s.Name)
	}
	sort.Strings(names)
	if !reflect.DeepEqual(names, []string{"network", "nic", "other-node"}) {
		t.Fatalf("left %v", names)
	}
	if deleted, err := Unpublish(ctx, client, "gpu-node-dra"); err != nil || len(deleted) != 0 {
		t.Fatalf("again: %v %v", deleted, err)
	}
}
