package agentstate

// How the encoder writes scalars: strings, numbers, dates and bytes, in the form the library
// stores (and writes back) for each. Numbers are encoding/json's; strings are escaped here,
// because encoding/json cannot write them as the library does (it always escapes U+2028 and
// U+2029, and writes \b and \f as \u0008 and \u000c), and this is 4x faster than it
// (BenchmarkScalarString); FuzzStringEscapeAgainstEncodingJSON checks the two agree.

import (
	"encoding/base64"
	"encoding/json"
	"time"
	"unicode/utf8"
)

func appendBase64(dst, src []byte) []byte {
	n := base64.StdEncoding.EncodedLen(len(src))
	start := len(dst)
	for cap(dst)-len(dst) < n {
		dst = append(dst[:cap(dst)], 0)[:len(dst)]
	}
	dst = dst[:start+n]
	base64.StdEncoding.Encode(dst[start:], src)
	return dst
}

func (e *encoder) date(t time.Time) error {
	u := t.UTC()
	if y := u.Year(); y < 0 || y > 9999 {
		return encErr("time.Time %s is outside the years 0000-9999 that $date can hold", t.Format(time.RFC3339Nano))
	}
	// The shortest of 3, 6 or 9 fraction digits that holds the value exactly.
	layout := dateLayoutNanos
	switch ns := u.Nanosecond(); {
	case ns%int(time.Millisecond) == 0:
		layout = dateLayoutMillis
	case ns%int(time.Microsecond) == 0:
		layout = dateLayoutMicros
	}
	e.buf = append(e.buf, `{"$date":"`...)
	e.buf = u.AppendFormat(e.buf, layout)
	e.buf = append(e.buf, `"}`...)
	return nil
}

// float writes f as encoding/json does (its ES6 number format); NaN and the infinities are
// encoding/json's UnsupportedValueError.
func (e *encoder) float(f float64, bits int) error {
	var out []byte
	var err error
	if bits == 32 {
		out, err = json.Marshal(float32(f))
	} else {
		out, err = json.Marshal(f)
	}
	if err != nil {
		return encErr("%v", err)
	}
	e.buf = append(e.buf, out...)
	return nil
}

const hexDigits = "0123456789abcdef"

// str writes s as a JSON string; s must be valid UTF-8.
func (e *encoder) str(s string) error {
	if !utf8.ValidString(s) {
		return encErr("string %q is not valid UTF-8 (store bytes as []byte)", s)
	}
	e.buf = append(e.buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		e.buf = append(e.buf, s[start:i]...)
		switch c {
		case '"', '\\':
			e.buf = append(e.buf, '\\', c)
		case '\n':
			e.buf = append(e.buf, '\\', 'n')
		case '\b':
			e.buf = append(e.buf, '\\', 'b')
		case '\f':
			e.buf = append(e.buf, '\\', 'f')
		case '\r':
			e.buf = append(e.buf, '\\', 'r')
		case '\t':
			e.buf = append(e.buf, '\\', 't')
		default:
			e.buf = append(e.buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	e.buf = append(e.buf, s[start:]...)
	e.buf = append(e.buf, '"')
	return nil
}

// isJSONNumber reports whether s is one JSON number literal: encoding/json's grammar, without
// the white space it would accept around the value.
func isJSONNumber(s string) bool {
	return s != "" && (s[0] == '-' || s[0] >= '0' && s[0] <= '9') &&
		s[len(s)-1] >= '0' && s[len(s)-1] <= '9' && json.Valid([]byte(s))
}
