// Package httpapi is the HTTP plumbing the provider packages share: one
// JSON POST, a capped response body, and typed errors. Retries and
// concurrency limits are not here: they are judge.Retry and judge.Limit,
// which wrap any model.
package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/internal/retryafter"
	"github.com/proctor-evals/proctor/judge"
)

// DefaultMaxBody is the default cap of a successful response's body. A
// grader's answer is bounded by its max_tokens, so a body near this size is
// not an answer worth reading.
const DefaultMaxBody = 32 << 20

const maxErrorBody = 64 << 10

// Client sends JSON requests to one provider.
type Client struct {
	Provider string
	HTTP     *http.Client // nil: http.DefaultClient
	MaxBody  int64        // cap of a 2xx body; ≤ 0: DefaultMaxBody
	// ParseError extracts the provider's error type and message from an
	// error body; nil or empty results fall back to the body's start.
	ParseError func(body []byte) (typ, msg string)
}

// Post sends body to url with the headers and returns the body of a 2xx
// response. An HTTP error status is a *judge.APIError (with the
// Retry-After hint); a 2xx body over MaxBody is an unscored error whose
// reason starts "response too large", never a cut body; a request that
// cannot be built is permanent. Post makes one attempt.
func (c *Client) Post(ctx context.Context, url string, header http.Header, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, judge.Permanent(fmt.Errorf("%s: %w", c.Provider, err))
	}
	req.Header = header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Provider, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		limit := c.MaxBody
		if limit <= 0 {
			limit = DefaultMaxBody
		}
		// Read one byte past the cap to tell a body of exactly the cap
		// from a longer one.
		b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		if err != nil {
			return nil, fmt.Errorf("%s: reading the response: %w", c.Provider, err)
		}
		if int64(len(b)) > limit {
			return nil, fmt.Errorf("%s: %w", c.Provider, judge.Unscored(fmt.Sprintf(
				"response too large: the %s response body exceeds %d bytes", c.Provider, limit)))
		}
		return b, nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	ae := &judge.APIError{Provider: c.Provider, StatusCode: resp.StatusCode}
	if d, ok := retryafter.Parse(resp.Header.Get("Retry-After"), time.Now()); ok {
		ae.RetryAfter = d
	}
	if c.ParseError != nil {
		ae.Type, ae.Message = c.ParseError(b)
	}
	if ae.Message == "" {
		ae.Message = strings.TrimSpace(string(b[:min(len(b), 300)]))
	}
	return nil, ae
}
