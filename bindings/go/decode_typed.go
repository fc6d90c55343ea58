package agentstate

// Decoding into typed Go values: the walk over the parsed tree (node) that follows the Go type,
// as encoding/json's decoder does, with the tagged values read into their Go types.

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"time"
)

func decode(n *node, v reflect.Value) error {
	t := v.Type()
	if n.kind == 'z' {
		return decodeNull(v)
	}
	if t.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		return decode(n, v.Elem())
	}
	tag := tagOf(n)
	switch t {
	case goRegexpType:
		return decodeGoRegexp(n, v)
	case timeType:
		if tag == "$date" {
			d, err := parseDate(plain(n.vals[0]))
			if err != nil {
				return at(err, ".$date")
			}
			v.Set(reflect.ValueOf(d))
			return nil
		}
		if n.kind == 's' {
			var d time.Time
			if err := d.UnmarshalJSON(n.raw); err != nil {
				return codecErrf("cannot decode %q into time.Time: %v", n.str, err)
			}
			v.Set(reflect.ValueOf(d))
			return nil
		}
		return mismatch(n, t)
	case bigIntType:
		var x *big.Int
		switch {
		case tag == "$bigint":
			var err error
			if x, err = parseBigInt(plain(n.vals[0])); err != nil {
				return at(err, ".$bigint")
			}
		case n.kind == 'n' && !strings.ContainsAny(n.str, ".eE"):
			x, _ = new(big.Int).SetString(n.str, 10)
		}
		if x == nil {
			return mismatch(n, t)
		}
		v.Addr().Interface().(*big.Int).Set(x)
		return nil
	case mapType, setType, typedArrayType, regexpType:
		want := map[reflect.Type]string{mapType: "$map", setType: "$set", typedArrayType: "$typedarray", regexpType: "$regexp"}[t]
		if tag != want {
			return mismatch(n, t)
		}
		val, err := taggedToAny(tag, plain(n.vals[0]))
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(val))
		return nil
	case numberType:
		if n.kind != 'n' {
			return mismatch(n, t)
		}
		v.SetString(n.str)
		return nil
	}
	if t.Kind() == reflect.Interface {
		if t.NumMethod() != 0 {
			return mismatch(n, t)
		}
		val, err := toAny(n)
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(&val).Elem())
		return nil
	}
	if v.CanAddr() && reflect.PointerTo(t).Implements(unmarshalerType) {
		if err := v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(n.raw); err != nil {
			return &codecError{msg: fmt.Sprintf("%s.UnmarshalJSON: %v", t, err), cause: err}
		}
		return nil
	}
	if n.kind == 's' && v.CanAddr() && reflect.PointerTo(t).Implements(textUnmarshalTyp) {
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.str)); err != nil {
			return &codecError{msg: fmt.Sprintf("%s.UnmarshalText: %v", t, err), cause: err}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Bool:
		if n.kind != 't' && n.kind != 'f' {
			return mismatch(n, t)
		}
		v.SetBool(n.kind == 't')
	case reflect.String:
		if n.kind != 's' {
			return mismatch(n, t)
		}
		v.SetString(n.str)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n.kind != 'n' {
			return mismatch(n, t)
		}
		x, err := strconv.ParseInt(n.str, 10, 64)
		if err != nil || v.OverflowInt(x) {
			return mismatch(n, t)
		}
		v.SetInt(x)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if n.kind != 'n' {
			return mismatch(n, t)
		}
		x, err := strconv.ParseUint(n.str, 10, 64)
		if err != nil || v.OverflowUint(x) {
			return mismatch(n, t)
		}
		v.SetUint(x)
	case reflect.Float32, reflect.Float64:
		if n.kind != 'n' {
			return mismatch(n, t)
		}
		x, err := strconv.ParseFloat(n.str, t.Bits())
		if err != nil || v.OverflowFloat(x) {
			return mismatch(n, t)
		}
		v.SetFloat(x)
	case reflect.Slice:
		return decodeSlice(n, v)
	case reflect.Array:
		if n.kind != '[' {
			return mismatch(n, t)
		}
		for i := 0; i < v.Len(); i++ {
			if i < len(n.vals) {
				if err := decode(n.vals[i], v.Index(i)); err != nil {
					return at(err, "["+strconv.Itoa(i)+"]")
				}
			} else {
				v.Index(i).Set(reflect.Zero(t.Elem()))
			}
		}
	case reflect.Map:
		return decodeMap(n, v)
	case reflect.Struct:
		return decodeStruct(n, v)
	default:
		return mismatch(n, t)
	}
	return nil
}

