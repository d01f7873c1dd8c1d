"""The bed's control plane: etcd, kube-apiserver, kube-controller-manager and kube-scheduler (processes on this
machine, started by pid), and the one rule in-cluster clients need in place of kube-proxy (service_vip). The DRA
faults restart the controller manager and the scheduler with other flags (dranode.py)."""

from __future__ import annotations

import shlex

from bed import PKI, PORTS, STATE, Bins, Kubectl, sh, start, wait_for


def start_control_plane(bins: Bins, ip: str, kubectl: Kubectl) -> None:
    start("etcd", [bins["etcd"], "--name=gpuconform", f"--data-dir={STATE / 'etcd'}",
                   f"--listen-client-urls=http://127.0.0.1:{PORTS['etcd']}",
                   f"--advertise-client-urls=http://127.0.0.1:{PORTS['etcd']}",
                   f"--listen-peer-urls=http://127.0.0.1:{PORTS['etcd-peer']}",
                   f"--initial-advertise-peer-urls=http://127.0.0.1:{PORTS['etcd-peer']}",
                   f"--initial-cluster=gpuconform=http://127.0.0.1:{PORTS['etcd-peer']}",
                   "--quota-backend-bytes=2147483648", "--log-level=warn"])
    p = str(PKI)
    start("kube-apiserver", [
        bins["kube-apiserver"], f"--etcd-servers=http://127.0.0.1:{PORTS['etcd']}",
        f"--secure-port={PORTS['kube-apiserver']}", f"--advertise-address={ip}",
        f"--tls-cert-file={p}/apiserver.crt", f"--tls-private-key-file={p}/apiserver.key",
        f"--client-ca-file={p}/ca.crt",
        "--authorization-mode=Node,RBAC", "--anonymous-auth=false",
        "--enable-admission-plugins=NodeRestriction,PodSecurity",
        f"--service-account-key-file={p}/sa.pub", f"--service-account-signing-key-file={p}/sa.key",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
        # The apiserver reaches kubelets (logs, exec, metrics, configz) with a client cert and verifies them.
        f"--kubelet-client-certificate={p}/apiserver-kubelet-client.crt",
        f"--kubelet-client-key={p}/apiserver-kubelet-client.key",
        f"--kubelet-certificate-authority={p}/ca.crt",
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        "--profiling=false", "--v=1"])
    wait_for("kube-apiserver /readyz", lambda: kubectl("get", "--raw", "/readyz").strip() == "ok", 120,
             "kube-apiserver")
    # What kubeadm does: the apiserver's kubelet-client identity gets the kubelet API, nothing more.
    kubectl.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "gpuconform:apiserver-kubelet-client"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": "system:kubelet-api-admin"},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                 "name": "kube-apiserver-kubelet-client"}]})
    start_controller_manager(bins)
    start_scheduler(bins)


def start_scheduler(bins: Bins, gates: str = "") -> None:
    """kube-scheduler, with the feature gates in `gates` ("A=false,B=false": a fault, `dra fault taint-ignored` runs
    it without DRADeviceTaints)."""
    p = str(PKI)
    start("kube-scheduler", [
        bins["kube-scheduler"], f"--kubeconfig={p}/scheduler.kubeconfig",
        f"--authentication-kubeconfig={p}/scheduler.kubeconfig",
        f"--authorization-kubeconfig={p}/scheduler.kubeconfig",
        "--leader-elect=false", "--bind-address=127.0.0.1", "--profiling=false", "--v=1",
        *([f"--feature-gates={gates}"] if gates else [])])


def start_controller_manager(bins: Bins, off: tuple[str, ...] = ()) -> None:
    """kube-controller-manager with every controller but nodeipam (the bed has no pod CIDRs) and those in `off`
    (a fault: `dra fault claim-controller-off` runs it without resourceclaim-controller)."""
    p = str(PKI)
    start("kube-controller-manager", [
        bins["kube-controller-manager"], f"--kubeconfig={p}/controller-manager.kubeconfig",
        f"--authentication-kubeconfig={p}/controller-manager.kubeconfig",
        f"--authorization-kubeconfig={p}/controller-manager.kubeconfig",
        "--leader-elect=false", "--bind-address=127.0.0.1", "--use-service-account-credentials=true",
        f"--service-account-private-key-file={p}/sa.key", f"--root-ca-file={p}/ca.crt",
        f"--cluster-signing-cert-file={p}/ca.crt", f"--cluster-signing-key-file={p}/ca.key",
        "--controllers=" + ",".join(("*", "-nodeipam", *(f"-{c}" for c in off))), "--profiling=false", "--v=1"])


SERVICE_VIP = "10.0.0.1"  # the `kubernetes` Service's ClusterIP: the first address of --service-cluster-ip-range
VIP_RULE = ["-t", "nat", "PREROUTING", "-d", f"{SERVICE_VIP}/32", "-p", "tcp", "--dport", "443",
            "-m", "comment", "--comment", "gpuconform-kubernetes-service", "-j", "DNAT"]


def service_vip(ip: str, on: bool = True) -> None:
    """What kube-proxy does for the `kubernetes` Service, which in-cluster clients (client-go's InClusterConfig:
    KUBERNETES_SERVICE_HOST/PORT, set by the kubelet) dial: a DNAT of <VIP>:443 to the API server, for traffic
    from pods (routed through the host from the CNI bridge). The bed runs no kube-proxy; GFD and NFD's master,
    unmodified, need this."""
    # Any earlier rule of ours goes first (the node's address may have changed since), then this one is added.
    for line in sh("iptables", "-t", "nat", "-S", "PREROUTING", check=False).stdout.splitlines():
        if "gpuconform-kubernetes-service" in line and line.startswith("-A "):
            sh("iptables", "-t", "nat", "-D", *shlex.split(line)[1:], check=False)
    if on:
        sh("iptables", "-t", "nat", "-A", *VIP_RULE[2:], "--to-destination", f"{ip}:{PORTS['kube-apiserver']}")
