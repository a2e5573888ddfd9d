package recordjson

import (
	"encoding/json"

	"github.com/proctor-evals/proctor/internal/jsontext"
	"github.com/proctor-evals/proctor/sink"
)

// Light is a record line as a fold over a log reads it: the record without
// its input, output and scores, its strings sharing the line's memory
// (DecodeOptions.Alias), and its tags left as the raw object for the fold
// to decode once a sample (TagSets).
type Light struct {
	sink.Record
	// RawTags is the line's tags object, validated, sharing the line's
	// memory; nil when the line has none or is not in the canonical form,
	// in which case Record.Tags holds the tags.
	RawTags []byte
}

var lightDecode = DecodeOptions{NoRaw: true, NoMaps: true, Alias: true}

// DecodeLight decodes a record line into l, which it zeroes first: it
// accepts and rejects exactly what DecodeLine does, with the same error.
func DecodeLight(line []byte, l *Light) error {
	*l = Light{}
	var c canonLine
	if c.scan(line) {
		c.alias = true
		c.decode(line, &l.Record, lightDecode)
		if c.has&(1<<fTags) != 0 {
			l.RawTags = line[c.spans[fTags][0]:c.spans[fTags][1]:c.spans[fTags][1]]
		}
		return nil
	}
	err := json.Unmarshal(line, &l.Record)
	l.Input, l.Output, l.Scores = nil, nil, nil
	return err
}

// TagSets turns the raw tags of record lines into maps, one for each
// distinct tag set: a run has a few tag sets and many samples, which then
// share their map. Whoever is given one must not change it.
type TagSets struct {
	sets map[string]map[string]string // by the raw object
}

// maxTagSets bounds the table: tags unique to each sample (an ID as a
// tag, say) get a map each, as they would anyway.
const maxTagSets = 4096

// Of returns the tags of l: its map of the raw object (nil for none), or
// the map the fallback decode made.
func (t *TagSets) Of(l *Light) map[string]string {
	if l.RawTags == nil {
		return l.Tags
	}
	if m, ok := t.sets[string(l.RawTags)]; ok {
		return m
	}
	m := decodeTags(l.RawTags)
	if t.sets == nil {
		t.sets = map[string]map[string]string{}
	}
	if len(t.sets) < maxTagSets {
		t.sets[string(l.RawTags)] = m
	}
	return m
}

// decodeTags decodes a tags object scanMap validated, as encoding/json
// decodes it into a map: a key given twice keeps its last value, and an
// empty object is an empty map.
func decodeTags(b []byte) map[string]string {
	m := map[string]string{}
	for i, end := 1, len(b)-1; i < end; {
		j, _, _ := jsontext.ScanString(b, i, false)
		k := string(unescape(nil, b[i+1:j-1]))
		v := j + 1 // after ':'
		j, _, _ = jsontext.ScanString(b, v, false)
		m[k] = string(unescape(nil, b[v+1:j-1]))
		i = j + 1 // after ','
	}
	return m
}
