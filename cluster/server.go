package cluster

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/proctor-evals/proctor/internal/sidecar"
)

// The embedded server's two roles: the coordinator (in its process, with
// a token that never leaves it) may do anything; a worker holds only what
// workerPermissions grants.
const (
	coordinatorUser = "coordinator"
	workerUser      = "worker"
)

// coordinatorInbox is the prefix of the coordinator's reply subjects (and
// gc's): the tag key and every result reach it there, and workers, who may
// subscribe to _INBOX.> only, cannot listen.
const coordinatorInbox = "_PROCTOR_COORDINATOR"

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
		CustomClientAuthentication: tokenAuth{
			coord:  &server.User{Username: coordinatorUser},
			worker: &server.User{Username: workerUser, Permissions: workerPermissions(n)},
			tokens: [2]string{coord, token},
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

// tokenAuth admits a client by its token (a plain token, as an external
// server's authorization token is presented) and gives it its role.
type tokenAuth struct {
	coord, worker *server.User
	tokens        [2]string // the coordinator's, the workers'
}

func (a tokenAuth) Check(c server.ClientAuthentication) bool {
	got := []byte(c.GetOpts().Token)
	switch {
	case subtle.ConstantTimeCompare(got, []byte(a.tokens[0])) == 1:
		c.RegisterUser(a.coord)
	case subtle.ConstantTimeCompare(got, []byte(a.tokens[1])) == 1:
		w := *a.worker
		w.Permissions = ownInbox(w.Permissions, c.GetOpts().Name)
		c.RegisterUser(&w)
	default:
		return false
	}
	return true
}

// workerPermissions is least privilege for a worker of run n: it fetches
// and acknowledges the run's work through the shared consumer (it cannot
// read the queue, nor any results), publishes results and large
// result bodies, puts its liveness, reads and writes the gateway's shared
// rate limits and call stores (the calls stream: an episode's by its
// subject, the stream not listed), reads the manifest, stop and done keys (not the key that
// signs assignments), reads, writes and listens to the run's spend key
// (budget.go) and listens to the control subject, on which it cannot
// publish. It receives replies on _INBOX.>
// (on the embedded server, its own inbox only: see ownInbox), never on the
// coordinator's inbox. docs/distributed.md lists the same grants for an
// external server.
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
				api + "STREAM.INFO.KV_" + n.kv,
				api + "STREAM.INFO.KV_" + n.workers,
				api + "STREAM.INFO.KV_" + n.rates,
				api + "STREAM.INFO." + n.calls,
				api + "DIRECT.GET." + n.calls,
				api + "STREAM.INFO.OBJ_" + n.blobs,
				api + "STREAM.INFO.KV_" + runsBucket,
				api + "CONSUMER.INFO." + n.work + "." + workConsumer,
				api + "CONSUMER.MSG.NEXT." + n.work + "." + workConsumer,
				"$JS.ACK." + n.work + "." + workConsumer + ".>",
				kvGet(n.kv, keyManifest), kvGet(n.kv, keyStop), kvGet(n.kv, keyDone), kvGet(n.kv, keySpend), kvGet(n.kv, keyRetired),
				kvGet(runsBucket, currentKey),
				api + "DIRECT.GET.OBJ_" + n.blobs + ".$O." + n.blobs + ".M.>", // an object's metadata, before a put
				"$O." + n.blobs + ".>",
				"$KV." + n.workers + ".>",
				api + "DIRECT.GET.KV_" + n.rates + ".$KV." + n.rates + ".>", "$KV." + n.rates + ".>",
				"$KV." + n.kv + "." + keySpend,
				n.resSubj + ".>",
				n.callsSubj + ".>",
			},
			Deny: []string{n.control},
		},
		Subscribe: &server.SubjectPermission{
			Allow: []string{"_INBOX.>", n.control, "$KV." + n.kv + "." + keySpend},
		},
	}
}

// A worker's inbox is its own: _INBOX.<nonce>, the nonce (128 random
// bits, in hex) named to the server at the end of its connection's name,
// which no other client sees. The embedded server lets each worker
// subscribe to its own inbox only, so that no worker reads the work (and
// its tags) delivered to another; an external server's grant, _INBOX.>,
// admits the same inbox.
const inboxMark = " inbox="

// workerInbox returns the options that give a worker named name an inbox
// of its own.
func workerInbox(name string) []nats.Option {
	nonce := newToken()
	return []nats.Option{nats.Name(name + inboxMark + nonce), nats.CustomInboxPrefix("_INBOX." + nonce)}
}

// ownInbox is p with its subscription to every inbox narrowed to the inbox
// the connection named connName names, or dropped when it names none.
func ownInbox(p *server.Permissions, connName string) *server.Permissions {
	_, nonce, _ := strings.Cut(connName, inboxMark)
	if len(nonce) != 32 || strings.Trim(nonce, "0123456789abcdef") != "" {
		nonce = ""
	}
	sub := *p.Subscribe
	sub.Allow = nil
	for _, subj := range p.Subscribe.Allow {
		if subj == "_INBOX.>" {
			if nonce == "" {
				continue
			}
			subj = "_INBOX." + nonce + ".>"
		}
		sub.Allow = append(sub.Allow, subj)
	}
	own := *p
	own.Subscribe = &sub
	return &own
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

// tokenFile is where the workers' token of the run logged at log is kept
// when the coordinator makes it: runs/x.jsonl → runs/x.token.
func tokenFile(log string) string { return sidecar.Token(log) }

// workersToken returns the workers' token: given, or the one in file, or
// a new one written there (0600, never replacing a file). made says it
// was written now.
func workersToken(given, file string) (token string, made bool, err error) {
	if given != "" {
		return given, false, nil
	}
	if b, err := os.ReadFile(file); err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, false, nil
		}
		return "", false, fmt.Errorf("cluster: the token file %s is empty", file)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("cluster: the workers' token: %w", err)
	}
	token = newToken()
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("cluster: writing the workers' token: %w", err)
	}
	_, err = f.WriteString(token + "\n")
	if err = errors.Join(err, f.Sync(), f.Close()); err != nil {
		os.Remove(file)
		return "", false, fmt.Errorf("cluster: writing the workers' token: %w", err)
	}
	return token, true, nil
}

// redactURL drops a URL's user and password: a printed command carries no
// secret.
func redactURL(s string) string {
	urls := strings.Split(s, ",") // nats.Connect takes a list
	for i, x := range urls {
		if u, err := url.Parse(strings.TrimSpace(x)); err == nil && u.User != nil {
			u.User = nil
			urls[i] = u.String()
		}
	}
	return strings.Join(urls, ",")
}

// storeDir is where the embedded server of the run logged at log keeps
// its streams: beside the log, named as its manifest and transcript store are
// (runs/x.jsonl → runs/x.nats/).
func storeDir(log string) string { return sidecar.NATSStore(log) }
