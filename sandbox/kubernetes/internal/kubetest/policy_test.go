package kubetest

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The kubelet enforces the egress rules it can simulate (one address, TCP
// ports) and refuses the others rather than run a pod under a policy it
// would not enforce.
func TestRuleAllows(t *testing.T) {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	port := intstr.FromInt32(8080)
	named := intstr.FromString("http")
	peer := func(cidr string) []networkingv1.NetworkPolicyPeer {
		return []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: cidr}}}
	}
	ports := func(proto *corev1.Protocol, p *intstr.IntOrString) []networkingv1.NetworkPolicyPort {
		return []networkingv1.NetworkPolicyPort{{Protocol: proto, Port: p}}
	}
	got, err := ruleAllows(networkingv1.NetworkPolicyEgressRule{To: peer("10.1.2.3/32"), Ports: ports(&tcp, &port)})
	if err != nil || len(got) != 1 || got[0] != netip.MustParseAddrPort("10.1.2.3:8080") {
		t.Fatalf("one address, one TCP port: %v, %v", got, err)
	}
	if got, err := ruleAllows(networkingv1.NetworkPolicyEgressRule{To: peer("10.1.2.3/32"), Ports: ports(nil, &port)}); err != nil || len(got) != 1 {
		t.Errorf("the protocol defaults to TCP: %v, %v", got, err)
	}
	for what, rule := range map[string]networkingv1.NetworkPolicyEgressRule{
		"no peers":          {Ports: ports(&tcp, &port)},
		"no ports":          {To: peer("10.1.2.3/32")},
		"a wider CIDR":      {To: peer("10.0.0.0/8"), Ports: ports(&tcp, &port)},
		"UDP":               {To: peer("10.1.2.3/32"), Ports: ports(&udp, &port)},
		"a named port":      {To: peer("10.1.2.3/32"), Ports: ports(&tcp, &named)},
		"a pod selector":    {To: []networkingv1.NetworkPolicyPeer{{PodSelector: nil, NamespaceSelector: nil}}, Ports: ports(&tcp, &port)},
		"an ipBlock except": {To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.1.2.3/32", Except: []string{"10.1.2.3/32"}}}}, Ports: ports(&tcp, &port)},
	} {
		if _, err := ruleAllows(rule); err == nil || !strings.Contains(err.Error(), "not simulated") {
			t.Errorf("%s: %v, want an error saying it is not simulated", what, err)
		}
	}
}
