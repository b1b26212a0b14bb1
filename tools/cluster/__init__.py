"""A real Kubernetes control plane for tests and for trying lwgpu by hand.

`build.sh` builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl
from the Go module proxy into a cache outside the checkout (`binaries`); `controlplane` starts
them on free loopback ports in a temporary directory and stops them on any exit; `fleet`
creates the test fleet's Nodes (API objects only: no kubelet runs here); `install` puts
lwgpu in the cluster as `deploy/` installs it, with this process acting as the kubelet for
the webhook's own pods. `python -m tools.cluster up` does all of it and prints how to point
kubectl at the result.
"""
