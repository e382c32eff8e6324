"""opa-kube-sync: replicate Kubernetes resources and policy ConfigMaps into OPA."""
