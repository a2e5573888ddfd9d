package gatewaytest

import (
	"io"
	"net/http"
	"sync"
)

// Transport returns a RoundTripper that serves requests in this process,
// with the provider's handler and no socket: a gateway given it (as
// Options.Transport) and the provider run wholly inside a testing/synctest
// bubble, where a rate limit's seconds pass at once. A streamed answer
// passes through a pipe as the handler writes it.
func (p *Provider) Transport() http.RoundTripper { return inProcess{p.Config.Handler} }

type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	r := req.Clone(req.Context())
	if r.Body == nil {
		r.Body = http.NoBody
	}
	go func() {
		defer func() {
			w.WriteHeader(http.StatusOK)
			pw.Close()
		}()
		t.h.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	return &http.Response{Status: http.StatusText(w.status), StatusCode: w.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: pr, ContentLength: -1, Request: req}, nil
}

// pipeWriter is an http.ResponseWriter whose body goes into a pipe.
type pipeWriter struct {
	header, sent http.Header
	status       int
	pw           *io.PipeWriter
	once         sync.Once
	ready        chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.status, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(b)
}

func (w *pipeWriter) Flush() {}
