package kubetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestExpand checks the kubelet's $(VAR) expansion of command and args.
func TestExpand(t *testing.T) {
	got := expand([]string{"/logs/$(JOB_UID)/run.jsonl", "$(MISSING)", "$$(JOB_UID)", "a$", "$(A)$(JOB_UID)", "$(unclosed"}, []string{"JOB_UID=u-1", "A=x=y"})
	want := []string{"/logs/u-1/run.jsonl", "$(MISSING)", "$(JOB_UID)", "a$", "x=yu-1", "$(unclosed"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("expand (-want +got):\n%s", d)
	}
	if expand(nil, nil) != nil {
		t.Error("expand(nil) is not nil: the image's entrypoint would be replaced")
	}
}
