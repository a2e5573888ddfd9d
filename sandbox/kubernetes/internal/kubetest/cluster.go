package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Cluster is a running control plane and its test kubelet.
type Cluster struct {
	dir        string // certificates, configs, etcd's data and the logs
	id         string // labels the cluster's Docker objects
	rest       *rest.Config
	kubeconfig string
	procs      []*proc // in start order
	kubelet    *kubelet
}

const adminToken = "kubetest-admin-token"

// start starts etcd, the apiserver, the controller manager, the scheduler
// and the kubelet, and returns once the apiserver is ready and the node
// registered. On error everything started is stopped.
func start() (c *Cluster, err error) {
	removeStaleDirs()
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	idb := make([]byte, 4)
	rand.Read(idb)
	c = &Cluster{dir: dir, id: hex.EncodeToString(idb)}
	defer func() {
		if err != nil {
			tails := c.logTails(30)
			c.stop()
			err = fmt.Errorf("%w\n%s", err, tails)
		}
	}()
	pki, err := newPKI(dir)
	if err != nil {
		return c, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return c, err
	}
	etcdClient, etcdPeer, apiPort := ports[0], ports[1], ports[2]
	bin := binDir()

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	if err := c.spawn("etcd", filepath.Join(bin, "etcd"),
		"--name=kubetest",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=kubetest="+peerURL,
		"--unsafe-no-fsync", "--log-level=warn",
	); err != nil {
		return c, err
	}

	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(adminToken+",kubetest-admin,kubetest-admin,system:masters\n"), 0o600); err != nil {
		return c, err
	}
	server := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	if err := c.spawn("kube-apiserver", filepath.Join(bin, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(apiPort),
		"--cert-dir="+filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file="+pki.servingCert, "--tls-private-key-file="+pki.servingKey,
		"--token-auth-file="+tokens,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+pki.saKey,
		"--service-account-signing-key-file="+pki.saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--endpoint-reconciler-type=none",
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-certificate-authority="+pki.caCert, // the test kubelet's certificate is the CA's too
		"--profiling=false",
	); err != nil {
		return c, err
	}

	c.rest = &rest.Config{
		Host:            server,
		BearerToken:     adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: pki.caPEM},
		QPS:             100,
		Burst:           200,
	}
	c.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(c.kubeconfig, server, pki.caPEM); err != nil {
		return c, err
	}
	if err := c.waitReady(server, pki, 2*time.Minute); err != nil {
		return c, err
	}

	if err := c.spawn("kube-controller-manager", filepath.Join(bin, "kube-controller-manager"),
		"--kubeconfig="+c.kubeconfig,
		"--secure-port=0",
		"--leader-elect=false",
		"--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route",
		"--service-account-private-key-file="+pki.saKey,
		"--root-ca-file="+pki.caCert,
		"--use-service-account-credentials=false",
		"--profiling=false",
	); err != nil {
		return c, err
	}
	if err := c.spawn("kube-scheduler", filepath.Join(bin, "kube-scheduler"),
		"--kubeconfig="+c.kubeconfig,
		"--secure-port=0",
		"--leader-elect=false",
		"--profiling=false",
	); err != nil {
		return c, err
	}

	if c.kubelet, err = startKubelet(c, pki); err != nil {
		return c, err
	}
	return c, c.waitSchedulable(2 * time.Minute)
}

// waitSchedulable waits until the node has no taint: the TaintNodesByCondition
// admission plugin registers it not-ready, and the node-lifecycle controller
// lifts that once it has seen the kubelet's Ready condition.
func (c *Cluster) waitSchedulable(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var taints []corev1.Taint
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, p := range c.procs {
			if p.exited() {
				return false, fmt.Errorf("%s exited: %v", p.name, p.err)
			}
		}
		node, err := c.kubelet.cs.CoreV1().Nodes().Get(ctx, c.kubelet.node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		taints = node.Spec.Taints
		return len(taints) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("node %s still tainted %v: %w", c.kubelet.node, taints, err)
	}
	return nil
}

// waitReady polls the apiserver's /readyz until it answers ok, failing
// early if a process exited.
func (c *Cluster) waitReady(server string, pki *pki, timeout time.Duration) error {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.pool}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		for _, p := range c.procs {
			if p.exited() {
				return fmt.Errorf("%s exited: %v", p.name, p.err)
			}
		}
		req, _ := http.NewRequest("GET", server+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		res, err := hc.Do(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			last = res.Status
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready after %v: %s", timeout, last)
}

func writeKubeconfig(path, server string, caPEM []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["kubetest-admin"] = &clientcmdapi.AuthInfo{Token: adminToken}
	cfg.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "kubetest-admin", Namespace: "default"}
	cfg.CurrentContext = "kubetest"
	return clientcmd.WriteToFile(*cfg, path)
}

// stop stops the kubelet (removing its containers) and the processes in
// reverse order, and removes the cluster's directory.
func (c *Cluster) stop() error {
	var errs []error
	if c.kubelet != nil {
		errs = append(errs, c.kubelet.stop())
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop()
	}
	errs = append(errs, os.RemoveAll(c.dir))
	return errors.Join(errs...)
}

// logTails returns the last n lines of every component's log.
func (c *Cluster) logTails(n int) string {
	var b strings.Builder
	names := []string{}
	for _, p := range c.procs {
		names = append(names, p.name)
	}
	names = append(names, "kubelet")
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(c.dir, name+".log"))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&b, "--- kubetest: last %d lines of %s.log ---\n%s\n", len(lines), name, strings.Join(lines, "\n"))
	}
	return b.String()
}

// removeStaleDirs removes the directories of clusters whose test binary
// was killed (etcd's data is most of them).
func removeStaleDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "kubetest-*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, "pid"))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(string(data)); err == nil && syscall.Kill(pid, 0) == syscall.ESRCH {
			os.RemoveAll(dir)
		}
	}
}

// freePorts returns n distinct loopback ports free at the time of the call.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// proc is a control plane process, logging to dir/name.log.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done closes
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, then SIGKILL if the process has not exited in 10 s.
func (p *proc) stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (c *Cluster) spawn(name, path string, args ...string) error {
	logf, err := os.Create(filepath.Join(c.dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = c.dir
	cmd.SysProcAttr = deathSignal()
	if err := startLocked(cmd); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	return nil
}

// The parent death signal fires when the thread that forked the child
// exits, not the process: children are forked from one goroutine locked to
// its thread for the life of the test binary, so they die with the binary
// and not before.
var spawnRequests = make(chan spawnRequest)

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

func init() {
	go func() {
		runtime.LockOSThread()
		for r := range spawnRequests {
			r.done <- r.cmd.Start()
		}
	}()
}

func startLocked(cmd *exec.Cmd) error {
	done := make(chan error)
	spawnRequests <- spawnRequest{cmd, done}
	return <-done
}
