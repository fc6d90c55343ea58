package agentstate

import (
	"reflect"
	"sort"
	"strings"
	"sync"
	"unicode"
)

// field is one JSON member of a struct type, resolved by the rules of encoding/json: the
// `json` tag's name (or the Go field name), "-" to skip, options omitempty, omitzero and
// string, and promotion of the fields of embedded structs with encoding/json's dominance rules.
type field struct {
	name      string
	tagged    bool
	index     []int
	typ       reflect.Type
	omitEmpty bool
	quoted    bool
	// omitZero is the omitzero option (encoding/json's since Go 1.24, honoured here whatever
	// Go builds the program): the field is left out when isZero says its value is zero.
	omitZero bool
	isZero   func(reflect.Value) bool
}

type isZeroer interface{ IsZero() bool }

var isZeroerType = reflect.TypeOf((*isZeroer)(nil)).Elem()

// zeroTest is how omitzero tells a zero value of type t, as encoding/json does: the type's
// IsZero method when it has one (time.Time's: a zero time in any location), else
// reflect.Value.IsZero.
func zeroTest(t reflect.Type) func(reflect.Value) bool {
	switch {
	case t.Kind() == reflect.Interface && t.Implements(isZeroerType):
		return func(v reflect.Value) bool {
			return v.IsNil() || (v.Elem().Kind() == reflect.Pointer && v.Elem().IsNil()) || v.Interface().(isZeroer).IsZero()
		}
	case t.Kind() == reflect.Pointer && t.Implements(isZeroerType):
		return func(v reflect.Value) bool { return v.IsNil() || v.Interface().(isZeroer).IsZero() }
	case t.Implements(isZeroerType):
		return func(v reflect.Value) bool { return v.Interface().(isZeroer).IsZero() }
	case reflect.PointerTo(t).Implements(isZeroerType):
		return func(v reflect.Value) bool {
			if !v.CanAddr() {
				c := reflect.New(v.Type()).Elem()
				c.Set(v)
				v = c
			}
			return v.Addr().Interface().(isZeroer).IsZero()
		}
	}
	return reflect.Value.IsZero
}

var fieldCache sync.Map // reflect.Type -> []field

// cachedFields returns the JSON members of struct type t, in field order.
func cachedFields(t reflect.Type) []field {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]field)
	}
	f, _ := fieldCache.LoadOrStore(t, typeFields(t))
	return f.([]field)
}

func parseTag(tag string) (string, string) {
	if i := strings.IndexByte(tag, ','); i >= 0 {
		return tag[:i], tag[i+1:]
	}
	return tag, ""
}

func hasOption(opts, name string) bool {
	for opts != "" {
		var o string
		if i := strings.IndexByte(opts, ','); i >= 0 {
			o, opts = opts[:i], opts[i+1:]
		} else {
			o, opts = opts, ""
		}
		if o == name {
			return true
		}
	}
	return false
}

func isValidTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
			// Allowed punctuation, as in encoding/json.
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// typeFields mirrors encoding/json's typeFields: a breadth-first walk over embedded structs,
// then, among fields of one name, the shallowest wins, a tagged one winning a tie; a remaining
// tie removes the name.
func typeFields(t reflect.Type) []field {
	type item struct {
		typ   reflect.Type
		index []int
	}
	current := []item{}
	next := []item{{typ: t}}
	var count, nextCount map[reflect.Type]int
	visited := map[reflect.Type]bool{}
	var fields []field
	for len(next) > 0 {
		current, next = next, current[:0]
		count, nextCount = nextCount, map[reflect.Type]int{}
		for _, f := range current {
			if visited[f.typ] {
				continue
			}
			visited[f.typ] = true
			for i := 0; i < f.typ.NumField(); i++ {
				sf := f.typ.Field(i)
				if sf.Anonymous {
					et := sf.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if !sf.IsExported() && et.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts := parseTag(tag)
				if !isValidTag(name) {
					name = ""
				}
				index := make([]int, len(f.index)+1)
				copy(index, f.index)
				index[len(f.index)] = i
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				quoted := false
				if hasOption(opts, "string") {
					switch ft.Kind() {
					case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32,
						reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32,
						reflect.Uint64, reflect.Uintptr, reflect.Float32, reflect.Float64,
						reflect.String:
						quoted = true
					}
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					tagged := name != ""
					if name == "" {
						name = sf.Name
					}
					fd := field{
						name: name, tagged: tagged, index: index, typ: sf.Type,
						omitEmpty: hasOption(opts, "omitempty"), quoted: quoted,
						omitZero: hasOption(opts, "omitzero"),
					}
					if fd.omitZero {
						fd.isZero = zeroTest(sf.Type)
					}
					fields = append(fields, fd)
					if count[f.typ] > 1 {
						// The embedding struct appeared more than once at this depth: make
						// the name collide so that it is dropped below.
						fields = append(fields, fields[len(fields)-1])
					}
					continue
				}
				nextCount[ft]++
				if nextCount[ft] == 1 {
					next = append(next, item{typ: ft, index: index})
				}
			}
		}
	}
	sort.SliceStable(fields, func(i, j int) bool {
		x, y := fields[i], fields[j]
		if x.name != y.name {
			return x.name < y.name
		}
		if len(x.index) != len(y.index) {
			return len(x.index) < len(y.index)
		}
		if x.tagged != y.tagged {
			return x.tagged
		}
		return lessIndex(x.index, y.index)
	})
	out := fields[:0]
	for advance, i := 0, 0; i < len(fields); i += advance {
		fi := fields[i]
		for advance = 1; i+advance < len(fields); advance++ {
			if fields[i+advance].name != fi.name {
				break
			}
		}
		if advance == 1 {
			out = append(out, fi)
			continue
		}
		if len(fields[i].index) == len(fields[i+1].index) && fields[i].tagged == fields[i+1].tagged {
			continue // ambiguous: encoding/json drops the name
		}
		out = append(out, fi)
	}
	fields = out
	sort.Slice(fields, func(i, j int) bool { return lessIndex(fields[i].index, fields[j].index) })
	return fields
}

func lessIndex(a, b []int) bool {
	for k, x := range a {
		if k >= len(b) {
			return false
		}
		if x != b[k] {
			return x < b[k]
		}
	}
	return len(a) < len(b)
}
