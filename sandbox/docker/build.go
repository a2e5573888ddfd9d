package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/moby/moby/client"

	"github.com/proctor-evals/proctor/sandbox/driver"
)

// BusyboxPath is where Debian's busybox-static package installs its binary.
const BusyboxPath = "/bin/busybox"

// BuildBusyboxImage builds and tags a minimal image with no registry: FROM
// scratch, the static busybox binary found at busybox on the host (e.g.
// [BusyboxPath]) and its applets (sh, cat, ls, sleep, kill, wget…) linked
// into /bin, plus /tmp and /workspace. Tests and examples use it where no
// image can be pulled.
func BuildBusyboxImage(ctx context.Context, cli *client.Client, tag, busybox string) error {
	bin, err := os.ReadFile(busybox)
	if err != nil {
		return fmt.Errorf("docker: busybox image: %w", err)
	}
	dockerfile := []byte(`FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "sh", "-c", "/bin/busybox --install -s /bin && mkdir -p /tmp /workspace && chmod 1777 /tmp"]
ENV PATH=/bin
`)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"Dockerfile", 0o644, dockerfile}, {"busybox", 0o755, bin}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data))}); err != nil {
			return fmt.Errorf("docker: busybox image: %w", err)
		}
		tw.Write(f.data)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("docker: busybox image: %w", err)
	}
	if err := build(ctx, cli, &buf, tag); err != nil {
		return fmt.Errorf("docker: busybox image: %w", err)
	}
	return nil
}

// BuildImage builds the Dockerfile of the directory dir, with dir as the
// build context, and tags the image tag: how a task that ships its
// environment as a Dockerfile (a Harbor task's environment/, say) gets
// the image its Spec.Image names. The engine's builder runs it, so a
// FROM must name an image the engine has or can pull. A failed step is
// an error with the builder's message.
func BuildImage(ctx context.Context, cli *client.Client, dir, tag string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if _, err := driver.AddTree(tw, dir, ""); err != nil {
		return fmt.Errorf("docker: build %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("docker: build %s: %w", dir, err)
	}
	if err := build(ctx, cli, &buf, tag); err != nil {
		return fmt.Errorf("docker: build %s: %w", dir, err)
	}
	return nil
}

// build sends the build context to the engine and waits for the image.
func build(ctx context.Context, cli *client.Client, context io.Reader, tag string) error {
	res, err := cli.ImageBuild(ctx, context, client.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true})
	if err != nil {
		return err
	}
	defer res.Body.Close()
	// The build reports its failures in the JSON stream, not the status.
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var msg struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) == nil && msg.Error != "" {
			return errors.New(msg.Error)
		}
	}
	return sc.Err()
}
