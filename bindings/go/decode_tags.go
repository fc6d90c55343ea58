package agentstate

// Reading tagged values from the generic form that encoding/json decodes (with UseNumber): the
// inner value of {"$date": ...}, {"$map": ...}, ... checked as strictly as the library writes it.

import (
	"encoding/base64"
	"math/big"
	"strconv"
	"strings"
	"time"
)

func taggedToAny(tag string, inner any) (any, error) {
	var v any
	var err error
	switch tag {
	case "$date":
		v, err = parseDate(inner)
	case "$bigint":
		v, err = parseBigInt(inner)
	case "$arraybuffer":
		v, err = parseBase64(inner, "$arraybuffer")
	case "$map":
		v, err = parseMap(inner)
	case "$set":
		v, err = parseSet(inner)
	case "$typedarray":
		v, err = parseTypedArray(inner)
	case "$regexp":
		v, err = parseRegExp(inner)
	}
	if err != nil {
		return nil, at(err, "."+tag)
	}
	return v, nil
}

func parseDate(v any) (time.Time, error) {
	s, ok := v.(string)
	layout := ""
	if ok {
		layout = dateLayoutOf(len(s))
	}
	if layout == "" {
		return time.Time{}, codecErrf("$date must be a string YYYY-MM-DDTHH:MM:SS.sssZ with 3, 6 or 9 fraction digits")
	}
	t, err := time.Parse(layout, s)
	if err != nil {
		return time.Time{}, codecErrf("$date %q: %v", s, err)
	}
	return t, nil
}

func parseBigInt(v any) (*big.Int, error) {
	if s, ok := v.(string); ok && isJSONNumber(s) && !strings.ContainsAny(s, ".eE") {
		if x, ok := new(big.Int).SetString(s, 10); ok {
			return x, nil
		}
	}
	return nil, codecErrf("$bigint must be a string of decimal digits")
}

func parseBase64(v any, what string) ([]byte, error) {
	s, ok := v.(string)
	if !ok {
		return nil, codecErrf("%s must be a base64 string", what)
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, codecErrf("%s: invalid base64: %v", what, err)
	}
	return b, nil
}

// twoStrings returns the string members a and b of an object that has exactly those two.
func twoStrings(v any, a, b string) (string, string, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 2 {
		return "", "", false
	}
	x, okA := m[a].(string)
	y, okB := m[b].(string)
	return x, y, okA && okB
}

func parseTypedArray(v any) (TypedArray, error) {
	m, ok := v.(map[string]any)
	typ, isString := m["type"].(string)
	data, hasData := m["base64"]
	if !ok || len(m) != 2 || !isString || !hasData {
		return TypedArray{}, codecErrf(`$typedarray must be {"type": <typed array name>, "base64": <string>}`)
	}
	b, err := parseBase64(data, "$typedarray base64")
	if err != nil {
		return TypedArray{}, err
	}
	return TypedArray{Type: typ, Data: b}, nil
}

func parseRegExp(v any) (RegExp, error) {
	src, flags, ok := twoStrings(v, "source", "flags")
	if !ok {
		return RegExp{}, codecErrf(`$regexp must be {"source": <string>, "flags": <string>}`)
	}
	return RegExp{Source: src, Flags: flags}, nil
}

func parseMap(v any) (Map, error) {
	entries, ok := v.([]any)
	if !ok {
		return nil, codecErrf("$map must be an array of [key, value] pairs")
	}
	m := make(Map, 0, len(entries))
	for i, e := range entries {
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			return nil, at(codecErrf("$map entry must be a [key, value] pair"), "["+strconv.Itoa(i)+"]")
		}
		k, err := withTags(pair[0])
		if err != nil {
			return nil, at(err, "["+strconv.Itoa(i)+"].Key")
		}
		val, err := withTags(pair[1])
		if err != nil {
			return nil, at(err, "["+strconv.Itoa(i)+"].Value")
		}
		m = append(m, MapEntry{Key: k, Value: val})
	}
	return m, nil
}

func parseSet(v any) (Set, error) {
	items, ok := v.([]any)
	if !ok {
		return nil, codecErrf("$set must be an array")
	}
	s := make(Set, 0, len(items))
	for i, item := range items {
		x, err := withTags(item)
		if err != nil {
			return nil, at(err, "["+strconv.Itoa(i)+"]")
		}
		s = append(s, x)
	}
	return s, nil
}