// decodeNull applies JSON null as encoding/json does: nil for pointers, interfaces, maps and
// slices; a json.Unmarshaler is asked; anything else is left alone.
func decodeNull(v reflect.Value) error {
	t := v.Type()
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice:
		if t != mapType && t != setType && v.CanAddr() && reflect.PointerTo(t).Implements(unmarshalerType) && t.Kind() != reflect.Pointer {
			return v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON([]byte("null"))
		}
		v.Set(reflect.Zero(t))
		return nil
	}
	if isTaggedType(t) {
		return nil
	}
	if v.CanAddr() && reflect.PointerTo(t).Implements(unmarshalerType) {
		return v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON([]byte("null"))
	}
	return nil
}

func decodeSlice(n *node, v reflect.Value) error {
	t := v.Type()
	tag := tagOf(n)
	if isByteSlice(t) {
		var b []byte
		var err error
		switch {
		case tag == "$arraybuffer":
			b, err = parseBase64(plain(n.vals[0]), "$arraybuffer")
		case n.kind == 's':
			b, err = parseBase64(n.str, "a []byte string")
		}
		if err != nil {
			return err
		}
		if b != nil {
			v.SetBytes(b)
			return nil
		}
	}
	items := n
	if tag == "$set" {
		items = n.vals[0]
		if items.kind != '[' {
			return codecErrf("$set must be an array")
		}
	} else if n.kind != '[' {
		return mismatch(n, t)
	}
	s := reflect.MakeSlice(t, len(items.vals), len(items.vals))
	for i, item := range items.vals {
		if err := decode(item, s.Index(i)); err != nil {
			return at(err, "["+strconv.Itoa(i)+"]")
		}
	}
	v.Set(s)
	return nil
}

func decodeMap(n *node, v reflect.Value) error {
	t := v.Type()
	kt := t.Key()
	tag := tagOf(n)
	if v.IsNil() {
		v.Set(reflect.MakeMap(t))
	}
	switch {
	case tag == "$map":
		entries := n.vals[0]
		if entries.kind != '[' {
			return codecErrf("$map must be an array of [key, value] pairs")
		}
		for i, pair := range entries.vals {
			if pair.kind != '[' || len(pair.vals) != 2 {
				return at(codecErrf("$map entry must be a [key, value] pair"), ".$map["+strconv.Itoa(i)+"]")
			}
			k := reflect.New(kt).Elem()
			if err := decode(pair.vals[0], k); err != nil {
				return at(err, ".$map["+strconv.Itoa(i)+"].Key")
			}
			e := reflect.New(t.Elem()).Elem()
			if err := decode(pair.vals[1], e); err != nil {
				return at(err, ".$map["+strconv.Itoa(i)+"].Value")
			}
			v.SetMapIndex(k, e)
		}
		return nil
	case tag != "" || n.kind != '{':
		return mismatch(n, t)
	}
	for i, name := range n.keys {
		k := reflect.New(kt).Elem()
		switch {
		case reflect.PointerTo(kt).Implements(textUnmarshalTyp):
			if err := k.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(name)); err != nil {
				return at(&codecError{msg: fmt.Sprintf("map key %q: %v", name, err), cause: err}, "")
			}
		case kt.Kind() == reflect.String:
			k.SetString(name)
		case kt.Kind() >= reflect.Int && kt.Kind() <= reflect.Int64:
			x, err := strconv.ParseInt(name, 10, 64)
			if err != nil || k.OverflowInt(x) {
				return codecErrf("cannot decode map key %q into Go value of type %s", name, kt)
			}
			k.SetInt(x)
		case kt.Kind() >= reflect.Uint && kt.Kind() <= reflect.Uintptr:
			x, err := strconv.ParseUint(name, 10, 64)
			if err != nil || k.OverflowUint(x) {
				return codecErrf("cannot decode map key %q into Go value of type %s", name, kt)
			}
			k.SetUint(x)
		default:
			return codecErrf("cannot decode an object into Go map type %s (unsupported key type)", t)
		}
		e := reflect.New(t.Elem()).Elem()
		if err := decode(n.vals[i], e); err != nil {
			return at(err, "["+strconv.Quote(name)+"]")
		}
		v.SetMapIndex(k, e)
	}
	return nil
}

