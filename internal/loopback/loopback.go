// Package loopback guards a server bound to a loopback address against
// DNS rebinding: a page elsewhere whose name resolves to 127.0.0.1 must
// not read it.
package loopback

import (
	"net"
	"net/http"
	"strings"
)

// Only serves h to requests whose Host is a loopback name or address, and
// refuses the others (421 Misdirected Request).
func Only(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Host(r.Host) {
			http.Error(w, "this viewer answers only to a loopback host name", http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Guard returns h guarded by Only when addr, a listener's address, is a
// loopback one; elsewhere the operator chose who reaches it.
func Guard(h http.Handler, addr net.Addr) http.Handler {
	if a, ok := addr.(*net.TCPAddr); ok && a.IP.IsLoopback() {
		return Only(h)
	}
	return h
}

// Host reports whether host (a request's Host: a name or an address,
// with or without a port) is "localhost" or a loopback address.
func Host(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return host == "localhost" || ip != nil && ip.IsLoopback()
}
