package agentstate

// Go's *regexp.Regexp in the storage codec: stored as the $regexp of a JavaScript RegExp, so
// that every language reads it back as a regular expression (Python as a re.Pattern, Go as a
// RegExp or, when asked, a *regexp.Regexp).
//
// Go has no flags beside the pattern: they are written inside it, as a group like "(?i)". A
// leading group of the flags that JavaScript has too (i, m and s, which mean the same in both)
// becomes the stored flags, and the rest of the pattern the source; every other pattern is
// stored as it is with no flags. Decoding puts the flags back as that leading group.

import (
	"reflect"
	"regexp"
	"strings"
)

var goRegexpType = reflect.TypeOf(regexp.Regexp{})

// regexpParts is the stored source and flags of a Go pattern (re.String()): a leading "(?ims)"
// group, any non-empty subset of those letters, each once, becomes the flags, in JavaScript's
// order (i, m, s: how RegExp.prototype.flags and Python write them).
func regexpParts(pattern string) (source, flags string) {
	if !strings.HasPrefix(pattern, "(?") {
		return pattern, ""
	}
	end := strings.IndexByte(pattern, ')')
	if end < 3 {
		return pattern, ""
	}
	var seen [3]bool
	for _, c := range pattern[2:end] {
		i := strings.IndexRune("ims", c)
		if i < 0 || seen[i] {
			return pattern, "" // another flag ("U", "-i") or a group ("?:", "?P<"): as it is
		}
		seen[i] = true
	}
	for i, on := range seen {
		if on {
			flags += "ims"[i : i+1]
		}
	}
	return pattern[end+1:], flags
}

func (e *encoder) goRegexp(re *regexp.Regexp) error {
	if err := e.enter(1); err != nil {
		return err
	}
	defer e.leave(1)
	source, flags := regexpParts(re.String())
	e.buf = append(e.buf, `{"$regexp":{"source":`...)
	if err := e.str(source); err != nil {
		return err
	}
	e.buf = append(e.buf, `,"flags":`...)
	if err := e.str(flags); err != nil {
		return err
	}
	e.buf = append(e.buf, "}}"...)
	return nil
}

// compileRegExp compiles a stored regular expression for Go: its flags, which must be among i,
// m and s, become a leading group. A flag Go cannot hold (g, y, d, u, v: they would be lost on
// the next write) or a source RE2 does not take is an error that says to decode into RegExp,
// which keeps any of them as text.
func compileRegExp(r RegExp) (*regexp.Regexp, error) {
	for _, c := range r.Flags {
		if !strings.ContainsRune("ims", c) {
			return nil, codecErrf("the regular expression /%s/%s has the flag %q, which a Go *regexp.Regexp cannot hold "+
				"(only i, m and s have Go twins); decode it into agentstate.RegExp to keep it", r.Source, r.Flags, c)
		}
	}
	pattern := r.Source
	if r.Flags != "" {
		pattern = "(?" + r.Flags + ")" + r.Source
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, codecErrf("the regular expression /%s/%s does not compile in Go (%v); decode it into "+
			"agentstate.RegExp to keep it as text", r.Source, r.Flags, err)
	}
	return re, nil
}

// decodeGoRegexp decodes a $regexp (or, as encoding/json takes it since Go 1.21, a string
// holding the pattern) into v, a regexp.Regexp.
func decodeGoRegexp(n *node, v reflect.Value) error {
	var re *regexp.Regexp
	switch tag := tagOf(n); {
	case tag == "$regexp":
		r, err := parseRegExp(plain(n.vals[0]))
		if err != nil {
			return at(err, ".$regexp")
		}
		if re, err = compileRegExp(r); err != nil {
			return err
		}
	case n.kind == 's':
		var err error
		if re, err = regexp.Compile(n.str); err != nil {
			return codecErrf("the string %q does not compile as a Go regular expression: %v", n.str, err)
		}
	default:
		return mismatch(n, v.Type())
	}
	v.Set(reflect.ValueOf(re).Elem())
	return nil
}
