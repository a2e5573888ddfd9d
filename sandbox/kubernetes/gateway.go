package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ServeGateway implements [driver.GatewayServer]: h is served by this
// process at Options.GatewayAddress, at a free port, for the run's pods.
// With Options.NetworkPolicy, a NetworkPolicy (labelled with the run, so
// that [Cleanup] finds it) allows the network-off pods egress to that
// address and port alone, beside the deny-all one: NetworkPolicies add
// up, so the gateway is all they reach. It is made before ServeGateway
// returns, so before any pod of the run that uses the gateway.
func (d *Driver) ServeGateway(h http.Handler) (string, func() error, error) {
	if d.opts.GatewayAddress == "" {
		return "", nil, fmt.Errorf("kubernetes: a model gateway needs Options.GatewayAddress, the IP the run's pods reach this process at: %w", errors.ErrUnsupported)
	}
	ip, err := netip.ParseAddr(d.opts.GatewayAddress)
	if err != nil {
		return "", nil, fmt.Errorf("kubernetes: Options.GatewayAddress %q: want an IP address (a NetworkPolicy's ipBlock names one)", d.opts.GatewayAddress)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		return "", nil, fmt.Errorf("kubernetes: the gateway: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}
	go srv.Serve(ln)
	name := "proctor-gateway-" + d.runID + "-" + strconv.Itoa(port)
	if d.opts.NetworkPolicy {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := d.ensurePolicy(ctx); err != nil {
			srv.Close()
			return "", nil, err
		}
		if _, err := d.cs.NetworkingV1().NetworkPolicies(d.ns).Create(ctx, gatewayPolicy(name, d.runID, ip, port), metav1.CreateOptions{}); err != nil {
			srv.Close()
			return "", nil, fmt.Errorf("kubernetes: create the gateway's NetworkPolicy: %w", err)
		}
	}
	url := "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(port))
	return url, func() error {
		err := srv.Close()
		if d.opts.NetworkPolicy {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if derr := d.cs.NetworkingV1().NetworkPolicies(d.ns).Delete(ctx, name, metav1.DeleteOptions{}); derr != nil && !apierrors.IsNotFound(derr) {
				err = errors.Join(err, fmt.Errorf("kubernetes: delete the gateway's NetworkPolicy: %w", derr))
			}
		}
		return err
	}, nil
}

// gatewayPolicy allows the run's network-off pods egress to ip:port, over
// TCP, and nothing else.
func gatewayPolicy(name, runID string, ip netip.Addr, port int) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	p := intstr.FromInt32(int32(port))
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelRun: runID, LabelManaged: "proctor"}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelRun: runID, LabelNetwork: "off"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(ip, ip.BitLen()).String()}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p}},
			}},
		},
	}
}
