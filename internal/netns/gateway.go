package netns

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
)

// Gateways are the handlers (model gateways) a driver serves to its
// sandboxes, each at one loopback address, 127.0.0.1:PORT, in many network
// namespaces: the host's (for sandboxes on the host's network) and each
// sandbox's own, so that every sandbox reaches it at the same URL. The
// zero value is valid: it serves none.
type Gateways struct {
	mu  sync.Mutex
	all []*gateway
}

type gateway struct {
	srv  *http.Server
	addr string
}

// Serve serves h from then on. With host it listens at a free port of
// the host's loopback too; without, it only picks a port (a sandbox's
// namespace is fresh: any port is free there). stop stops serving it, in
// every namespace.
func (s *Gateways) Serve(h http.Handler, host bool) (url string, stop func() error, err error) {
	g := &gateway{srv: &http.Server{Handler: h}}
	s.mu.Lock()
	defer s.mu.Unlock()
	if host {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", nil, err
		}
		g.addr = ln.Addr().String()
		go g.srv.Serve(ln)
	} else {
		for g.addr == "" || slices.ContainsFunc(s.all, func(o *gateway) bool { return o.addr == g.addr }) {
			g.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(20000+rand.IntN(40000)))
		}
	}
	s.all = append(s.all, g)
	return "http://" + g.addr, func() error {
		s.mu.Lock()
		s.all = slices.DeleteFunc(s.all, func(o *gateway) bool { return o == g })
		s.mu.Unlock()
		return g.srv.Close()
	}, nil
}

// Any reports whether a gateway is served.
func (s *Gateways) Any() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.all) > 0
}

// ServeIn serves every gateway at its address inside the network
// namespace fd refers to, until the returned listeners are closed (or the
// gateway stops).
func (s *Gateways) ServeIn(fd int) (Listeners, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var lns Listeners
	for _, g := range s.all {
		ln, err := Listen(fd, g.addr)
		if err != nil {
			lns.Close()
			return nil, err
		}
		go g.srv.Serve(ln) // closes ln when it returns
		lns = append(lns, ln)
	}
	return lns, nil
}

// ServeInPath is ServeIn for the namespace at path ("/proc/PID/ns/net").
func (s *Gateways) ServeInPath(path string) (Listeners, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return s.ServeIn(int(f.Fd()))
}

// Listeners are the gateways' listeners in one namespace.
type Listeners []net.Listener

// Close closes them all.
func (l Listeners) Close() error {
	var errs []error
	for _, ln := range l {
		errs = append(errs, ln.Close())
	}
	return errors.Join(errs...)
}
