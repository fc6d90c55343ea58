package agentstate

// Telling a value that contains itself from one that is merely deep. The encoder does not
// track what it is inside of (that would cost every value a map operation); a cycle makes it
// fail on depth, the library's 64 levels or its own bound, and only then does Marshal walk the
// value again looking for a container that is its own ancestor, to say where the cycle closes
// instead of "nesting deeper than 64 levels".

import (
	"reflect"
	"strconv"
	"strings"
)

// cycleKey identifies a container that can be reached twice: a pointer, a map, or a slice's
// elements (address and length, as encoding/json tells them). The type keeps a struct apart
// from its first field, which has the same address.
type cycleKey struct {
	ptr uintptr
	n   int
	typ reflect.Type
}

type cycleFinder struct {
	active map[cycleKey]bool // on the path from the top to the value being walked
	done   map[cycleKey]bool // walked whole, no cycle below: shared values are walked once
	budget int               // values left to look at: a huge acyclic value ends the search
}

// findCycle returns the JSON Pointer (RFC 6901) of the place where v refers to a value that
// contains it, and that value's type; ok is false when v has no cycle (or is too large to
// search).
func findCycle(v reflect.Value) (pointer string, typ reflect.Type, ok bool) {
	f := cycleFinder{active: map[cycleKey]bool{}, done: map[cycleKey]bool{}, budget: 1 << 20}
	path, typ, ok := f.walk(v)
	if !ok {
		return "", nil, false
	}
	var b strings.Builder
	for i := len(path) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(path[i]))
	}
	if b.Len() == 0 {
		return "/", typ, true // the top-level value itself, as the Python binding says it
	}
	return b.String(), typ, true
}

// walk returns the path (innermost element first) to the reference that closes a cycle.
func (f *cycleFinder) walk(v reflect.Value) ([]string, reflect.Type, bool) {
	if !v.IsValid() || f.budget <= 0 {
		return nil, nil, false
	}
	f.budget--
	t := v.Type()
	var key cycleKey
	switch v.Kind() {
	case reflect.Pointer, reflect.Map:
		if v.IsNil() {
			return nil, nil, false
		}
		key = cycleKey{ptr: v.Pointer(), typ: t}
	case reflect.Slice:
		if v.Len() == 0 {
			return nil, nil, false
		}
		key = cycleKey{ptr: v.Pointer(), n: v.Len(), typ: t}
	}
	if key.typ != nil {
		if f.active[key] {
			return nil, t, true
		}
		if f.done[key] {
			return nil, nil, false
		}
		f.active[key] = true
		defer func() {
			delete(f.active, key)
			f.done[key] = true
		}()
	}
	// Each child with the path element that leads to it, as the encoder writes it.
	child := func(c reflect.Value, elems ...string) ([]string, reflect.Type, bool) {
		path, typ, ok := f.walk(c)
		if ok {
			for i := len(elems) - 1; i >= 0; i-- {
				path = append(path, elems[i])
			}
		}
		return path, typ, ok
	}
	if t.Kind() == reflect.Pointer {
		switch t.Elem() {
		case mapType, setType, patchType, patchOpType: // containers written as tagged values (or a Patch, a PatchOp)
			return f.walk(v.Elem())
		}
	}
	switch t {
	case mapType:
		for i := 0; i < v.Len(); i++ {
			entry := v.Index(i)
			for j := 0; j < 2; j++ {
				if path, typ, ok := child(entry.Field(j), "$map", strconv.Itoa(i), strconv.Itoa(j)); ok {
					return path, typ, ok
				}
			}
		}
		return nil, nil, false
	case setType:
		for i := 0; i < v.Len(); i++ {
			if path, typ, ok := child(v.Index(i), "$set", strconv.Itoa(i)); ok {
				return path, typ, ok
			}
		}
		return nil, nil, false
	case patchType:
		for _, m := range v.Interface().(Patch).members {
			if path, typ, ok := child(reflect.ValueOf(m.value), m.name); ok {
				return path, typ, ok
			}
		}
		return nil, nil, false
	case patchOpType:
		return child(reflect.ValueOf(v.Interface().(PatchOp).Value), "value")
	}
	if isTaggedType(t) || (t.Kind() == reflect.Pointer && isTaggedType(t.Elem())) ||
		t.Implements(marshalerType) || t.Implements(textMarshalType) ||
		reflect.PointerTo(t).Implements(marshalerType) || reflect.PointerTo(t).Implements(textMarshalType) {
		return nil, nil, false // written by its own method or as a leaf
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		return f.walk(v.Elem())
	case reflect.Struct:
	fields:
		for _, fd := range cachedFields(t) {
			fv := v
			for _, i := range fd.index {
				if fv.Kind() == reflect.Pointer {
					if fv.IsNil() {
						continue fields
					}
					fv = fv.Elem()
				}
				fv = fv.Field(i)
			}
			if path, typ, ok := child(fv, fd.name); ok {
				return path, typ, ok
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			name, err := mapKeyName(it.Key())
			if err != nil {
				continue
			}
			if path, typ, ok := child(it.Value(), name); ok {
				return path, typ, ok
			}
		}
	case reflect.Slice, reflect.Array:
		if isByteSlice(t) {
			return nil, nil, false
		}
		for i := 0; i < v.Len(); i++ {
			if path, typ, ok := child(v.Index(i), strconv.Itoa(i)); ok {
				return path, typ, ok
			}
		}
	}
	return nil, nil, false
}
