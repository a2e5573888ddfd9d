package gateway

import (
	"bytes"
	"errors"
)

// maxEventBytes bounds one server-sent event's buffered lines: a stream
// whose event grows past it is still forwarded, but no longer parsed.
const maxEventBytes = 8 << 20

var errEventTooLarge = errors.New("gateway: a server-sent event over 8 MiB: the stream is no longer metered")

// sseParser parses a server-sent event stream incrementally, as its bytes
// pass (the text/event-stream format of the HTML standard: lines end in
// LF, CRLF or CR; "event:" and "data:" fields; a blank line dispatches).
// It holds only the event being read, never the stream.
type sseParser struct {
	line    []byte // the current line, when a chunk ended inside it
	event   []byte // the event field
	data    []byte // data lines joined by LF
	hasData bool
	lastCR  bool  // the previous chunk ended in CR: a following LF ends nothing
	err     error // set once an event grew past maxEventBytes
	// dispatch receives each event; returning true stops the parse there.
	dispatch func(event string, data []byte) (stop bool)
}

// feed parses p. It returns how many bytes of p were consumed: len(p), or,
// when dispatch asked to stop, the bytes up to and including the blank line
// that ended the stopping event.
func (s *sseParser) feed(p []byte) (n int, stopped bool) {
	if s.err != nil {
		return len(p), false
	}
	i := 0
	if s.lastCR && len(p) > 0 && p[0] == '\n' {
		i = 1
	}
	s.lastCR = false
	for i < len(p) {
		j := bytes.IndexAny(p[i:], "\r\n")
		if j < 0 {
			if len(s.line)+len(p)-i > maxEventBytes {
				s.fail()
				return len(p), false
			}
			s.line = append(s.line, p[i:]...)
			return len(p), false
		}
		end := i + j
		var line []byte
		if len(s.line) > 0 {
			s.line = append(s.line, p[i:end]...)
			line = s.line
		} else {
			line = p[i:end]
		}
		next := end + 1
		if p[end] == '\r' {
			if next < len(p) {
				if p[next] == '\n' {
					next++
				}
			} else {
				s.lastCR = true
			}
		}
		stop := s.processLine(line)
		s.line = s.line[:0]
		if s.err != nil {
			return len(p), false
		}
		i = next
		if stop {
			return i, true
		}
	}
	return len(p), false
}

func (s *sseParser) fail() {
	s.err = errEventTooLarge
	s.line, s.event, s.data = nil, nil, nil
}

// processLine handles one line; true when a dispatched event asked to stop.
func (s *sseParser) processLine(line []byte) bool {
	if len(line) == 0 {
		if !s.hasData {
			s.event = s.event[:0]
			return false
		}
		stop := s.dispatch(string(s.event), s.data)
		s.event, s.data, s.hasData = s.event[:0], s.data[:0], false
		return stop
	}
	if line[0] == ':' {
		return false // a comment
	}
	field, value, found := bytes.Cut(line, []byte(":"))
	if found && len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(field) {
	case "event":
		s.event = append(s.event[:0], value...)
	case "data":
		if len(s.data)+len(value)+1 > maxEventBytes {
			s.fail()
			return false
		}
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.hasData = true
	}
	return false
}
