package tokenizer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner is a minimal JSON reader for the big parts of tokenizer.json (the
// vocabulary object and the merges array). encoding/json would build a
// map[string]any of 260k entries and 515k two-element slices before we could
// even start; scanning the bytes directly and interning into our own tables
// is several times faster and allocates only what we keep.
type scanner struct {
	data []byte
	pos  int
	buf  []byte // scratch for unescaping strings
}

var errJSON = errors.New("malformed JSON")

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", errJSON, s.pos, fmt.Sprintf(format, args...))
}

func (s *scanner) ws() {
	d := s.data
	for s.pos < len(d) {
		switch d[s.pos] {
		case ' ':
			// Pretty-printed files indent with runs of spaces: skip 8 at a time.
			if s.pos+8 <= len(d) && binary.LittleEndian.Uint64(d[s.pos:]) == 0x2020202020202020 {
				s.pos += 8
				continue
			}
			s.pos++
		case '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte without consuming it (0 at the end).
func (s *scanner) peek() byte {
	s.ws()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		if s.pos >= len(s.data) {
			return s.errorf("unexpected end of file, want %q", c)
		}
		return s.errorf("got %q, want %q", s.data[s.pos], c)
	}
	s.pos++
	return nil
}

// strBytes reads a JSON string and returns its decoded bytes. The slice is
// valid until the next call (it may alias the input or the scratch buffer).
func (s *scanner) strBytes() ([]byte, error) {
	if err := s.expect('"'); err != nil {
		return nil, err
	}
	start := s.pos
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		if c == '"' {
			b := s.data[start:s.pos]
			s.pos++
			return b, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return nil, s.errorf("control character in string")
		}
		s.pos++
	}
	// Slow path: the string has escapes.
	s.buf = append(s.buf[:0], s.data[start:s.pos]...)
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return s.buf, nil
		case c < 0x20:
			return nil, s.errorf("control character in string")
		case c != '\\':
			s.buf = append(s.buf, c)
			s.pos++
			continue
		}
		if s.pos+1 >= len(s.data) {
			break
		}
		e := s.data[s.pos+1]
		s.pos += 2
		switch e {
		case '"', '\\', '/':
			s.buf = append(s.buf, e)
		case 'b':
			s.buf = append(s.buf, '\b')
		case 'f':
			s.buf = append(s.buf, '\f')
		case 'n':
			s.buf = append(s.buf, '\n')
		case 'r':
			s.buf = append(s.buf, '\r')
		case 't':
			s.buf = append(s.buf, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return nil, s.errorf("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				// Only a high surrogate escape followed by a low one is a
				// character; serde_json (so tokenizers) refuses anything else,
				// where encoding/json would write U+FFFD.
				at := s.pos - 6
				r2, ok2 := rune(0), false
				if s.pos+1 < len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
					s.pos += 2
					r2, ok2 = s.hex4()
				}
				d := utf16.DecodeRune(r, r2)
				if !ok2 || d == utf8.RuneError {
					s.pos = at
					return nil, s.errorf("unpaired UTF-16 surrogate \\u%04X in a string: the file is damaged (tokenizers refuses it too)", r)
				}
				r = d
			}
			s.buf = utf8.AppendRune(s.buf, r)
		default:
			return nil, s.errorf("bad escape \\%c", e)
		}
	}
	return nil, s.errorf("unterminated string")
}

func (s *scanner) hex4() (rune, bool) {
	if s.pos+4 > len(s.data) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(s.data[s.pos:s.pos+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	s.pos += 4
	return rune(v), true
}

// int reads a JSON integer that fits in int32 range (token ids).
func (s *scanner) int() (int64, error) {
	s.ws()
	start := s.pos
	if s.pos < len(s.data) && s.data[s.pos] == '-' {
		s.pos++
	}
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		s.pos++
	}
	if s.pos < len(s.data) && (s.data[s.pos] == '.' || s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		return 0, s.errorf("want an integer")
	}
	v, err := strconv.ParseInt(string(s.data[start:s.pos]), 10, 64)
	if err != nil {
		return 0, s.errorf("want an integer")
	}
	return v, nil
}

// skip consumes one JSON value of any kind and returns its raw bytes.
func (s *scanner) skip() ([]byte, error) {
	s.ws()
	start := s.pos
	if err := s.skipValue(0); err != nil {
		return nil, err
	}
	return s.data[start:s.pos], nil
}

// skipText is skip for a value whose strings must be valid UTF-8.
func (s *scanner) skipText() ([]byte, error) {
	raw, err := s.skip()
	if err == nil && !utf8.Valid(raw) {
		at := s.pos - len(raw)
		for i := 0; i < len(raw); {
			n, valid, _ := utf8Seq(raw, i)
			if !valid {
				at += i
				break
			}
			i += n
		}
		return nil, fmt.Errorf("%w at byte %d: not valid UTF-8: the file is damaged (tokenizers refuses it too)", errJSON, at)
	}
	return raw, err
}

func (s *scanner) skipValue(depth int) error {
	if depth > 200 {
		return s.errorf("nesting too deep")
	}
	switch c := s.peek(); c {
	case '"':
		_, err := s.strBytes()
		return err
	case '{':
		s.pos++
		if s.peek() == '}' {
			s.pos++
			return nil
		}
		for {
			if _, err := s.strBytes(); err != nil {
				return err
			}
			if err := s.expect(':'); err != nil {
				return err
			}
			if err := s.skipValue(depth + 1); err != nil {
				return err
			}
			switch s.peek() {
			case ',':
				s.pos++
			case '}':
				s.pos++
				return nil
			default:
				return s.errorf("want ',' or '}' in object")
			}
		}
	case '[':
		s.pos++
		if s.peek() == ']' {
			s.pos++
			return nil
		}
		for {
			if err := s.skipValue(depth + 1); err != nil {
				return err
			}
			switch s.peek() {
			case ',':
				s.pos++
			case ']':
				s.pos++
				return nil
			default:
				return s.errorf("want ',' or ']' in array")
			}
		}
	case 0:
		return s.errorf("unexpected end of file")
	default:
		// number, true, false, null
		start := s.pos
		for s.pos < len(s.data) {
			switch s.data[s.pos] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				goto done
			}
			s.pos++
		}
	done:
		lit := string(s.data[start:s.pos])
		switch lit {
		case "true", "false", "null":
			return nil
		}
		if _, err := strconv.ParseFloat(lit, 64); err != nil {
			return s.errorf("bad literal %q", truncate(lit, 20))
		}
		return nil
	}
}

// object iterates over the members of a JSON object, calling fn with each key
// (valid only during the call); fn must consume the value.
func (s *scanner) object(fn func(key []byte) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		k, err := s.strBytes()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := fn(k); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		default:
			return s.errorf("want ',' or '}' in object")
		}
	}
}

// array iterates over the elements of a JSON array; fn must consume each one.
func (s *scanner) array(fn func(i int) error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.pos++
		return nil
	}
	for i := 0; ; i++ {
		if err := fn(i); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return nil
		default:
			return s.errorf("want ',' or ']' in array")
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
