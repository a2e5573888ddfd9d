package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Error kinds, mapped to each provider's error type.
const (
	kindAuth      = "auth"      // 401: no valid token
	kindNotFound  = "not_found" // 404: a path the gateway does not serve
	kindInvalid   = "invalid"   // 400: a malformed request
	kindTooLarge  = "too_large" // 413: a request over maxRequestBytes
	kindBudget    = "budget"    // the episode's budget is spent
	kindUpstream  = "upstream"  // 502: the provider could not be reached
	providerOAI   = "openai"
	providerAnthr = "anthropic"
)

// status is the HTTP status of an error kind for a provider. A spent budget
// is what each provider answers for an account out of credit: OpenAI 429
// insufficient_quota, Anthropic 400 invalid_request_error ("credit balance
// is too low"); both are shown by agent CLIs as API errors, and
// Anthropic's SDKs do not retry a 400.
func status(provider, kind string) int {
	switch kind {
	case kindAuth:
		return http.StatusUnauthorized
	case kindNotFound:
		return http.StatusNotFound
	case kindTooLarge:
		return http.StatusRequestEntityTooLarge
	case kindUpstream:
		return http.StatusBadGateway
	case kindBudget:
		if provider == providerOAI {
			return http.StatusTooManyRequests
		}
	}
	return http.StatusBadRequest
}

// errorType is the provider's own error type for a kind.
func errorType(provider, kind string) string {
	if provider == providerOAI {
		switch kind {
		case kindAuth:
			return "invalid_api_key"
		case kindBudget:
			return "insufficient_quota"
		case kindUpstream:
			return "server_error"
		case kindNotFound:
			return "not_found"
		}
		return "invalid_request_error"
	}
	switch kind {
	case kindAuth:
		return "authentication_error"
	case kindNotFound:
		return "not_found_error"
	case kindTooLarge:
		return "request_too_large"
	case kindUpstream:
		return "api_error"
	}
	return "invalid_request_error"
}

// errorBody is the provider's error JSON.
func errorBody(provider, kind, msg string) []byte {
	msg = "proctor gateway: " + msg
	var v any
	if provider == providerOAI {
		typ := errorType(provider, kind)
		v = map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": typ}}
	} else {
		v = map[string]any{"type": "error", "error": map[string]any{"type": errorType(provider, kind), "message": msg}}
	}
	b, _ := json.Marshal(v)
	return b
}

// writeError answers a call the gateway refuses, in the provider's shape,
// and returns the status written.
func writeError(w http.ResponseWriter, provider, kind, msg string) int {
	code := status(provider, kind)
	b := errorBody(provider, kind, msg)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	if provider == providerAnthr {
		h.Set("x-should-retry", "false")
	}
	w.WriteHeader(code)
	w.Write(b)
	return code
}

// errorEvent is the server-sent event that ends a stream the gateway cuts,
// in the API's own error shape, so that the agent's SDK raises an API error.
func errorEvent(api, msg string) []byte {
	msg = "proctor gateway: " + msg
	var name string
	var v any
	switch api {
	case apiChat:
		v = map[string]any{"error": map[string]any{"message": msg, "type": "insufficient_quota", "param": nil, "code": "insufficient_quota"}}
	case apiResponses:
		name = "error"
		v = map[string]any{"type": "error", "code": "insufficient_quota", "message": msg, "param": nil}
	default:
		name = "error"
		v = map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}}
	}
	b, _ := json.Marshal(v)
	out := make([]byte, 0, len(b)+32)
	if name != "" {
		out = append(out, "event: "+name+"\n"...)
	}
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}
