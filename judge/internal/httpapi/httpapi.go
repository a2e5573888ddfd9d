// Package httpapi is the HTTP plumbing the provider packages share: bounded
// retries with exponential backoff and full jitter that honour Retry-After,
// a concurrency limit, per-attempt timeouts, and typed errors.
package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/proctor-evals/proctor/judge"
)

// Defaults shared by the providers.
const (
	DefaultMaxAttempts = 4
	DefaultBackoff     = 500 * time.Millisecond
	DefaultMaxBackoff  = 30 * time.Second
	DefaultTimeout     = 2 * time.Minute
	DefaultConcurrency = 16
	// MaxRetryAfter caps how long a Retry-After hint is honoured; a longer
	// one ends the retries with the error.
	MaxRetryAfter = 2 * time.Minute
	maxErrorBody  = 64 << 10
	maxBody       = 32 << 20
)

// Client sends JSON requests to one provider. Build it with New.
type Client struct {
	Provider    string
	HTTP        *http.Client
	MaxAttempts int           // tries per call, including the first
	Backoff     time.Duration // base of the exponential backoff
	MaxBackoff  time.Duration // cap of one backoff
	Timeout     time.Duration // bound of one attempt; 0: none
	// ParseError extracts the provider's error type and message from an
	// error body; nil or empty results fall back to the body's start.
	ParseError func(body []byte) (typ, msg string)
	sem        chan struct{}
	sleep      func(ctx context.Context, d time.Duration) error
}

// New returns a client allowing concurrency requests in flight (≤ 0: the
// default).
func New(provider string, concurrency int) *Client {
	if concurrency <= 0 {
		concurrency = DefaultConcurrency
	}
	return &Client{Provider: provider, HTTP: http.DefaultClient, MaxAttempts: DefaultMaxAttempts,
		Backoff: DefaultBackoff, MaxBackoff: DefaultMaxBackoff, Timeout: DefaultTimeout,
		sem: make(chan struct{}, concurrency), sleep: sleep}
}

// Post sends body to url with the headers and returns the body of a 2xx
// response. Transient faults (429, 5xx, connection errors, an attempt's
// timeout) are retried up to MaxAttempts with backoff; the last error is
// returned, a *judge.APIError for an HTTP error status.
func (c *Client) Post(ctx context.Context, url string, header http.Header, body []byte) ([]byte, error) {
	attempts := max(c.MaxAttempts, 1)
	var last error
	for i := range attempts {
		if i > 0 {
			wait := c.backoff(i)
			var ae *judge.APIError
			if errors.As(last, &ae) && ae.RetryAfter > 0 {
				if ae.RetryAfter > MaxRetryAfter {
					return nil, last
				}
				wait = ae.RetryAfter
			}
			if err := c.sleep(ctx, wait); err != nil {
				return nil, fmt.Errorf("%s: %w (last error: %w)", c.Provider, err, last)
			}
		}
		b, retry, err := c.attempt(ctx, url, header, body)
		if err == nil {
			return b, nil
		}
		last = err
		if !retry || ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

func (c *Client) attempt(ctx context.Context, url string, header http.Header, body []byte) ([]byte, bool, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, false, fmt.Errorf("%s: waiting for a request slot: %w", c.Provider, ctx.Err())
	}
	defer func() { <-c.sem }()
	actx, cancel := ctx, context.CancelFunc(func() {})
	if c.Timeout > 0 {
		actx, cancel = context.WithTimeout(ctx, c.Timeout)
	}
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", c.Provider, err)
	}
	req.Header = header.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		retry, err := c.transportError(ctx, actx, err)
		return nil, retry, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		if err != nil {
			retry, err := c.transportError(ctx, actx, err)
			return nil, retry, err
		}
		return b, false, nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	ae := &judge.APIError{Provider: c.Provider, StatusCode: resp.StatusCode, Retryable: RetryableStatus(resp.StatusCode)}
	if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
		ae.RetryAfter = d
	}
	if c.ParseError != nil {
		ae.Type, ae.Message = c.ParseError(b)
	}
	if ae.Message == "" {
		ae.Message = strings.TrimSpace(string(b[:min(len(b), 300)]))
	}
	return nil, ae.Retryable, ae
}

// transportError classifies a failed round trip: the caller's ctx ending is
// final; an attempt's own timeout and connection faults are retried.
func (c *Client) transportError(ctx, actx context.Context, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, fmt.Errorf("%s: %w", c.Provider, ctx.Err())
	}
	if actx.Err() != nil {
		return true, fmt.Errorf("%s: request timed out after %v: %w", c.Provider, c.Timeout, context.DeadlineExceeded)
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return true, fmt.Errorf("%s: connection: %w", c.Provider, err)
	}
	return true, fmt.Errorf("%s: %w", c.Provider, err)
}

// backoff is the full-jitter exponential backoff before retry i (1-based).
func (c *Client) backoff(i int) time.Duration {
	d := c.Backoff << (i - 1)
	if d <= 0 || d > c.MaxBackoff {
		d = c.MaxBackoff
	}
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d)) + 1)
}

// SetSleep replaces the sleep between retries (tests).
func (c *Client) SetSleep(f func(ctx context.Context, d time.Duration) error) { c.sleep = f }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// RetryableStatus reports whether an HTTP status is worth retrying: 408,
// 409, 429 and every 5xx (Anthropic's 529 overloaded among them).
func RetryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusConflict ||
		code == http.StatusTooManyRequests || code >= 500
}

// ParseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
func ParseRetryAfter(h string, now time.Time) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(h, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}
