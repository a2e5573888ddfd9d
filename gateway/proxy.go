package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log"
	"math"
	"mime"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/proctor-evals/proctor/usage"
)

// maxMeteredJSON bounds a non-streamed response kept to read its usage: a
// larger one is forwarded whole but its usage is estimated and flagged.
const maxMeteredJSON = 16 << 20

// upstream is a parsed Upstream: where a provider's paths go.
type upstream struct {
	name string
	base *url.URL
	// strip is the inbound path prefix the base URL already holds
	// ("/v1" for OpenAI, whose base URL ends in /v1).
	strip string
	key   string
}

func parseUpstream(name string, u Upstream, def, strip string) (upstream, error) {
	raw := u.BaseURL
	if raw == "" {
		raw = def
	}
	b, err := url.Parse(strings.TrimSuffix(raw, "/"))
	if err != nil || (b.Scheme != "http" && b.Scheme != "https") || b.Host == "" {
		return upstream{}, fmt.Errorf("gateway: %s base URL %q: want an absolute http(s) URL", name, raw)
	}
	return upstream{name: name, base: b, strip: strip, key: u.Key}, nil
}

// route is where one call goes: its upstream and API; metered false for a
// passed-through path.
type route struct {
	up      *upstream
	api     string
	metered bool
}

// route maps r to its upstream; ok false for a path the gateway does not
// serve, with the provider whose error shape the refusal takes.
func (g *Gateway) route(r *http.Request) (rt route, provider string, ok bool) {
	anthropicClient := r.Header.Get("anthropic-version") != "" || strings.HasPrefix(r.URL.Path, "/v1/messages")
	provider = providerOAI
	if anthropicClient {
		provider = providerAnthr
	}
	p := r.URL.Path
	switch {
	case r.Method == http.MethodPost && p == "/v1/chat/completions":
		return route{&g.openai, apiChat, true}, providerOAI, true
	case r.Method == http.MethodPost && p == "/v1/responses":
		return route{&g.openai, apiResponses, true}, providerOAI, true
	case r.Method == http.MethodPost && p == "/v1/messages":
		return route{&g.anthro, apiMessages, true}, providerAnthr, true
	case r.Method == http.MethodPost && p == "/v1/messages/count_tokens":
		return route{&g.anthro, "count_tokens", false}, providerAnthr, true
	case r.Method == http.MethodGet && (p == "/v1/models" || strings.HasPrefix(p, "/v1/models/") && !strings.Contains(p[len("/v1/models/"):], "/")):
		if anthropicClient {
			return route{&g.anthro, "models", false}, providerAnthr, true
		}
		return route{&g.openai, "models", false}, providerOAI, true
	}
	return route{}, provider, false
}

// stateKey carries a call's state from ServeHTTP to the proxy's hooks.
type stateKey struct{}

// call is one call's state while it is served.
type call struct {
	g        *Gateway
	rt       route
	provider string
	in       []byte // the request as the agent sent it
	out      []byte // as forwarded
	rec      Call
	c        counted
	budget   Budget
	price    usage.Price
	priced   bool
	body     *meteredBody // the response's, once it came
	span     trace.Span   // nil: not traced
	wrote    bool         // the gateway answered itself (refusal, upstream error)
	ep       *episode
	held     usage.Usage // held against ep's budget until recorded (hold)
	holding  bool
	// reqDigest is the normalized request's, for the call store; "" when
	// the episode is not kept in one.
	reqDigest string
	// congestedMidStream tells the rate governor that the answer's stream
	// ended in congestion (counted.congested); nil when ungoverned.
	congestedMidStream func()
}

// hold counts the answer's usage against the episode's budget once the
// provider's usage for it came, before the bytes that carry it go on to
// the agent.
func (cl *call) hold() {
	if cl.holding || !cl.c.final {
		return
	}
	cl.held = cl.c.estimate()
	cl.held.CostUSD = cl.g.o.Prices.Cost(cl.c.model, cl.held)
	cl.holding = true
	cl.ep.hold(cl.held)
}

