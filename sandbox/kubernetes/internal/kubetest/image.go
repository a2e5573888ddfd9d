package kubetest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/proctor-evals/proctor/sandbox/docker"
)

// busyboxImage is the tag of the image BusyboxImage builds.
const busyboxImage = "proctor-kubetest-busybox:latest"

var (
	imageOnce sync.Once
	imageErr  string
)

// BusyboxImage builds once per test binary, through the Docker API, a
// local image FROM scratch with the host's static busybox and its applets
// (sh, cat, tar, stat, mkdir, kill, sleep…) in /bin, /tmp and /workspace
// (see [docker.BuildBusyboxImage]), and returns its name. It skips tb when
// /bin/busybox (Debian's busybox-static) or Docker is missing, failing
// instead with PROCTOR_REQUIRE_TOOLS=1 or PROCTOR_REQUIRE_DOCKER=1.
func BusyboxImage(tb testing.TB) string {
	tb.Helper()
	imageOnce.Do(func() {
		if _, err := os.Stat(docker.BusyboxPath); err != nil {
			imageErr = "kubetest: no busybox-static binary at " + docker.BusyboxPath + " (apt-get install busybox-static): " + err.Error()
			return
		}
		cli, err := docker.NewClient()
		if err != nil {
			imageErr = "kubetest: no Docker client: " + err.Error()
			return
		}
		defer cli.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := docker.BuildBusyboxImage(ctx, cli, busyboxImage, docker.BusyboxPath); err != nil {
			imageErr = "kubetest: building the busybox image: " + err.Error()
		}
	})
	if imageErr != "" {
		if os.Getenv("PROCTOR_REQUIRE_TOOLS") == "1" || os.Getenv("PROCTOR_REQUIRE_DOCKER") == "1" || os.Getenv("PROCTOR_REQUIRE_KUBE") == "1" {
			tb.Fatalf("required but %s", imageErr)
		}
		tb.Skip(imageErr)
	}
	return busyboxImage
}
