package netns

import (
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
)

// Gateway is one handler served at one loopback address, 127.0.0.1:PORT,
// in many network namespaces: the host's (for sandboxes on the host's
// network) and each sandbox's own, so that every sandbox has the same URL.
type Gateway struct {
	srv  *http.Server
	addr string
}

// NewGateway serves h at a free port of the host's loopback; without host,
// it only picks a port for ServeIn (a sandbox's namespace is fresh: any
// port is free there).
func NewGateway(h http.Handler, host bool) (*Gateway, error) {
	g := &Gateway{srv: &http.Server{Handler: h}}
	if !host {
		g.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(20000+rand.IntN(40000)))
		return g, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	g.addr = ln.Addr().String()
	go g.srv.Serve(ln)
	return g, nil
}

// URL is where a command reaches the gateway.
func (g *Gateway) URL() string { return "http://" + g.addr }

// ServeIn serves the gateway at its address inside the network namespace
// fd refers to, until the returned listener is closed (or the gateway).
func (g *Gateway) ServeIn(fd int) (net.Listener, error) {
	ln, err := Listen(fd, g.addr)
	if err != nil {
		return nil, err
	}
	go g.srv.Serve(ln) // closes ln when it returns
	return ln, nil
}

// Close stops serving, in every namespace.
func (g *Gateway) Close() error { return g.srv.Close() }
