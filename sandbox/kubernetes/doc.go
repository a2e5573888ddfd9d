// Package kubernetes is the sandbox driver over a Kubernetes cluster,
// through k8s.io/client-go: every environment and every episode is a pod
// of its own, and everything happens through the API server (pods/exec);
// the process running it needs no Docker, no node access and no shared
// volume, only a Role in one namespace.
package kubernetes
