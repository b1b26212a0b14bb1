# Findings of `trivy config` that are choices, each with its reason: passed as
# `trivy config --ignore-policy deploy/base/trivy-ignore.rego` (tests/deploy/test_scanners.py).
# Trivy reads no annotation or comment of a Kubernetes manifest (inline ignores are for
# Terraform, Dockerfiles and Helm sources), so each rule names the object in the finding's
# message: the same check on any other object still fails.
package trivy

import rego.v1

default ignore := false

# The certificate installer stores the serving certificate and key in Secret lwgpu-webhook-tls
# (get and update by name; create cannot be narrowed by name: see certs.yaml).
ignore if {
	input.ID == "KSV-0113"
	contains(input.Message, "Role 'lwgpu-certs'")
}

# It patches caBundle into lwgpu-mutate and lwgpu-validate, and only those (resourceNames).
ignore if {
	input.ID == "KSV-0114"
	contains(input.Message, "ClusterRole 'lwgpu-certs'")
}

# ghcr.io, where the image is published, is not on trivy's built-in list of trusted registries;
# set image.repository (chart) or kustomize images to your own mirror.
ignore if {
	input.ID == "KSV-0125"
	regex.match(`^Container (webhook|policy-sync|labeller|certs) in \w+ lwgpu-(webhook|labeller|certs|certs-rotate) `, input.Message)
}
