package jsontext

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
)

var numberInputs = []string{
	"0", "-0", "1", "-1", "7", "120", "01", "-01", "00", "0.5", "-0.5", "00.5", "0.0001", "1.", "-", ".5", "1e3", "1E3", "1.5e-7",
	"0.1", "0.2", "0.3", "123456789012345", "1234567890123456", "12345678901234567", "0.123456789012345", "9007199254740993",
	"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
	"999999999999999999", "1000000000000000000", "9999999999999999999", "10000000000000000000",
	"18446744073709551615", "18446744073709551616", "99999999999999999999", "123456789012345678901",
	"1x", "1,", "1}", "0.5,", "-0.0", "1e", "2.5E+3", "1.7976931348623157e308", "1e999", "4.9e-324",
}

// FuzzScanNumber: ScanInt, ScanUint and ScanFloat read a number as
// encoding/json reads it into an int64, a uint64 and a float64: the same
// value, accepted or not alike (the number followed by the end of an
// object, as in a record line).
func FuzzScanNumber(f *testing.F) {
	for _, in := range numberInputs {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if strings.ContainsAny(in, " \t\r\n") {
			return // encoding/json skips white space; a record line has none
		}
		checkNumber(t, in)
	})
}

func TestScanNumber(t *testing.T) {
	for _, in := range numberInputs {
		checkNumber(t, in)
	}
	for i := range 100_000 {
		u := math.Float64frombits(uint64(i) * 0x9e3779b97f4a7c15)
		checkNumber(t, strconv.FormatFloat(u, 'f', -1, 64))
		checkNumber(t, strconv.FormatFloat(float64(i)/1000, 'f', -1, 64))
		checkNumber(t, strconv.FormatFloat(float64(i)*0.0001, 'f', -1, 64))
		checkNumber(t, strconv.FormatUint(uint64(i)*0x9e3779b97f4a7c15, 10))
	}
}

func checkNumber(t *testing.T, in string) {
	t.Helper()
	doc := []byte(`{"n":` + in + `}`)
	b := doc[5:] // the number, then the object's end
	end := func(i int, ok bool) bool { return ok && string(b[i:]) == "}" }

	var wi struct{ N int64 }
	errI := json.Unmarshal(doc, &wi)
	i, n, ok := ScanInt(b, 0)
	if end(i, ok) != (errI == nil) || errI == nil && n != wi.N {
		t.Fatalf("ScanInt(%q) = %d, %v (end %d); encoding/json %d, %v", in, n, ok, i, wi.N, errI)
	}

	var wu struct{ N uint64 }
	errU := json.Unmarshal(doc, &wu)
	i, u, ok := ScanUint(b, 0)
	if end(i, ok) != (errU == nil) || errU == nil && u != wu.N {
		t.Fatalf("ScanUint(%q) = %d, %v (end %d); encoding/json %d, %v", in, u, ok, i, wu.N, errU)
	}

	var wf struct{ N float64 }
	errF := json.Unmarshal(doc, &wf)
	i, x, ok := ScanFloat(b, 0)
	if end(i, ok) != (errF == nil) || errF == nil && math.Float64bits(x) != math.Float64bits(wf.N) {
		t.Fatalf("ScanFloat(%q) = %v, %v (end %d); encoding/json %v, %v", in, x, ok, i, wf.N, errF)
	}
}
