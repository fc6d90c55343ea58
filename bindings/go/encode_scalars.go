package agentstate

// How the encoder writes scalars: strings, numbers, dates and bytes, in the form the library
// stores (and writes back) for each.

import (
	"encoding/base64"
	"math"
	"strconv"
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
	if u.Nanosecond()%int(time.Millisecond) != 0 {
		return encErr("time.Time %s has sub-millisecond precision, which $date cannot hold "+
			"(truncate it first: t.Truncate(time.Millisecond))", t.Format(time.RFC3339Nano))
	}
	if y := u.Year(); y < 0 || y > 9999 {
		return encErr("time.Time %s is outside the years 0000-9999 that $date can hold", t.Format(time.RFC3339Nano))
	}
	e.buf = append(e.buf, `{"$date":"`...)
	e.buf = u.AppendFormat(e.buf, dateLayout)
	e.buf = append(e.buf, `"}`...)
	return nil
}

func (e *encoder) float(f float64, bits int) error {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return encErr("json: unsupported value: %s", strconv.FormatFloat(f, 'g', -1, bits))
	}
	// encoding/json's (ES6) number format.
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	start := len(e.buf)
	e.buf = strconv.AppendFloat(e.buf, f, format, -1, bits)
	if format == 'e' {
		b := e.buf[start:]
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			e.buf = e.buf[:len(e.buf)-1]
		}
	}
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

// isJSONNumber reports whether s is a JSON number literal.
func isJSONNumber(s string) bool {
	i, n := 0, len(s)
	if i < n && s[i] == '-' {
		i++
	}
	switch {
	case i < n && s[i] == '0':
		i++
	case i < n && s[i] >= '1' && s[i] <= '9':
		for i < n && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < n && s[i] == '.' {
		i++
		if i >= n || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < n && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < n && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < n && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= n || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < n && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	return i == n
}
