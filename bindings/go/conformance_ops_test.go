package agentstate

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// The operations of the conformance vectors (see conformance_test.go), and the native Go values
// the binding-values descriptions stand for.

func (r *vectorRun) runOp(op *node) {
	r.t.Helper()
	kind := str(member(op, "op"))
	if kind == "events" {
		r.checkEvents(member(op, "events"))
		return
	}
	if member(op, "native") != nil && kind != "get" {
		r.fail(`"native" is for a get op`)
	}
	result, version, err := r.call(kind, op)
	r.checkStatus(err, member(op, "status"), member(op, "message"))
	if err == nil && result != nil {
		r.sameAs("result", op, "expect", result)
	}
	if want := member(op, "version"); want != nil {
		if version == nil {
			_, v, err := r.agent.GetStateVersionedJSON()
			if err != nil {
				r.fail("reading the version: %v", err)
			}
			version = &v
		}
		if strconv.FormatUint(*version, 10) != want.str {
			r.fail("version %d, want %s", *version, want.str)
		}
	}
}

// encoded is the Marshal of a value the binding returned, for comparing with an expectation.
func (r *vectorRun) encoded(v any) []byte {
	b, err := Marshal(v)
	if err != nil {
		r.fail("Marshal of the result %#v: %v", v, err)
	}
	return b
}

// input returns the op's input: a native value (a JSON "input" decoded with Unmarshal, or a
// "value" description built), or raw bytes ("input_text", "input_hex").
func (r *vectorRun) input(op *node) (native bool, v any, raw []byte) {
	if n := member(op, "input"); n != nil {
		if err := Unmarshal(n.raw, &v); err != nil {
			r.fail("decoding the input %s: %v", n.raw, err)
		}
		return true, v, nil
	}
	if n := member(op, "value"); n != nil {
		return true, r.build(n), nil
	}
	if n := member(op, "input_hex"); n != nil {
		b, err := hex.DecodeString(n.str)
		if err != nil {
			r.fail("input_hex: %v", err)
		}
		return false, nil, b
	}
	if n := member(op, "input_text"); n != nil {
		return false, nil, textForm(n)
	}
	r.fail("the op has no input")
	return false, nil, nil
}

func (r *vectorRun) call(kind string, op *node) (result []byte, version *uint64, err error) {
	a := r.agent
	switch kind {
	case "reopen":
		o := member(op, "open")
		if o == nil {
			o = member(r.vector, "open")
		}
		return nil, nil, r.open(o)
	case "get":
		text, _, err := a.GetStateVersionedJSON()
		if err != nil {
			return nil, nil, err
		}
		r.sameAs("the library's text", op, "expect", text)
		m, v, err := a.GetStateVersioned()
		if err != nil {
			return nil, nil, err
		}
		if native := member(op, "native"); native != nil {
			// The value read, in Go's terms: compared natively instead of re-encoded (the
			// Python runner must, as its reading of nanoseconds truncates; Go's is exact).
			want := member(native, "go")
			if want == nil {
				r.fail(`"native" has no "go" description`)
			}
			if why := nativeMismatch(m, r.build(want), ""); why != "" {
				r.fail("native result: %s", why)
			}
			return nil, &v, nil
		}
		return r.encoded(m), &v, nil
	case "encode", "map_get", "map_set", "map_delete", "set_has":
		result, err := r.valueOp(kind, op)
		return result, nil, err
	}
	native, v, raw := r.input(op)
	var expected uint64
	if n := member(op, "if_version"); n != nil {
		expected, err = strconv.ParseUint(n.str, 10, 64)
		if err != nil {
			r.fail("if_version %s: %v", n.raw, err)
		}
	}
	var state map[string]any
	var out json.RawMessage
	var newVersion uint64
	switch {
	case kind == "set" && native:
		state, err = a.SetState(v)
	case kind == "set":
		out, err = a.SetStateJSON(raw)
	case kind == "replace" && native:
		state, err = a.ReplaceState(v)
	case kind == "replace":
		out, err = a.ReplaceStateJSON(raw)
	case kind == "set_if" && native:
		state, newVersion, err = a.SetStateIf(expected, v)
	case kind == "set_if":
		out, newVersion, err = a.SetStateIfJSON(expected, raw)
	case kind == "replace_if" && native:
		state, newVersion, err = a.ReplaceStateIf(expected, v)
	case kind == "replace_if":
		out, newVersion, err = a.ReplaceStateIfJSON(expected, raw)
	case kind == "patch" && native:
		state, err = a.PatchState(v)
	case kind == "patch":
		out, err = a.PatchStateJSON(raw)
	case kind == "patch_if" && native:
		state, newVersion, err = a.PatchStateIf(expected, v)
	case kind == "patch_if":
		out, newVersion, err = a.PatchStateIfJSON(expected, raw)
	default:
		r.fail("unknown op %q", kind)
	}
	if err != nil {
		return nil, nil, err
	}
	if kind == "set_if" || kind == "replace_if" || kind == "patch_if" {
		version = &newVersion
	}
	if native {
		return r.encoded(state), version, nil
	}
	return out, version, nil
}

