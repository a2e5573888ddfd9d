package kubetest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"
	"k8s.io/apimachinery/pkg/types"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/tools/remotecommand"
	remotecommandserver "k8s.io/kubelet/pkg/cri/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// serveExec serves a kubelet's exec endpoint, which the apiserver proxies
// pods/exec to: /exec/{namespace}/{pod}/{container} (or with the pod's UID
// before the container), the command in repeated "command" parameters.
func (k *kubelet) serveExec(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/exec/"), "/")
	var ns, pod, name string
	var uid types.UID
	switch len(parts) {
	case 3:
		ns, pod, name = parts[0], parts[1], parts[2]
	case 4:
		ns, pod, uid, name = parts[0], parts[1], types.UID(parts[2]), parts[3]
	default:
		http.Error(w, "kubetest: want /exec/{namespace}/{pod}/{container}", http.StatusNotFound)
		return
	}
	if _, err := k.containerID(ns, pod, name); err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	opts, err := remotecommandserver.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	k.log.Printf("exec %s/%s %s: %q", ns, pod, name, r.URL.Query()["command"])
	// The kubelet's defaults: streams idle for 4 h time out, and a client
	// has 30 s to create them.
	remotecommandserver.ServeExec(w, r, k, ns+"/"+pod, uid, name, r.URL.Query()["command"], opts,
		4*time.Hour, 30*time.Second, remotecommandconsts.SupportedStreamingProtocols)
}

// ExecInContainer runs cmd in the pod's container with docker exec (the
// remotecommand server's Executor). A non-zero exit is returned as a
// [utilexec.CodeExitError], which the server reports as the exit code.
func (k *kubelet) ExecInContainer(ctx context.Context, pod string, _ types.UID, name string, cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	ns, podName, _ := strings.Cut(pod, "/")
	id, err := k.containerID(ns, podName, name)
	if err != nil {
		return err
	}
	created, err := k.docker.ExecCreate(ctx, id, client.ExecCreateOptions{
		Cmd:          cmd,
		TTY:          tty,
		AttachStdin:  in != nil,
		AttachStdout: out != nil,
		AttachStderr: errOut != nil,
	})
	if err != nil {
		return err
	}
	att, err := k.docker.ExecAttach(ctx, created.ID, client.ExecAttachOptions{TTY: tty})
	if err != nil {
		return err
	}
	defer att.Close()
	if tty && resize != nil {
		go func() {
			for size := range resize {
				k.docker.ExecResize(ctx, created.ID, client.ExecResizeOptions{Height: uint(size.Height), Width: uint(size.Width)})
			}
		}()
	}
	if in != nil {
		go func() {
			io.Copy(att.Conn, in)
			att.CloseWrite() // the command sees its stdin end
		}()
	}
	stdout, stderr := io.Writer(io.Discard), io.Writer(io.Discard)
	if out != nil {
		stdout = out
	}
	if errOut != nil {
		stderr = errOut
	}
	if tty {
		_, err = io.Copy(stdout, att.Reader)
	} else {
		_, err = stdcopy.StdCopy(stdout, stderr, att.Reader)
	}
	if err != nil {
		return err
	}
	// The stream ends a moment before the engine records the exit code.
	for range 1000 {
		ins, err := k.docker.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
		if err != nil {
			return err
		}
		if !ins.Running {
			if ins.ExitCode != 0 {
				return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", ins.ExitCode), Code: ins.ExitCode}
			}
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("kubetest: exec in %s %s: still running after its output ended", pod, name)
}