func (g *Gateway) newProxy() *httputil.ReverseProxy {
	transport := g.o.Transport
	if g.gov != nil {
		transport = governedTransport{g.gov, transport}
	}
	return &httputil.ReverseProxy{
		FlushInterval:  -1,
		Transport:      transport,
		Rewrite:        rewriteOut,
		ModifyResponse: modifyResponse,
		ErrorHandler:   proxyError,
		ErrorLog:       log.New(io.Discard, "", 0), // errors are recorded on the call
	}
}

// ServeHTTP serves one call from a sandbox; see the package documentation.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := g.nowFunc()
	rt, provider, known := g.route(r)
	ep := g.lookup(r)
	if ep == nil {
		// Not recorded: there is no episode to record it in.
		writeError(w, provider, kindAuth, "no valid token: a gateway token is valid only while its episode runs")
		return
	}
	defer ep.inflight.Done()
	// The call ends with the episode: end cancels it.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(ep.ctx, cancel)()
	r = r.WithContext(ctx)
	cl := &call{g: g, rt: rt, provider: provider, rec: Call{Provider: provider, API: rt.api, Start: start}, ep: ep}
	cl.c.api = rt.api
	if !known {
		cl.refuse(w, ep.meter, kindNotFound, fmt.Sprintf("%s %s is not served: the gateway serves /v1/chat/completions, /v1/responses and /v1/messages", r.Method, r.URL.Path))
		return
	}
	in, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		kind := kindInvalid
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			kind = kindTooLarge
		}
		cl.refuse(w, ep.meter, kind, "reading the request: "+err.Error())
		return
	}
	cl.in, cl.out = in, in
	if rt.metered {
		req, err := parseRequest(in)
		if err != nil {
			cl.refuse(w, ep.meter, kindInvalid, err.Error())
			return
		}
		cl.rec.Model, cl.rec.Stream, cl.c.model = req.Model, req.Stream, req.Model
		if ep.replay != nil {
			cl.reqDigest = requestDigest(rt.api, r.URL.RawQuery, in)
			if sc, how, ok := cl.recorded(cl.reqDigest); ok {
				cl.serveRecorded(w, r, sc, how)
				return
			}
		}
		cl.c.inputEstimate = int64(len(in)+bytesPerToken-1) / bytesPerToken
		cl.budget = ep.remaining()
		cl.price, cl.priced = g.o.Prices.Lookup(req.Model)
		if cl.budget.exhausted() {
			cl.refuse(w, ep.meter, kindBudget, "the episode's budget is spent")
			return
		}
		if cl.out, err = rewrite(rt.api, in, req.Stream, cl.answerLimit()); err != nil {
			kind := kindInvalid
			if err == errNoRoomToThink {
				kind = kindBudget // what is left cannot hold the call: as when nothing is
			}
			cl.refuse(w, ep.meter, kind, err.Error())
			return
		}
	}
	if t, ok := ep.meter.(Tracer); ok {
		cl.startSpan(t.Span())
	}
	ctx = context.WithValue(ctx, stateKey{}, cl)
	defer func() {
		p := recover()
		ep.meter.Record(cl.finish(r.Context(), p != nil))
		if cl.holding {
			ep.release(cl.held)
		}
		if p != nil {
			panic(p)
		}
	}()
	g.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// answerLimit is the answer bound a call may have: what is left of the
// token budget after the request's estimated input, and of the cost
// budget at the model's output price; 0 for no bound. Never below 1: a
// call that starts may answer something.
func (cl *call) answerLimit() int64 {
	if !cl.budget.Capped {
		return 0
	}
	limit := int64(math.MaxInt64)
	if cl.budget.Tokens < math.MaxInt64 {
		limit = cl.budget.Tokens - cl.c.inputEstimate
	}
	if cl.priced && cl.price.Output > 0 && !math.IsInf(cl.budget.CostUSD, 1) {
		inCost := float64(cl.c.inputEstimate) * cl.price.Input / 1e6
		limit = min(limit, int64((cl.budget.CostUSD-inCost)/cl.price.Output*1e6))
	}
	if limit == math.MaxInt64 {
		return 0
	}
	return max(limit, 1)
}

