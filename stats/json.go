package stats

import (
	"bytes"
	"encoding/json"
	"math"
)

// Float is a float64 statistic in JSON: NaN (undefined, e.g. the standard
// error of one observation) and ±Inf, which JSON cannot hold and
// encoding/json refuses, are written as null; null reads back as NaN.
// [Interval] and [Difference] marshal their fields as Floats; a type that
// holds statistics in other float64 fields uses it to marshal them the
// same way.
type Float float64

// MarshalJSON writes f as a JSON number, or null when it is not finite.
func (f Float) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(f))
}

// UnmarshalJSON reads a JSON number, or null as NaN.
func (f *Float) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*f = Float(math.NaN())
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = Float(v)
	return nil
}

// intervalJSON is the JSON form of an Interval.
type intervalJSON struct {
	Lo     Float  `json:"lo"`
	Hi     Float  `json:"hi"`
	Level  Float  `json:"level"`
	Method string `json:"method,omitempty"`
}

// MarshalJSON writes the interval in snake_case, undefined bounds as null.
func (iv Interval) MarshalJSON() ([]byte, error) {
	return json.Marshal(intervalJSON{Float(iv.Lo), Float(iv.Hi), Float(iv.Level), iv.Method})
}

// UnmarshalJSON reads what MarshalJSON writes; a null bound reads as NaN.
func (iv *Interval) UnmarshalJSON(b []byte) error {
	var v intervalJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*iv = Interval{float64(v.Lo), float64(v.Hi), float64(v.Level), v.Method}
	return nil
}

// differenceJSON is the JSON form of a Difference: a is the base, b the
// head, as in Paired's usual use.
type differenceJSON struct {
	Mean        Float `json:"mean"`
	SE          Float `json:"se"`
	Lo          Float `json:"lo"`
	Hi          Float `json:"hi"`
	Level       Float `json:"level"`
	P           Float `json:"p"`
	Correlation Float `json:"correlation"`
	N           int   `json:"n"`
	MeanA       Float `json:"mean_base"`
	MeanB       Float `json:"mean_head"`
}

// MarshalJSON writes the difference in snake_case, MeanA as mean_base and
// MeanB as mean_head, undefined statistics as null.
func (d Difference) MarshalJSON() ([]byte, error) {
	return json.Marshal(differenceJSON{Float(d.Mean), Float(d.SE), Float(d.Lo), Float(d.Hi), Float(d.Level),
		Float(d.P), Float(d.Correlation), d.N, Float(d.MeanA), Float(d.MeanB)})
}

// UnmarshalJSON reads what MarshalJSON writes; null reads as NaN.
func (d *Difference) UnmarshalJSON(b []byte) error {
	var v differenceJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*d = Difference{float64(v.Mean), float64(v.SE), float64(v.Lo), float64(v.Hi), float64(v.Level),
		float64(v.P), float64(v.Correlation), v.N, float64(v.MeanA), float64(v.MeanB)}
	return nil
}
