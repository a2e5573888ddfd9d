package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// embedded is a NATS server with JetStream in the coordinator's process.
type embedded struct {
	srv   *server.Server
	url   string // nats://host:port, as workers reach it
	token string
}

// startServer starts a JetStream server listening on listen (host:port;
// port 0 picks a free one) that stores in dir and fsyncs every write, or
// every syncEvery when it is positive (a group commit, as the log's).
func startServer(listen, dir, token string, syncEvery time.Duration) (*embedded, error) {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("cluster: -listen %q: want host:port: %w", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("cluster: -listen %q: bad port", listen)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	if token == "" {
		token = newToken()
	}
	opts := &server.Options{
		ServerName: "proctor", Host: host, Port: port,
		JetStream: true, StoreDir: dir,
		// Every write is on disk before JetStream acknowledges it: a
		// result the coordinator was told is stored survives a power cut.
		// Or, with syncEvery, writes of the last interval may be lost;
		// reconciliation runs them again.
		SyncAlways:    syncEvery <= 0,
		SyncInterval:  max(syncEvery, 0),
		Authorization: token,
		NoSigs:        true, NoLog: true,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("cluster: starting the NATS server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("cluster: the NATS server did not start listening on %s (is the port in use?)", listen)
	}
	addr, ok := srv.Addr().(*net.TCPAddr)
	if !ok {
		srv.Shutdown()
		return nil, fmt.Errorf("cluster: the NATS server has no TCP address")
	}
	h := host
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		h = hostname() // listening everywhere: name this machine
	}
	return &embedded{srv: srv, url: "nats://" + net.JoinHostPort(h, strconv.Itoa(addr.Port)), token: token}, nil
}

func (s *embedded) shutdown() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}

// newToken returns 128 random bits in hex.
func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// storeDir is where the embedded server of the run logged at log keeps
// its streams: beside the log, named as its manifest and transcript store are
// (runs/x.jsonl → runs/x.nats/).
func storeDir(log string) string {
	return log[:len(log)-len(filepath.Ext(log))] + ".nats"
}