// refuse answers a call the gateway does not forward and records it.
func (cl *call) refuse(w http.ResponseWriter, m Meter, kind, msg string) {
	cl.rec.Status = writeError(w, cl.provider, kind, msg)
	cl.rec.Err = msg
	if cl.in != nil {
		cl.rec.RequestSHA256 = digest(cl.in)
		if len(cl.in) <= cl.g.o.KeepBytes && json.Valid(cl.in) {
			cl.rec.Request = cl.in
		}
	}
	cl.rec.Duration = cl.g.nowFunc().Sub(cl.rec.Start)
	if t, ok := m.(Tracer); ok && cl.rt.up != nil {
		cl.startSpan(t.Span())
		if cl.span != nil {
			endSpan(cl.span, &cl.rec)
		}
	}
	m.Record(cl.rec)
}

func rewriteOut(pr *httputil.ProxyRequest) {
	cl := pr.In.Context().Value(stateKey{}).(*call)
	up := cl.rt.up
	u := *up.base
	u.Path = up.base.Path + strings.TrimPrefix(pr.In.URL.Path, up.strip)
	u.RawPath = ""
	u.RawQuery = pr.In.URL.RawQuery
	pr.Out.URL = &u
	pr.Out.Host = ""
	h := pr.Out.Header
	h.Del("Authorization")
	h.Del("X-Api-Key")
	h.Del("Cookie")
	// The gateway reads the answer as it passes: let the transport ask
	// for compression and undo it, rather than forward what the agent
	// asked for.
	h.Del("Accept-Encoding")
	if up.key != "" {
		if up.name == providerOAI {
			h.Set("Authorization", "Bearer "+up.key)
		} else {
			h.Set("X-Api-Key", up.key)
		}
	}
	pr.Out.Body = io.NopCloser(bytes.NewReader(cl.out))
	pr.Out.ContentLength = int64(len(cl.out))
	pr.Out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(cl.out)), nil }
}

func modifyResponse(resp *http.Response) error {
	cl := resp.Request.Context().Value(stateKey{}).(*call)
	cl.rec.Status = resp.StatusCode
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	stream := ct == "text/event-stream"
	if cl.rt.metered {
		cl.rec.Stream = stream
	}
	metered := cl.rt.metered && resp.StatusCode/100 == 2
	mb := &meteredBody{rc: resp.Body, cl: cl, stream: stream && metered, whole: !stream && metered,
		hash: sha256.New(), keep: cl.g.o.KeepBytes, saving: metered && cl.storable(), ctype: resp.Header.Get("Content-Type")}
	mb.sse.dispatch = mb.dispatch
	cl.body = mb
	resp.Body = mb
	return nil
}

func proxyError(w http.ResponseWriter, r *http.Request, err error) {
	cl := r.Context().Value(stateKey{}).(*call)
	if r.Context().Err() != nil {
		cl.rec.Err = "the agent went away before the provider answered"
		cl.rec.Cut = "client"
		cl.rec.Status = 499 // nothing was written: nginx's "client closed request", for the record only
		return
	}
	msg := "the provider could not be reached: " + err.Error()
	cl.rec.Status = writeError(w, cl.provider, kindUpstream, msg)
	cl.rec.Err = msg
	cl.wrote = true
}

// finish completes the call's record once the proxy returned; aborted is
// set when it aborted the response (a failed read or write mid-body).
func (cl *call) finish(ctx context.Context, aborted bool) Call {
	rec := cl.rec
	now := cl.g.nowFunc()
	rec.Duration = now.Sub(rec.Start)
	rec.RequestSHA256 = digest(cl.in)
	if len(cl.in) > 0 && len(cl.in) <= cl.g.o.KeepBytes && json.Valid(cl.in) {
		rec.Request = cl.in
	}
	mb := cl.body
	if mb != nil {
		rec.FirstByte = mb.firstByte
		rec.ResponseSHA256 = hex.EncodeToString(mb.hash.Sum(nil))
		if !mb.keepOver {
			rec.Response = keptBody(mb.kept, mb.stream)
		}
	}
	if cl.c.model != "" {
		rec.Model = cl.c.model
	}
	if mb != nil && cl.rt.metered && rec.Status/100 == 2 {
		cl.meterResponse(&rec, ctx, aborted)
	} else if mb != nil && rec.Status/100 != 2 && rec.Err == "" {
		rec.Err = fmt.Sprintf("the provider answered HTTP %d: %s", rec.Status, snippet(mb.kept))
	}
	if cl.span != nil {
		endSpan(cl.span, &rec)
	}
	return rec
}

