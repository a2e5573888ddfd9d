package eval

import (
	"testing"

	"go.opentelemetry.io/otel"
	lognoop "go.opentelemetry.io/otel/log/noop"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// The free path of a run with nothing configured rests on recognizing
// the otel package's placeholder globals: an upgrade that moves them
// must fail here, not make every episode pay for non-recording spans.
// (No test of this package installs a global provider.)
func TestUnsetProviders(t *testing.T) {
	for _, tc := range []struct {
		name  string
		p     any
		unset bool
	}{
		{"global tracer provider, none installed", otel.GetTracerProvider(), true},
		{"global logger provider, none installed", otel.GetLoggerProvider(), true},
		{"trace/noop", tracenoop.NewTracerProvider(), true},
		{"log/noop", lognoop.NewLoggerProvider(), true},
		{"SDK tracer provider", sdktrace.NewTracerProvider(), false},
		{"SDK logger provider", sdklog.NewLoggerProvider(), false},
	} {
		if got := unsetProvider(tc.p); got != tc.unset {
			t.Errorf("%s (%T): unsetProvider = %v, want %v", tc.name, tc.p, got, tc.unset)
		}
	}
	if tel := newTelemetry(&Config{}); tel.tracer != nil || tel.events != nil {
		t.Errorf("newTelemetry of the zero Config = %+v, want both off", tel)
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"0123456789", 10, "0123456789"},
		{"0123456789ab", 10, "0123456…"},
		{"ééééé", 7, "éé…"}, // never a cut rune
	} {
		if got := clip(tc.in, tc.n); got != tc.want || len(got) > tc.n {
			t.Errorf("clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
