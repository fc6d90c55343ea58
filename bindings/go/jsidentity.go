package agentstate

import (
	"bytes"
	"math"
	"strconv"
)

// The library's rule for "the same key twice" in a $map (or member twice in a $set), which
// Map.Get, Map.Has, Map.Set, Map.Delete and Set.Has follow and Marshal enforces: numbers are
// compared by value as doubles, as JavaScript's SameValueZero compares them (1 and 1.0 are one
// key, so are 0 and -0); everything else by its JSON text as the library writes it (arrays and
// objects are the same when they encode the same: [1] and [1.0] differ).

// identityOf returns the identity of a key or member from its encoded JSON text.
func identityOf(text []byte) string {
	if len(text) > 0 && (text[0] == '-' || text[0] >= '0' && text[0] <= '9') {
		if f, err := strconv.ParseFloat(string(text), 64); err == nil {
			if f == 0 {
				f = 0 // -0 is 0
			}
			return "#" + strconv.FormatUint(math.Float64bits(f), 16)
		}
	}
	return string(normalizeExponents(text))
}

// normalizeExponents writes the exponent markers of the numbers in JSON text as the library
// writes them ("1E2" and "1e2" are "1e+2"), so that text identities match the library's.
func normalizeExponents(text []byte) []byte {
	if bytes.IndexAny(text, "eE") < 0 {
		return text
	}
	out := make([]byte, 0, len(text)+4)
	inString := false
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case inString && c == '\\' && i+1 < len(text):
			out = append(out, c, text[i+1])
			i++
			continue
		case c == '"':
			inString = !inString
		case !inString && (c == 'e' || c == 'E') && i > 0 && text[i-1] >= '0' && text[i-1] <= '9':
			out = append(out, 'e')
			if i+1 < len(text) && text[i+1] != '+' && text[i+1] != '-' {
				out = append(out, '+')
			}
			continue
		}
		out = append(out, c)
	}
	return out
}

// once records the identity of an encoded key or member (text) in seen, refusing one that is
// already there: the library would refuse the value (what names the collection).
func once(seen map[string]struct{}, text []byte, what string) error {
	id := identityOf(text)
	if _, dup := seen[id]; dup {
		return encErr("%s are the same for the library (%s); it stores each once", what, text)
	}
	seen[id] = struct{}{}
	return nil
}
