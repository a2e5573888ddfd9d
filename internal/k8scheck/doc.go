// Package k8scheck checks the Kubernetes manifests of
// examples/distributed/k8s against the Kubernetes API types, with strict
// decoding (an unknown or misspelt field fails), and checks that they fit
// together: the Indexed Job's shards write where the merge reads, the
// workers join the coordinator's Service, the token comes from the Secret,
// the sandbox workers' ServiceAccount is bound to the Role the Kubernetes
// sandbox driver needs. No cluster runs here (sandbox/kubernetes runs the
// driver under that Role on a real API server); this is what can be
// checked without one.
//
// It is a module of its own so that proctor's module never requires the
// Kubernetes API packages. CI runs it: (cd internal/k8scheck && go test ./...).
package k8scheck
