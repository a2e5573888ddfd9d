package kubernetes_test

import (
	"context"
	"os"
	"regexp"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/kubernetes"
	"github.com/proctor-evals/proctor/sandbox/kubernetes/internal/kubetest"
)

const workerManifest = "../../examples/distributed/k8s/sandboxed-arith.yaml"

// The Role of the worker manifest is enough for everything the driver
// does (its NetworkPolicy included), under the API server's RBAC: the
// driver runs as that manifest's ServiceAccount.
func TestManifestRoleSuffices(t *testing.T) {
	c := kubetest.Start(t)
	ns := c.Namespace(t)
	admin, err := k8s.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b, err := os.ReadFile(workerManifest)
	if err != nil {
		t.Fatal(err)
	}
	var sa corev1.ServiceAccount
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%s: %v", workerManifest, err)
		}
		switch meta.Kind {
		case "ServiceAccount":
			err = yaml.UnmarshalStrict([]byte(doc), &sa)
		case "Role":
			err = yaml.UnmarshalStrict([]byte(doc), &role)
		case "RoleBinding":
			err = yaml.UnmarshalStrict([]byte(doc), &binding)
		}
		if err != nil {
			t.Fatalf("%s: %s: %v", workerManifest, meta.Kind, err)
		}
	}
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expiry := int64(3600)
	tok, err := admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(c.RESTConfig())
	cfg.BearerToken = tok.Status.Token
	worker, err := k8s.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// RBAC is on: the worker cannot read the namespace's Secrets.
	if _, err := worker.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing Secrets as the worker: %v, want Forbidden", err)
	}

	p, err := kubernetes.New(kubernetes.Options{Config: cfg, Namespace: ns, NodeSelector: c.NodeSelector(), NetworkPolicy: true})
	if err != nil {
		t.Fatal(err)
	}
	d := p.Driver().(*kubernetes.Driver)
	t.Cleanup(func() {
		if err := d.Cleanup(context.Background()); err != nil {
			t.Errorf("Cleanup as the worker: %v", err)
		}
		requireNothingLeft(t, admin, ns, d.RunID())
	})
	env, err := p.Provision(ctx, sandbox.Spec{Image: kubetest.BusyboxImage(t), Files: map[string][]byte{"f": []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	sb, err := env.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if err := sb.WriteFile(ctx, "g", []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := sb.ReadFile(ctx, "f"); err != nil || string(got) != "x" {
		t.Fatalf("ReadFile: %q, %v", got, err)
	}
	if _, err := sb.ReadDir(ctx, ""); err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(ctx, sandbox.Cmd{Args: []string{"sleep", "30"}, Timeout: 200 * time.Millisecond})
	if err != nil || !res.TimedOut {
		t.Fatalf("a timed-out command (its kill an exec of its own): %+v, %v", res, err)
	}
}
