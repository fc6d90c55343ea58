package agentstate

// How the encoder writes Go structs: the members encoding/json would write, with its tag
// options (omitempty, omitzero, string).

import (
	"reflect"
)

func (e *encoder) structure(v reflect.Value, depth int) error {
	fields := cachedFields(v.Type())
	if len(fields) == 0 && opaqueStruct(v.Type()) {
		return encErr("type %s has no exported fields: it would be stored as {} and read back empty "+
			"(give the type a MarshalJSON or MarshalText method, or store what it holds)", v.Type())
	}
	if err := e.enter(1); err != nil {
		return err
	}
	defer e.leave(1)
	e.buf = append(e.buf, '{')
	first := true
	written, only := 0, ""
fields:
	for _, f := range fields {
		fv := v
		for _, i := range f.index {
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue fields // a nil embedded pointer has no fields to promote
				}
				fv = fv.Elem()
			}
			fv = fv.Field(i)
		}
		if (f.omitEmpty && isEmptyValue(fv)) || (f.omitZero && f.isZero(fv)) {
			continue
		}
		if !first {
			e.buf = append(e.buf, ',')
		}
		first = false
		written, only = written+1, f.name
		if err := e.str(f.name); err != nil {
			return err
		}
		e.buf = append(e.buf, ':')
		var err error
		if f.quoted {
			err = e.quoted(fv, depth)
		} else {
			err = e.encode(fv, depth+1)
		}
		if err != nil {
			return at(err, "."+f.name)
		}
	}
	if written == 1 {
		if err := tagShaped("struct", only); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

// quoted writes a scalar field with the ",string" option as a JSON string of its JSON text.
func (e *encoder) quoted(v reflect.Value, depth int) error {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		v = v.Elem()
	}
	inner := encoder{}
	if err := inner.encode(v, depth+1); err != nil {
		return err
	}
	return e.str(string(inner.buf))
}

func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}

// opaqueStruct reports whether t has fields but no member: no exported field, directly or
// through an embedded struct (sync.Mutex, url.Userinfo, a handle type), and none left out on
// purpose with `json:"-"`. encoding/json writes such a value as {}, which reads back as the
// zero value: the codec refuses it instead, as the Python binding refuses an arbitrary object.
// A struct without fields (struct{}) is {} honestly and is written.
func opaqueStruct(t reflect.Type) bool {
	return t.NumField() > 0 && len(cachedFields(t)) == 0 && !skipsOnPurpose(t, map[reflect.Type]bool{})
}

// skipsOnPurpose reports whether t, or a struct embedded in it, has a field tagged `json:"-"`.
func skipsOnPurpose(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Tag.Get("json") == "-" {
			return true
		}
		et := f.Type
		if et.Kind() == reflect.Pointer {
			et = et.Elem()
		}
		if f.Anonymous && et.Kind() == reflect.Struct && skipsOnPurpose(et, seen) {
			return true
		}
	}
	return false
}
