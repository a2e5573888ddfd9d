package sandboxtest

// The suite's checks: each ends the case (t.Fatalf) when it fails, as the
// suite's rules are preconditions of what follows. A public test package
// imports no assertion library (as sinktest), so that a driver's module
// takes on no dependency by running the suite.

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// message formats the optional message of a check, as fmt.Sprintf when it
// has arguments.
func message(msg []any) string {
	switch {
	case len(msg) == 0:
		return ""
	case len(msg) > 1:
		if f, ok := msg[0].(string); ok {
			return ": " + fmt.Sprintf(f, msg[1:]...)
		}
	}
	return ": " + fmt.Sprint(msg...)
}

func noError(t T, err error, msg ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v%s", err, message(msg))
	}
}

func isError(t T, err error, msg ...any) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error, got nil%s", message(msg))
	}
}

func errorIs(t T, err, target error, msg ...any) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v: want one that is %v%s", err, target, message(msg))
	}
}

func errorAs(t T, err error, target any, msg ...any) {
	t.Helper()
	if !errors.As(err, target) {
		t.Fatalf("error %v: want one as %T%s", err, target, message(msg))
	}
}

func equal[V any](t T, want, got V, msg ...any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("got %#v, want %#v%s", got, want, message(msg))
	}
}

func notEqual[V any](t T, unwanted, got V, msg ...any) {
	t.Helper()
	if reflect.DeepEqual(unwanted, got) {
		t.Fatalf("got %#v, want anything else%s", got, message(msg))
	}
}

func isTrue(t T, ok bool, msg ...any) {
	t.Helper()
	if !ok {
		t.Fatalf("want true%s", message(msg))
	}
}

func isFalse(t T, ok bool, msg ...any) {
	t.Helper()
	if ok {
		t.Fatalf("want false%s", message(msg))
	}
}

func zero[V comparable](t T, got V, msg ...any) {
	t.Helper()
	var z V
	if got != z {
		t.Fatalf("got %v, want %v%s", got, z, message(msg))
	}
}

func empty[E any](t T, s []E, msg ...any) {
	t.Helper()
	if len(s) != 0 {
		t.Fatalf("got %v, want none%s", s, message(msg))
	}
}

func notEmpty[E any](t T, s []E, msg ...any) {
	t.Helper()
	if len(s) == 0 {
		t.Fatalf("got none%s", message(msg))
	}
}

func hasLen[E any](t T, s []E, n int, msg ...any) {
	t.Helper()
	if len(s) != n {
		t.Fatalf("got %d elements, want %d%s", len(s), n, message(msg))
	}
}

func less[V cmp.Ordered](t T, a, b V, msg ...any) {
	t.Helper()
	if !(a < b) {
		t.Fatalf("got %v, want less than %v%s", a, b, message(msg))
	}
}

func lessOrEqual[V cmp.Ordered](t T, a, b V, msg ...any) {
	t.Helper()
	if !(a <= b) {
		t.Fatalf("got %v, want at most %v%s", a, b, message(msg))
	}
}

func contains[E comparable](t T, s []E, e E, msg ...any) {
	t.Helper()
	if !slices.Contains(s, e) {
		t.Fatalf("%v does not hold %v%s", s, e, message(msg))
	}
}

func notContains[E comparable](t T, s []E, e E, msg ...any) {
	t.Helper()
	if slices.Contains(s, e) {
		t.Fatalf("%v holds %v%s", s, e, message(msg))
	}
}

func notContainsText(t T, s, sub string, msg ...any) {
	t.Helper()
	if strings.Contains(s, sub) {
		t.Fatalf("%q holds %q%s", s, sub, message(msg))
	}
}