// valueOp runs the binding-values ops that need no store: encode, and the Map and Set lookups.
func (r *vectorRun) valueOp(kind string, op *node) ([]byte, error) {
	wantFound := member(op, "found")
	checkFound := func(found bool) {
		if wantFound != nil && found != (wantFound.kind == 't') {
			r.fail("found %v, want %s", found, wantFound.raw)
		}
	}
	switch kind {
	case "encode":
		return Marshal(r.build(member(op, "value")))
	case "set_has":
		checkFound(r.build(member(op, "set")).(Set).Has(r.build(member(op, "value"))))
		return nil, nil
	}
	m := r.build(member(op, "map")).(Map)
	key := r.build(member(op, "key"))
	switch kind {
	case "map_set":
		m.Set(key, r.build(member(op, "value")))
	case "map_delete":
		checkFound(m.Delete(key))
	default: // map_get
		v, found := m.Get(key)
		checkFound(found)
		if !found {
			return nil, nil
		}
		return Marshal(v)
	}
	return Marshal(m)
}

// build returns the native Go value a binding-values description stands for (see
// tests/conformance/README.md).
func (r *vectorRun) build(d *node) any {
	if d == nil || d.kind != '{' || len(d.keys) != 1 {
		r.fail("a value description is an object with one member, not %s", d.raw)
	}
	arg := d.vals[0]
	switch d.keys[0] {
	case "null":
		return nil
	case "bool":
		return arg.kind == 't'
	case "string":
		return arg.str
	case "int":
		n, err := strconv.Atoi(arg.str)
		if err != nil {
			r.fail("int %q: %v", arg.str, err)
		}
		return n
	case "float":
		f, err := strconv.ParseFloat(arg.str, 64)
		if err != nil {
			r.fail("float %q: %v", arg.str, err)
		}
		return f
	case "number":
		return json.Number(arg.str)
	case "array":
		out := make([]any, len(arg.vals))
		for i, v := range arg.vals {
			out[i] = r.build(v)
		}
		return out
	case "object":
		out := make(map[string]any, len(arg.vals))
		for _, pair := range arg.vals {
			out[pair.vals[0].str] = r.build(pair.vals[1])
		}
		return out
	case "map":
		out := Map{}
		for _, pair := range arg.vals {
			out = append(out, MapEntry{Key: r.build(pair.vals[0]), Value: r.build(pair.vals[1])})
		}
		return out
	case "set":
		out := Set{}
		for _, v := range arg.vals {
			out = append(out, r.build(v))
		}
		return out
	case "date":
		// time.RFC3339Nano, not the package's own $date layouts: the descriptions are built
		// independently of the code under test.
		t, err := time.Parse(time.RFC3339Nano, arg.str)
		if err != nil || !strings.HasSuffix(arg.str, "Z") {
			r.fail("date %q: not RFC 3339 in UTC: %v", arg.str, err)
		}
		return t
	case "bytes":
		return r.base64(arg.str)
	case "bigint":
		x, ok := new(big.Int).SetString(arg.str, 10)
		if !ok {
			r.fail("bigint %q", arg.str)
		}
		return x
	case "typedarray":
		return TypedArray{Type: member(arg, "type").str, Data: r.base64(member(arg, "base64").str)}
	case "regexp":
		return RegExp{Source: member(arg, "source").str, Flags: member(arg, "flags").str}
	case "nest": // depth objects {"a": ...} around the leaf
		v := r.build(member(arg, "leaf"))
		depth, _ := strconv.Atoi(member(arg, "depth").str)
		for i := 0; i < depth; i++ {
			v = map[string]any{"a": v}
		}
		return v
	case "in_arrays": // count arrays around the leaf
		v := r.build(member(arg, "leaf"))
		count, _ := strconv.Atoi(member(arg, "count").str)
		for i := 0; i < count; i++ {
			v = []any{v}
		}
		return v
	}
	r.fail("unknown value description %q", d.keys[0])
	return nil
}

// nativeMismatch says where a value read differs from the native value expected ("" when it
// does not): a time.Time must be Equal and in UTC (as the binding reads one), maps and slices
// are compared member by member, anything else with reflect.DeepEqual.
func nativeMismatch(got, want any, path string) string {
	where := path
	if where == "" {
		where = "the value"
	}
	switch w := want.(type) {
	case time.Time:
		g, ok := got.(time.Time)
		if !ok || !g.Equal(w) || g.Location() != time.UTC {
			return fmt.Sprintf("%s: got %#v, want %s in UTC", where, got, w.Format(time.RFC3339Nano))
		}
		return ""
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: got %#v, want %#v", where, got, want)
		}
		for k, wv := range w {
			gv, found := g[k]
			if !found {
				return fmt.Sprintf("%s: no member %q", where, k)
			}
			if why := nativeMismatch(gv, wv, path+"/"+k); why != "" {
				return why
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: got %#v, want %#v", where, got, want)
		}
		for i := range w {
			if why := nativeMismatch(g[i], w[i], path+"/"+strconv.Itoa(i)); why != "" {
				return why
			}
		}
		return ""
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("%s: got %#v, want %#v", where, got, want)
	}
	return ""
}

func (r *vectorRun) base64(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		r.fail("base64 %q: %v", s, err)
	}
	return b
}

func (r *vectorRun) checkEvents(want *node) {
	if want == nil || want.kind != '[' {
		r.fail("an events op needs an \"events\" array")
	}
	if len(want.vals) != len(r.events) {
		r.fail("%d deliveries, want %d", len(r.events), len(want.vals))
	}
	for i, w := range want.vals {
		e := r.events[i]
		patch := e.patch
		if patch == nil {
			patch = []byte("null")
		}
		label := "delivery " + strconv.Itoa(i+1)
		r.sameAs(label+" next", w, "next", e.next)
		r.sameAs(label+" prev", w, "prev", e.prev)
		r.sameAs(label+" patch", w, "patch", patch)
		if strconv.FormatUint(e.version, 10) != member(w, "version").str {
			r.fail("%s version %d, want %s", label, e.version, member(w, "version").str)
		}
	}
	r.events = nil
}
