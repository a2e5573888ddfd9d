package docker

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/moby/moby/client"

	"github.com/proctor-evals/proctor/internal/netns"
	"github.com/proctor-evals/proctor/sandbox"
)

// ServeGateway implements [driver.GatewayServer]: h is served inside each
// fork's own network namespace, on its loopback (the same port in every
// fork), by this process: the listening socket is made in the container's
// namespace and accepted on here. With Spec.Network false that namespace
// has loopback only, so the gateway is the one address outside the
// container its commands reach: no other port or address of the host, no
// other container. It needs the engine on this host (a Unix socket
// DOCKER_HOST) and root here (to enter the container's namespace through
// /proc/PID/ns/net); a fork that cannot have it fails with an error
// wrapping [sandbox.ErrUnavailable], never runs without it.
func (p *Driver) ServeGateway(h http.Handler) (string, func() error, error) {
	if !p.localEngine() {
		return "", nil, fmt.Errorf("docker: a gateway is served from this host into the containers' network namespaces: it needs the engine on this host (DOCKER_HOST %s) and root", p.cli.DaemonHost())
	}
	return p.gateways.Serve(h, false)
}

// localEngine reports whether the engine runs on this host and this
// process may enter its containers' namespaces.
func (p *Driver) localEngine() bool {
	return os.Geteuid() == 0 && strings.HasPrefix(p.cli.DaemonHost(), "unix://")
}

// serveGateways serves the driver's gateways, if any, in container id's
// network namespace.
func (p *Driver) serveGateways(ctx context.Context, id string) (netns.Listeners, error) {
	if !p.gateways.Any() {
		return nil, nil
	}
	st, err := p.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return nil, unavailable("gateway: inspect", err)
	}
	if st.Container.State == nil || st.Container.State.Pid == 0 {
		return nil, fmt.Errorf("docker: gateway: the container is not running: %w", sandbox.ErrUnavailable)
	}
	pid := strconv.Itoa(st.Container.State.Pid)
	// The PID is the engine's: it names this container here only if the
	// engine shares this host's PID namespace, which its cgroup shows.
	cg, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil || !strings.Contains(string(cg), id) {
		return nil, fmt.Errorf("docker: gateway: process %s is not the container's here (is the engine on another host or PID namespace?): %w", pid, sandbox.ErrUnavailable)
	}
	lns, err := p.gateways.ServeInPath("/proc/" + pid + "/ns/net")
	if err != nil {
		return nil, fmt.Errorf("docker: gateway in the container's network namespace: %w: %w", sandbox.ErrUnavailable, err)
	}
	return lns, nil
}
