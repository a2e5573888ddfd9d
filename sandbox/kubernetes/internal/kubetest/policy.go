package kubetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/moby/moby/client"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/proctor-evals/proctor/internal/netns"
)

// The kubelet enforces NetworkPolicies' egress, as a network plugin that
// enforces them (Calico, Cilium) does, for what it simulates: a pod that
// a policy selects for egress runs with no network at all (Docker's
// "none", whatever NetworkAnnotation says), and each destination the
// policies allow (an ipBlock of one address, TCP ports) is reachable from
// the pod at that very address and port, through a forwarder of this
// process listening in the pod's network namespace (the address added to
// its loopback). Nothing else is: there is no route. A rule of another
// shape (no peers or no ports, which allow everything; a wider CIDR; pod
// or namespace selectors; UDP) is not simulated: the pod fails to start
// (CreateContainerError), never runs under a policy not enforced.
// Ingress needs nothing: nothing reaches a pod without network.

// egressOf says whether the namespace's NetworkPolicies isolate pod's
// egress, and what they allow.
func (k *kubelet) egressOf(ctx context.Context, pod *corev1.Pod) (isolated bool, allowed []netip.AddrPort, err error) {
	pols, err := k.cs.NetworkingV1().NetworkPolicies(pod.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, nil, fmt.Errorf("list NetworkPolicies: %w", err)
	}
	for _, np := range pols.Items {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			return false, nil, fmt.Errorf("NetworkPolicy %s: %w", np.Name, err)
		}
		if !sel.Matches(labels.Set(pod.Labels)) || !egressType(&np) {
			continue
		}
		isolated = true
		for i, rule := range np.Spec.Egress {
			a, err := ruleAllows(rule)
			if err != nil {
				return false, nil, fmt.Errorf("NetworkPolicy %s, egress rule %d: %w (the kubetest kubelet simulates an ipBlock of one address with TCP ports)", np.Name, i, err)
			}
			allowed = append(allowed, a...)
		}
	}
	slices.SortFunc(allowed, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return isolated, slices.Compact(allowed), nil
}

// egressType reports whether np isolates egress: its policyTypes say so,
// or, with none given, it has egress rules.
func egressType(np *networkingv1.NetworkPolicy) bool {
	if len(np.Spec.PolicyTypes) == 0 {
		return len(np.Spec.Egress) > 0
	}
	return slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
}

func ruleAllows(rule networkingv1.NetworkPolicyEgressRule) ([]netip.AddrPort, error) {
	if len(rule.To) == 0 || len(rule.Ports) == 0 {
		return nil, errors.New("a rule with no peers or no ports allows every destination or port: not simulated")
	}
	var out []netip.AddrPort
	for _, peer := range rule.To {
		b := peer.IPBlock
		if b == nil || peer.PodSelector != nil || peer.NamespaceSelector != nil || len(b.Except) > 0 {
			return nil, errors.New("a peer other than a plain ipBlock: not simulated")
		}
		pfx, err := netip.ParsePrefix(b.CIDR)
		if err != nil || !pfx.IsSingleIP() {
			return nil, fmt.Errorf("ipBlock %q is not one address: not simulated", b.CIDR)
		}
		for _, p := range rule.Ports {
			if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP || p.Port == nil || p.Port.Type != intstr.Int || p.EndPort != nil {
				return nil, errors.New("a port other than one TCP port number: not simulated")
			}
			out = append(out, netip.AddrPortFrom(pfx.Addr(), uint16(p.Port.IntVal)))
		}
	}
	return out, nil
}

// allowEgress makes each allowed destination reachable from container
// id's network namespace (a pod's first container, with no network), at
// its own address: the address is added to the namespace's loopback and
// a forwarder of this process listens there, relaying to the destination
// from the host's namespace. It needs root (nsenter, setns) and ip.
func (k *kubelet) allowEgress(ctx context.Context, uid, id string, allowed []netip.AddrPort) error {
	ins, err := k.docker.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return err
	}
	if ins.Container.State == nil || ins.Container.State.Pid == 0 {
		return errors.New("the container is not running")
	}
	ns := fmt.Sprintf("/proc/%d/ns/net", ins.Container.State.Pid)
	var addrs []netip.Addr
	for _, a := range allowed {
		if !slices.Contains(addrs, a.Addr()) {
			addrs = append(addrs, a.Addr())
		}
	}
	for _, a := range addrs {
		out, err := exec.CommandContext(ctx, "nsenter", "--net="+ns, "ip", "addr", "add", netip.PrefixFrom(a, a.BitLen()).String(), "dev", "lo").CombinedOutput()
		if err != nil {
			return fmt.Errorf("add %s to the pod's loopback (root, nsenter and ip needed): %v: %s", a, err, out)
		}
	}
	f, err := os.Open(ns)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, a := range allowed {
		ln, err := netns.Listen(int(f.Fd()), a.String())
		if err != nil {
			return fmt.Errorf("listen at %s in the pod's namespace: %w", a, err)
		}
		k.mu.Lock()
		k.forwarders[uid] = append(k.forwarders[uid], ln)
		k.mu.Unlock()
		k.wg.Go(func() { forward(ln, a) })
	}
	return nil
}

// forward relays each connection accepted on ln to to, until ln closes.
func forward(ln net.Listener, to netip.AddrPort) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.DialTimeout("tcp", to.String(), 10*time.Second)
			if err != nil {
				return // the pod sees its connection closed, as a refused one
			}
			defer u.Close()
			done := make(chan struct{})
			go func() {
				io.Copy(u, c)
				u.(*net.TCPConn).CloseWrite()
				close(done)
			}()
			io.Copy(c, u)
			c.(*net.TCPConn).CloseWrite()
			<-done
		}()
	}
}

// closeForwarders stops the forwarders of the pod uid.
func (k *kubelet) closeForwarders(uid string) {
	k.mu.Lock()
	lns := k.forwarders[uid]
	delete(k.forwarders, uid)
	k.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
}
