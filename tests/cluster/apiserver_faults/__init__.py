"""lwgpu's API clients while kube-apiserver and etcd misbehave, on a control plane of their own."""