func decodeStruct(n *node, v reflect.Value) error {
	t := v.Type()
	if n.kind != '{' || tagOf(n) != "" {
		return mismatch(n, t)
	}
	fields := cachedFields(t)
	for i, name := range n.keys {
		var f *field
		for j := range fields {
			if fields[j].name == name {
				f = &fields[j]
				break
			}
		}
		if f == nil {
			for j := range fields {
				if strings.EqualFold(fields[j].name, name) {
					f = &fields[j]
					break
				}
			}
		}
		if f == nil {
			continue // unknown members are ignored, as by encoding/json
		}
		fv := v
		for _, idx := range f.index {
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					if !fv.CanSet() {
						return codecErrf("cannot set embedded pointer to unexported struct %s", fv.Type().Elem())
					}
					fv.Set(reflect.New(fv.Type().Elem()))
				}
				fv = fv.Elem()
			}
			fv = fv.Field(idx)
		}
		var err error
		if f.quoted {
			err = decodeQuoted(n.vals[i], fv)
		} else {
			err = decode(n.vals[i], fv)
		}
		if err != nil {
			return at(err, "."+f.name)
		}
	}
	return nil
}

// decodeQuoted reads a field with the ",string" option: a JSON string holding the JSON text.
func decodeQuoted(n *node, v reflect.Value) error {
	if n.kind == 'z' {
		return nil
	}
	if n.kind != 's' {
		return codecErrf("field with the ,string option needs a string, got %s", kindName(n))
	}
	inner, err := parseJSON([]byte(n.str))
	// Exactly one scalar, without white space around it, as encoding/json takes it.
	if err != nil || inner.kind == '{' || inner.kind == '[' || len(inner.raw) != len(n.str) {
		if s := n.str; s != "" && (s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) {
			return decodeQuotedNumber(s, v)
		}
		return codecErrf("field with the ,string option: %q is not a quoted scalar", n.str)
	}
	return decode(inner, v)
}

// decodeQuotedNumber takes a ",string" field's text that starts like a number but is not a JSON
// number ("00", "1.", "-0x1p4"): encoding/json hands such text to strconv for the field's kind
// rather than to its JSON scanner, and so does this, so that both accept the same inputs.
func decodeQuotedNumber(s string, v reflect.Value) error {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	bad := func(err error) error {
		return codecErrf("field with the ,string option: %q does not fit %s: %v", s, v.Type(), err)
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x, err := strconv.ParseInt(s, 10, 64)
		if err == nil && v.OverflowInt(x) {
			err = strconv.ErrRange
		}
		if err != nil {
			return bad(err)
		}
		v.SetInt(x)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		x, err := strconv.ParseUint(s, 10, 64)
		if err == nil && v.OverflowUint(x) {
			err = strconv.ErrRange
		}
		if err != nil {
			return bad(err)
		}
		v.SetUint(x)
	case reflect.Float32, reflect.Float64:
		x, err := strconv.ParseFloat(s, v.Type().Bits())
		if err == nil && v.OverflowFloat(x) {
			err = strconv.ErrRange
		}
		if err != nil {
			return bad(err)
		}
		v.SetFloat(x)
	case reflect.String:
		// encoding/json stores number-like text only into a json.Number (unchecked, as it
		// does); a plain string field with ",string" must hold a quoted string.
		if v.Type() != numberType {
			return codecErrf("field with the ,string option: %q is not a quoted string", s)
		}
		v.SetString(s)
	default:
		return codecErrf("field with the ,string option: %q is not a quoted scalar", s)
	}
	return nil
}
