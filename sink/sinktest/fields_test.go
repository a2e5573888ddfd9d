package sinktest

import (
	"reflect"
	"testing"
	"time"
)

// TestCoversEveryField guards the suite against a field added to
// sink.Record later: full sets every field (so AllFields round-trips it),
// and quickEqual, which lets ManyRecords skip cmp, sees a change in each.
func TestCoversEveryField(t *testing.T) {
	t.Parallel()
	r := full(1)
	v := reflect.ValueOf(r)
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if v.Field(i).IsZero() {
			t.Errorf("full(1) leaves %s at its zero value", name)
		}
		changed := clone(r)
		if err := change(reflect.ValueOf(&changed).Elem().Field(i)); err != "" {
			t.Fatalf("%s: %s", name, err)
		}
		if quickEqual(&r, &changed) {
			t.Errorf("quickEqual does not compare %s", name)
		}
	}
}

// change sets f to a value other than its own.
func change(f reflect.Value) string {
	switch f.Kind() {
	case reflect.String:
		f.SetString(f.String() + "x")
	case reflect.Int, reflect.Int64:
		f.SetInt(f.Int() + 1)
	case reflect.Uint64:
		f.SetUint(f.Uint() + 1)
	case reflect.Float64:
		f.SetFloat(f.Float() + 1)
	case reflect.Slice:
		f.SetBytes(append(f.Bytes(), ' '))
	case reflect.Map:
		f.SetMapIndex(reflect.ValueOf("added-key"), reflect.Zero(f.Type().Elem()))
	default:
		ts, ok := f.Addr().Interface().(*time.Time)
		if !ok {
			return "no way to change a " + f.Type().String()
		}
		*ts = ts.Add(time.Second)
	}
	return ""
}
