//go:build linux

package kubetest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

const childEnv = "PROCTOR_KUBETEST_KILL_CHILD"

// The child of TestKill9: it starts a cluster, runs a pod, prints the
// control plane's pids and the pod's container, and waits to be killed.
func TestKill9Child(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("run by TestKill9")
	}
	c := Start(t)
	ns := c.Namespace(t)
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	require.NoError(t, err)
	ctx := context.Background()
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "victim"},
		Spec: corev1.PodSpec{NodeSelector: c.NodeSelector(), Containers: []corev1.Container{{
			Name: "main", Image: BusyboxImage(t), Command: []string{"sh", "-c", "while :; do sleep 1; done"},
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, err
	})
	require.NoError(t, err)
	id, err := c.ContainerID(ns, pod.Name, "main")
	require.NoError(t, err)
	for _, p := range c.procs {
		fmt.Printf("pid %s %d\n", p.name, p.cmd.Process.Pid)
	}
	fmt.Printf("container %s\n", id)
	fmt.Printf("dir %s\n", c.dir)
	fmt.Println("ready")
	select {}
}

// A test binary killed with SIGKILL takes its control plane with it, and
// the next cluster removes the containers and directory it left.
func TestKill9(t *testing.T) {
	c := Start(t)
	BusyboxImage(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Child$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	pids := map[string]int{}
	var container, dir string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "pid":
			pids[f[1]], _ = strconv.Atoi(f[2])
		case len(f) == 2 && f[0] == "container":
			container = f[1]
		case len(f) == 2 && f[0] == "dir":
			dir = f[1]
		}
		if sc.Text() == "ready" {
			break
		}
	}
	require.Len(t, pids, 4, "the child did not get ready")
	require.NoError(t, cmd.Process.Kill())
	cmd.Wait()

	ctx := context.Background()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, pid := range pids {
			if alive(pid) {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "control plane processes %v outlived their test binary", pids)

	_, err = c.Docker().ContainerInspect(ctx, container, client.ContainerInspectOptions{})
	require.NoError(t, err, "the killed binary's container should still be there until the next cluster starts")
	removeStaleDirs()
	c.kubelet.removeOrphans()
	_, err = c.Docker().ContainerInspect(ctx, container, client.ContainerInspectOptions{})
	require.True(t, cerrdefs.IsNotFound(err), "container %s of the killed binary not removed: %v", container, err)
	_, err = os.Stat(dir)
	require.True(t, os.IsNotExist(err), "directory %s of the killed binary not removed: %v", dir, err)
}

// alive reports whether pid runs (a zombie waiting to be reaped does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
