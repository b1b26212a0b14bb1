"""Tools that are not tests: the Kubernetes control plane the scenario tests run against."""