// meterResponse sets a successful metered call's usage, cost and cut.
func (cl *call) meterResponse(rec *Call, ctx context.Context, aborted bool) {
	mb := cl.body
	if !mb.stream {
		if mb.jsonOver {
			cl.c.fail(errors.New("the response is over 16 MiB: not metered"))
		} else if mb.readErr == nil && !aborted && !mb.decoded {
			cl.c.decodeJSON(mb.json)
		}
	}
	if mb.sse.err != nil {
		cl.c.fail(mb.sse.err)
	}
	switch {
	case mb.cut != "":
		rec.Cut = mb.cut
	case cl.c.final:
	case ctx.Err() != nil || aborted && mb.readErr == nil:
		rec.Cut = "client"
	case mb.readErr != nil || mb.stream:
		rec.Cut = "upstream"
	}
	rec.Usage = cl.c.estimate()
	rec.Usage.Model = rec.Model
	rec.Usage.CostUSD = cl.g.o.Prices.Cost(rec.Model, rec.Usage)
	var why []string
	switch rec.Cut {
	case "cap":
		why = append(why, "the answer crossed the episode's budget and was cut")
	case "client":
		why = append(why, "the agent went away before the answer's end")
	case "upstream":
		why = append(why, "the provider's answer ended before its usage")
	}
	if cl.c.err != nil {
		why = append(why, "metering: "+cl.c.err.Error())
	}
	if !cl.c.final {
		why = append(why, "usage estimated from the request's size and the forwarded answer")
	}
	if len(why) > 0 {
		rec.Err = strings.Join(why, "; ")
	}
}

// keptBody is a response as a call's record keeps it: JSON as it is, a
// stream (or anything else) as a JSON string.
func keptBody(b []byte, stream bool) json.RawMessage {
	if b == nil {
		return nil
	}
	if !stream && json.Valid(b) {
		return b
	}
	s, _ := json.Marshal(string(b))
	return s
}

// snippet is the start of an error body, for a call's Err.
func snippet(b []byte) string {
	const n = 300
	s := strings.ToValidUTF8(string(b[:min(len(b), n)]), "?")
	if len(b) > n {
		s += "…"
	}
	return strings.TrimSpace(s)
}

// meteredBody is a response body on its way to the agent: it hashes and
// keeps what passes, parses a stream's events as they pass, and cuts a
// stream that crosses the episode's budget.
type meteredBody struct {
	rc        io.ReadCloser
	cl        *call
	stream    bool
	sse       sseParser
	hash      hash.Hash
	keep      int
	kept      []byte
	keepOver  bool
	whole     bool   // a non-streamed metered answer: kept in json to read its usage
	json      []byte // at the end
	jsonOver  bool
	decoded   bool // json is whole and was decoded
	firstByte time.Duration
	pending   []byte // the error event of a cut stream, still to send
	cut       string
	done      bool
	readErr   error
	// The call store's (replay.go): saving keeps the whole answer in
	// saved; once the answer is complete, its tail is held back until it
	// is stored, so that the agent never reads an answer's end before the
	// store has it.
	saving  bool
	saved   []byte
	ctype   string
	tail    []byte
	tailErr error
}

