package report

import "strings"

// TraceURL fills a trace-viewer URL template with an episode's
// OpenTelemetry trace and span IDs: "{trace_id}" and "{span_id}" are
// replaced, for example
//
//	TraceURL("http://localhost:16686/trace/{trace_id}", r.TraceID, r.SpanID)
//
// It returns "" when the template or the trace ID is empty, or when the
// template names the span and the span ID is empty: no link beats a
// broken one. The IDs come from records, which an agent may have shaped,
// so every byte outside [A-Za-z0-9-._~] is percent-encoded: an ID cannot
// add a path segment, a query parameter or a fragment to the URL. (W3C
// trace and span IDs are hex, and pass through unchanged.)
func TraceURL(template, traceID, spanID string) string {
	if template == "" || traceID == "" || strings.Contains(template, "{span_id}") && spanID == "" {
		return ""
	}
	return strings.NewReplacer("{trace_id}", escapeID(traceID), "{span_id}", escapeID(spanID)).Replace(template)
}

// escapeID percent-encodes every byte but the unreserved characters of
// RFC 3986, which are safe in a path segment, a query value and a fragment.
func escapeID(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}
