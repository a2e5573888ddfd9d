package judge

import (
	"context"
	"time"
)

// SetRetrySleep replaces the wait between retries, so tests observe the
// waits Retry chooses without spending them.
func SetRetrySleep(o *RetryOptions, f func(ctx context.Context, d time.Duration) error) { o.sleep = f }

// Sleep is the wait Retry uses by default.
var Sleep = sleep
