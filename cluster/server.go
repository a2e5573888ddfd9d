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

// The embedded server's two users: the coordinator (in its process, with
// a secret that never leaves it) may do anything; a worker holds only
// what workerPermissions grants.
const (
	coordinatorUser = "coordinator"
	workerUser      = "worker"
)

// embedded is a NATS server with JetStream in the coordinator's process.
type embedded struct {
	srv         *server.Server
	url         string // nats://host:port, as workers reach it
	token       string // the workers' password
	coordSecret string // the coordinator's password
}

// startServer starts a JetStream server listening on listen (host:port;
// port 0 picks a free one) that stores in dir and fsyncs every write, or
// every syncEvery when it is positive (a group commit, as the log's).
// Workers of run n authenticate with token, and may do what
// workerPermissions(n) grants; maxStore, when positive, bounds the
// store's disk.
func startServer(listen, dir, token string, n names, syncEvery time.Duration, maxStore int64) (*embedded, error) {
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
	coord := newToken()
	opts := &server.Options{
		ServerName: "proctor", Host: host, Port: port,
		JetStream: true, StoreDir: dir, JetStreamMaxStore: maxStore,
		// Every write is on disk before JetStream acknowledges it: a
		// result the coordinator was told is stored survives a power cut.
		// Or, with syncEvery, writes of the last interval may be lost;
		// reconciliation runs them again.
		SyncAlways:   syncEvery <= 0,
		SyncInterval: max(syncEvery, 0),
		Users: []*server.User{
			{Username: coordinatorUser, Password: coord},
			{Username: workerUser, Password: token, Permissions: workerPermissions(n)},
		},
		NoSigs: true, NoLog: true,
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
	return &embedded{srv: srv, url: "nats://" + net.JoinHostPort(h, strconv.Itoa(addr.Port)), token: token, coordSecret: coord}, nil
}

// workerPermissions is least privilege for a worker of run n: it fetches
// and acknowledges the run's work through the shared consumer (it cannot
// read the queue, nor another's results), publishes results and large
// result bodies, puts its liveness, reads the manifest, stop and done
// keys (not the key that signs assignments) and listens to the control
// subject, on which it cannot publish. docs/distributed.md lists the same
// grants for an external server.
func workerPermissions(n names) *server.Permissions {
	api := "$JS.API."
	kvGet := func(bucket, key string) string {
		return api + "DIRECT.GET.KV_" + bucket + ".$KV." + bucket + "." + key
	}
	return &server.Permissions{
		Publish: &server.SubjectPermission{
			Allow: []string{
				api + "INFO",
				api + "STREAM.INFO." + n.work,
				api + "STREAM.INFO." + n.results, // which results exist (a redelivery's), not what they say
				api + "STREAM.INFO.KV_" + n.kv,
				api + "STREAM.INFO.KV_" + n.workers,
				api + "STREAM.INFO.OBJ_" + n.blobs,
				api + "STREAM.INFO.KV_" + runsBucket,
				api + "CONSUMER.INFO." + n.work + "." + workConsumer,
				api + "CONSUMER.MSG.NEXT." + n.work + "." + workConsumer,
				"$JS.ACK." + n.work + "." + workConsumer + ".>",
				kvGet(n.kv, keyManifest), kvGet(n.kv, keyStop), kvGet(n.kv, keyDone),
				kvGet(runsBucket, currentKey),
				api + "DIRECT.GET.OBJ_" + n.blobs + ".$O." + n.blobs + ".M.>", // an object's metadata, before a put
				"$O." + n.blobs + ".>",
				"$KV." + n.workers + ".>",
				n.resSubj + ".>",
			},
			Deny: []string{n.control},
		},
		Subscribe: &server.SubjectPermission{
			Allow: []string{"_INBOX.>", n.control},
		},
	}
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
