package gateway

import (
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
)

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

func (g *Gateway) newProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{FlushInterval: -1, Transport: g.o.Transport}
}

// ServeHTTP serves one call from a sandbox; see the package documentation.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	http.Error(w, "gateway: not implemented yet", http.StatusNotImplemented)
}