// Read is read, for an answer the store keeps: once its usage came (its
// last events or bytes are passing), what is left of it is read whole
// and stored before it goes on.
func (mb *meteredBody) Read(p []byte) (int, error) {
	if mb.tail != nil || mb.tailErr != nil {
		n := copy(p, mb.tail)
		mb.tail = mb.tail[n:]
		if len(mb.tail) == 0 {
			mb.tail = nil
			if n == 0 {
				return 0, mb.tailErr
			}
		}
		return n, nil
	}
	n, err := mb.read(p)
	if !mb.saving {
		return n, err
	}
	mb.save(p[:n])
	complete := mb.stream && mb.cl.c.final || mb.whole && mb.decoded
	if err != nil || !complete || mb.cut != "" {
		if err == io.EOF && mb.saving && mb.cut == "" && complete {
			mb.cl.storeAnswer(mb.saved, mb.stream, mb.ctype)
		}
		return n, err
	}
	tail := append([]byte(nil), p[:n]...)
	buf := make([]byte, 32<<10)
	for err == nil {
		var k int
		k, err = mb.read(buf)
		mb.save(buf[:k])
		tail = append(tail, buf[:k]...)
	}
	if err == io.EOF && mb.saving && mb.cut == "" {
		mb.cl.storeAnswer(mb.saved, mb.stream, mb.ctype)
	}
	mb.tail, mb.tailErr = tail, err
	return mb.Read(p)
}

// save keeps b for the store, up to maxStoredBytes.
func (mb *meteredBody) save(b []byte) {
	if len(mb.saved)+len(b) > maxStoredBytes {
		mb.saving, mb.saved = false, nil
		return
	}
	mb.saved = append(mb.saved, b...)
}

func (mb *meteredBody) read(p []byte) (int, error) {
	if mb.done {
		return 0, io.EOF
	}
	if mb.cut != "" {
		n := copy(p, mb.pending)
		mb.pending = mb.pending[n:]
		mb.done = len(mb.pending) == 0
		mb.pass(p[:n])
		return n, nil
	}
	n, err := mb.rc.Read(p)
	if n > 0 {
		if mb.firstByte == 0 {
			mb.firstByte = max(mb.cl.g.nowFunc().Sub(mb.cl.rec.Start), 1)
		}
		if mb.stream {
			if k, stopped := mb.sse.feed(p[:n]); stopped {
				n, err = k, nil
				mb.cut = "cap"
				mb.pending = errorEvent(mb.cl.rt.api, "the episode's budget is spent: the answer was cut")
				mb.rc.Close() // the provider stops generating
			}
			mb.cl.hold()
		} else if mb.whole && !mb.jsonOver {
			if len(mb.json)+n > maxMeteredJSON {
				mb.json, mb.jsonOver = nil, true
			} else {
				mb.json = append(mb.json, p[:n]...)
				if !mb.decoded && wholeJSON(mb.json) {
					// The answer is all here: meter it before its last
					// bytes go on (hold).
					mb.cl.c.decodeJSON(mb.json)
					mb.decoded = true
					mb.cl.hold()
				}
			}
		}
		mb.pass(p[:n])
	}
	if err != nil && err != io.EOF {
		mb.readErr = err
	}
	return n, err
}

// wholeJSON reports whether b is a whole JSON object (checked only once
// it ends as one could).
func wholeJSON(b []byte) bool {
	b = bytes.TrimRight(b, " \t\r\n")
	return len(b) > 0 && b[len(b)-1] == '}' && json.Valid(b)
}

// pass hashes and keeps bytes on their way to the agent.
func (mb *meteredBody) pass(b []byte) {
	mb.hash.Write(b)
	if mb.keepOver {
		return
	}
	if len(mb.kept)+len(b) > mb.keep {
		mb.kept, mb.keepOver = nil, true
		return
	}
	mb.kept = append(mb.kept, b...)
}

// dispatch meters one event; true cuts the stream after it.
func (mb *meteredBody) dispatch(name string, data []byte) bool {
	c := &mb.cl.c
	seen := c.congested
	c.event(name, data)
	if c.congested && !seen && mb.cl.congestedMidStream != nil {
		mb.cl.congestedMidStream()
	}
	b := mb.cl.budget
	if !b.Capped || c.final {
		return false
	}
	est := c.estimate()
	return est.Tokens() > b.Tokens || mb.cl.g.o.Prices.Cost(c.model, est) > b.CostUSD
}

func (mb *meteredBody) Close() error {
	if mb.cut != "" {
		return nil // closed when cut
	}
	return mb.rc.Close()
}
