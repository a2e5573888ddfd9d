package report_test

import (
	"fmt"
	"testing"

	"github.com/proctor-evals/proctor/eval/report"
)

func TestTraceURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, template, trace, span, want string
	}{
		{"jaeger", "http://localhost:16686/trace/{trace_id}", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7",
			"http://localhost:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736"},
		{"both, twice", "https://t.example/{trace_id}?span={span_id}#{span_id}", "ab", "cd", "https://t.example/ab?span=cd#cd"},
		{"no template: no link", "", "ab", "cd", ""},
		{"no trace ID: no link", "http://x/{trace_id}", "", "cd", ""},
		{"the span is named but absent: no link", "http://x/{trace_id}/{span_id}", "ab", "", ""},
		{"the span is not named: not needed", "http://x/{trace_id}", "ab", "", "http://x/ab"},
		{"hostile IDs stay in their place", "http://x/trace/{trace_id}?s={span_id}", "../../admin?x=1#", "a&b=c d",
			"http://x/trace/..%2F..%2Fadmin%3Fx%3D1%23?s=a%26b%3Dc%20d"},
		{"non-ASCII is percent-encoded by byte", "http://x/{trace_id}", "é\"<", "", "http://x/%C3%A9%22%3C"},
	} {
		if got := report.TraceURL(tc.template, tc.trace, tc.span); got != tc.want {
			t.Errorf("%s: TraceURL(%q, %q, %q) = %q, want %q", tc.name, tc.template, tc.trace, tc.span, got, tc.want)
		}
	}
}

func ExampleTraceURL() {
	fmt.Println(report.TraceURL("http://localhost:16686/trace/{trace_id}", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"))
	// Output: http://localhost:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736
}
