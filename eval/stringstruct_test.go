package eval

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

type tagged struct {
	Prompt   string `json:"prompt"`
	Expected string `json:"expected"`
}

type mixedTags struct {
	A      string
	B      string `json:"b,omitempty"`
	hidden string
	D      string `json:"-"`
	//lint:ignore SA5008 the name "-", as encoding/json reads it: covered on purpose
	E   string `json:"-,"`
	F   string `json:",omitempty"`
	G_1 string `json:"g-1"`
}

// TestStringStructWritesAsEncodingJSON: for the struct types
// newStringStruct takes, its bytes are encoding/json's, over 3,000 values
// each (seeded) of strings full of what JSON escapes: quotes,
// backslashes, control bytes, <, > and &, U+2028/2029, invalid UTF-8,
// and empty strings for omitempty.
func TestStringStructWritesAsEncodingJSON(t *testing.T) {
	pieces := []string{"", "a", "Z9", `"`, `\`, "<", ">", "&", "\n", "\t", "\x00", "\x1f", "\x7f", "\u2028", "\u2029",
		"\xff", "\xe2\x80", "é", "日本", "🙂", "</script>", strings.Repeat("x", 17), " ", "{}"}
	rng := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	check := func(v any, p unsafe.Pointer, w *stringStruct) {
		t.Helper()
		want, err := json.Marshal(v)
		require.NoError(t, err)
		require.Equal(t, string(want), string(w.append(nil, p)))
	}
	wt := newStringStruct(reflect.TypeFor[tagged]())
	wm := newStringStruct(reflect.TypeFor[mixedTags]())
	require.NotNil(t, wt)
	require.NotNil(t, wm)
	for range 3000 {
		a := tagged{str(), str()}
		check(&a, unsafe.Pointer(&a), wt)
		m := mixedTags{str(), str(), str(), str(), str(), str(), str()}
		check(&m, unsafe.Pointer(&m), wm)
	}
	var empty mixedTags
	check(&empty, unsafe.Pointer(&empty), wm)
	type none struct{}
	check(&none{}, unsafe.Pointer(&none{}), newStringStruct(reflect.TypeFor[none]()))
}

type named string

type textual struct{ A string }

func (textual) MarshalText() ([]byte, error) { return []byte("t"), nil }

type ptrMarshaler struct{ A string }

func (*ptrMarshaler) MarshalJSON() ([]byte, error) { return []byte(`"p"`), nil }

type embedded struct{ tagged }

// TestStringStructLeavesOtherTypesToEncodingJSON: any type but a struct
// of plain strings under simple names is not taken.
func TestStringStructLeavesOtherTypesToEncodingJSON(t *testing.T) {
	for _, typ := range []reflect.Type{
		reflect.TypeFor[string](),
		reflect.TypeFor[map[string]string](),
		reflect.TypeFor[struct{ A, B int }](),
		reflect.TypeFor[struct{ T time.Time }](),
		reflect.TypeFor[struct{ A named }](),
		reflect.TypeFor[struct {
			A string `json:",string"`
		}](),
		reflect.TypeFor[struct {
			A string `json:"a,omitzero"`
		}](),
		reflect.TypeFor[struct {
			A string `json:"a b"`
		}](),
		reflect.TypeFor[struct {
			A string
			B string `json:"A"`
		}](),
		reflect.TypeFor[struct{ Ü string }](),
		reflect.TypeFor[textual](),
		reflect.TypeFor[ptrMarshaler](),
		reflect.TypeFor[embedded](),
	} {
		require.Nil(t, newStringStruct(typ), "%v", typ)
	}
}
