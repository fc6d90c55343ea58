// The Go side of the cross-language test (tests/cross-language/run.sh builds and runs it, with
// bindings/go/goenv.sh's environment: the checkout's library, tag agentstate_inrepo):
//
//	crosslanguage write STORE OUT  writes the agents "go" (canonical(), the same logical value as
//	                               values.js's) and "go-extra", and OUT/go.json (Marshal)
//	crosslanguage read STORE       reads every agent with GetState and checks the Go type and
//	                               value of each member (time.Time, *big.Int, []byte, Map, Set,
//	                               TypedArray, RegExp, json.Number)
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"time"

	agentstate "github.com/agent-state/agent-state/bindings/go"
)

func date(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
	return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
}

func bigInt(text string) *big.Int {
	x, ok := new(big.Int).SetString(text, 10)
	if !ok {
		panic(text)
	}
	return x
}

func pow(base, exp int64) *big.Int {
	return new(big.Int).Exp(big.NewInt(base), big.NewInt(exp), nil)
}

// typed builds a TypedArray from numbers, little-endian, as JavaScript lays them out.
func typed(name string, values ...any) agentstate.TypedArray {
	var buf bytes.Buffer
	for _, v := range values {
		var err error
		switch x := v.(type) {
		case int8, uint8, int16, uint16, int32, uint32, int64, uint64, float32, float64:
			err = binary.Write(&buf, binary.LittleEndian, x)
		default:
			panic(fmt.Sprintf("typed: %T", v))
		}
		if err != nil {
			panic(err)
		}
	}
	return agentstate.TypedArray{Type: name, Data: buf.Bytes()}
}

// canonical is values.js's canonical() in Go's types. Maps are written with their keys sorted,
// which is why every other language writes its members in that order.
func canonical() map[string]any {
	return map[string]any{
		"arrays": []any{1, "two", nil, true, []any{3, []any{4}}, map[string]any{"five": 5}},
		"bigints": map[string]any{
			"beyondSafe": new(big.Int).Add(pow(2, 53), big.NewInt(1)),
			"huge":       pow(2, 200),
			"negHuge":    new(big.Int).Neg(pow(3, 100)),
			"small":      big.NewInt(7),
			"zero":       big.NewInt(0),
		},
		"bytes": map[string]any{"buffer": []byte{0, 1, 2, 127, 128, 255}, "empty": []byte{}},
		"dates": map[string]any{
			"epoch":  date(1970, 1, 1, 0, 0, 0, 0),
			"far":    date(9999, 12, 31, 23, 59, 59, 999_000_000),
			"millis": date(2026, 11, 30, 3, 6, 44, 123_000_000),
			"old":    date(1969, 7, 20, 20, 17, 40, 0),
		},
		"maps": map[string]any{
			"empty":      agentstate.Map{},
			"numberKeys": agentstate.Map{{Key: 1, Value: "one"}, {Key: 2.5, Value: "two and a half"}, {Key: -3, Value: "minus three"}},
			"objectKeys": agentstate.Map{{Key: map[string]any{"id": 1}, Value: "first"}, {Key: []any{1, 2}, Value: "pair"},
				{Key: nil, Value: "nothing"}, {Key: true, Value: "yes"}},
			"stringKeys": agentstate.Map{{Key: "a", Value: 1}, {Key: "b", Value: map[string]any{"c": []any{1, 2}}}},
		},
		"nested": map[string]any{
			"deep": map[string]any{"deeper": map[string]any{"set": agentstate.Set{
				date(2026, 1, 2, 3, 4, 5, 6_000_000), typed("Uint8Array", uint8(1), uint8(2))}}},
			"list": []any{
				agentstate.Map{{Key: "k", Value: agentstate.Set{big.NewInt(1)}}},
				map[string]any{"re": agentstate.RegExp{Source: "x", Flags: "g"}, "when": date(1970, 1, 1, 0, 0, 0, 0)},
			},
		},
		"numbers": map[string]any{"float": 1.5, "int": 42, "maxSafe": int64(9007199254740991), "negative": -7, "small": 0.001},
		"regexps": map[string]any{
			"dotAll":    agentstate.RegExp{Source: "a.b", Flags: "s"},
			"global":    agentstate.RegExp{Source: "a+b", Flags: "gi"},
			"multiline": agentstate.RegExp{Source: "^line$", Flags: "m"},
			"plain":     agentstate.RegExp{Source: "^x$", Flags: ""},
			"sticky":    agentstate.RegExp{Source: `\d+`, Flags: "y"},
			"unicode":   agentstate.RegExp{Source: `\p{L}+`, Flags: "u"},
		},
		"sets": map[string]any{
			"empty":   agentstate.Set{},
			"mixed":   agentstate.Set{1, "1", []any{1}, map[string]any{"a": 1}, nil, big.NewInt(2)},
			"numbers": agentstate.Set{3, 1, 2},
			"strings": agentstate.Set{"b", "a"},
		},
		"strings": map[string]any{
			"ascii":   "hello",
			"escapes": "quote \" backslash \\ newline \n tab \t",
			"unicode": "h\u00e9llo w\u00f6rld \u2713 \U0001F600",
		},
		"tagLike": map[string]any{"$date": "not a date", "note": "two members: plain data, not a tagged value"},
		"typed": map[string]any{
			"BigInt64Array":     typed("BigInt64Array", int64(math.MinInt64), int64(math.MaxInt64)),
			"BigUint64Array":    typed("BigUint64Array", uint64(0), uint64(math.MaxUint64)),
			"DataView":          agentstate.TypedArray{Type: "DataView", Data: []byte{1, 2, 3, 4}},
			"Float32Array":      typed("Float32Array", float32(1.5), float32(-0.25), float32(math.Inf(1))),
			"Float64Array":      typed("Float64Array", 0.1, -1e300, math.Copysign(0, -1), math.Inf(-1)),
			"Int16Array":        typed("Int16Array", int16(-32768), int16(0), int16(32767)),
			"Int32Array":        typed("Int32Array", int32(math.MinInt32), int32(math.MaxInt32)),
			"Int8Array":         typed("Int8Array", int8(-128), int8(-1), int8(0), int8(127)),
			"Uint16Array":       typed("Uint16Array", uint16(0), uint16(65535)),
			"Uint32Array":       typed("Uint32Array", uint32(0), uint32(math.MaxUint32)),
			"Uint8Array":        typed("Uint8Array", uint8(0), uint8(1), uint8(255)),
			"Uint8ClampedArray": typed("Uint8ClampedArray", uint8(0), uint8(128), uint8(255)),
			"empty":             agentstate.TypedArray{Type: "Float64Array", Data: []byte{}},
		},
	}
}

// A struct is written as an object of its fields (encoding/json's rules).
type record struct {
	At   time.Time `json:"at"`
	Name string    `json:"name"`
	Tags []string  `json:"tags"`
}

func goExtra() map[string]any {
	return map[string]any{
		"float16": agentstate.TypedArray{Type: "Float16Array", Data: []byte{0x00, 0x3c, 0x00, 0xc0}},
		"nanos":   date(2026, 11, 30, 3, 6, 44, 123_456_789),
		"struct":  record{At: date(2026, 11, 30, 0, 0, 0, 0), Name: "ada", Tags: []string{"x", "y"}},
	}
}

// asRead turns a written value into what GetState gives for it: numbers become json.Number
// with their JSON text, a struct or []string what its JSON is.
func asRead(v any) any {
	switch x := v.(type) {
	case int:
		return json.Number(strconv.Itoa(x))
	case int64:
		return json.Number(strconv.FormatInt(x, 10))
	case float64:
		return json.Number(strconv.FormatFloat(x, 'g', -1, 64))
	case map[string]any:
		out := map[string]any{}
		for k, m := range x {
			out[k] = asRead(m)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, m := range x {
			out[i] = asRead(m)
		}
		return out
	case agentstate.Map:
		out := agentstate.Map{}
		for _, e := range x {
			out = append(out, agentstate.MapEntry{Key: asRead(e.Key), Value: asRead(e.Value)})
		}
		return out
	case agentstate.Set:
		out := agentstate.Set{}
		for _, m := range x {
			out = append(out, asRead(m))
		}
		return out
	case record:
		return map[string]any{"at": x.At, "name": x.Name, "tags": []any{x.Tags[0], x.Tags[1]}}
	default:
		return v
	}
}

func expected() map[string]map[string]any {
	c := asRead(canonical()).(map[string]any)
	return map[string]map[string]any{
		"node":   c,
		"python": asRead(canonical()).(map[string]any),
		"go":     asRead(canonical()).(map[string]any),
		"node-rules": {
			"beyondSafe": json.Number("1152921504606847000"), // 2 ** 60 as JavaScript writes it
			"buffer":     typed("Uint8Array", uint8(1), uint8(2), uint8(3)),
			"negZero":    json.Number("0"),
			"view":       typed("Uint16Array", uint16(1), uint16(2)),
			"window":     agentstate.TypedArray{Type: "DataView", Data: []byte{1, 0, 2, 0}},
		},
		"python-extra": {
			"float16":   agentstate.TypedArray{Type: "Float16Array", Data: []byte{0x00, 0x3c, 0x00, 0xc0}},
			"micros":    date(2026, 11, 30, 3, 6, 44, 123_456_000),
			"tupleList": []any{json.Number("1"), json.Number("2"), json.Number("3")},
		},
		"go-extra": asRead(goExtra()).(map[string]any),
	}
}

// same compares strictly: the same Go type and value, recursively; it appends what differs.
func same(got, want any, path string, problems *[]string) {
	where := path
	if where == "" {
		where = "/"
	}
	if reflect.TypeOf(got) != reflect.TypeOf(want) {
		*problems = append(*problems, fmt.Sprintf("%s: got %T %v, want %T %v", where, got, got, want, want))
		return
	}
	switch w := want.(type) {
	case map[string]any:
		g := got.(map[string]any)
		if len(g) != len(w) {
			*problems = append(*problems, fmt.Sprintf("%s: %d members, want %d", where, len(g), len(w)))
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				*problems = append(*problems, fmt.Sprintf("%s/%s: missing", path, k))
				continue
			}
			same(gv, wv, path+"/"+k, problems)
		}
	case []any:
		g := got.([]any)
		if len(g) != len(w) {
			*problems = append(*problems, fmt.Sprintf("%s: %d items, want %d", where, len(g), len(w)))
			return
		}
		for i := range w {
			same(g[i], w[i], fmt.Sprintf("%s/%d", path, i), problems)
		}
	case agentstate.Set:
		same([]any(got.(agentstate.Set)), []any(w), path+"/<set>", problems)
	case agentstate.Map:
		g := got.(agentstate.Map)
		if len(g) != len(w) {
			*problems = append(*problems, fmt.Sprintf("%s: %d entries, want %d", where, len(g), len(w)))
			return
		}
		for i := range w {
			same(g[i].Key, w[i].Key, fmt.Sprintf("%s/<key %d>", path, i), problems)
			same(g[i].Value, w[i].Value, fmt.Sprintf("%s/<value %d>", path, i), problems)
		}
	case *big.Int:
		if got.(*big.Int).Cmp(w) != 0 {
			*problems = append(*problems, fmt.Sprintf("%s: got %v, want %v", where, got, w))
		}
	case time.Time:
		g := got.(time.Time)
		if !g.Equal(w) || g.Location() != time.UTC {
			*problems = append(*problems, fmt.Sprintf("%s: got %v, want %v", where, g, w))
		}
	case []byte:
		if !bytes.Equal(got.([]byte), w) {
			*problems = append(*problems, fmt.Sprintf("%s: got %v, want %v", where, got, w))
		}
	case agentstate.TypedArray:
		g := got.(agentstate.TypedArray)
		if g.Type != w.Type || !bytes.Equal(g.Data, w.Data) {
			*problems = append(*problems, fmt.Sprintf("%s: got %s %v, want %s %v", where, g.Type, g.Data, w.Type, w.Data))
		}
	default: // json.Number, string, bool, nil, RegExp
		if got != want {
			*problems = append(*problems, fmt.Sprintf("%s: got %#v, want %#v", where, got, want))
		}
	}
}

func write(store, out string) error {
	for _, w := range []struct {
		id    string
		state map[string]any
	}{{"go", canonical()}, {"go-extra", goExtra()}} {
		a, err := agentstate.Open(store, agentstate.Options{AgentID: w.id})
		if err != nil {
			return err
		}
		_, err = a.ReplaceState(w.state)
		if cerr := a.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	text, err := agentstate.Marshal(canonical())
	if err != nil {
		return err
	}
	fmt.Println("go: wrote the agents go, go-extra")
	return os.WriteFile(filepath.Join(out, "go.json"), text, 0o644)
}

func read(store string) (failed int, err error) {
	for _, id := range []string{"node", "python", "go", "node-rules", "python-extra", "go-extra"} {
		a, err := agentstate.Open(store, agentstate.Options{AgentID: id, ReadOnly: true})
		if err != nil {
			return failed, err
		}
		state, version, err := a.GetStateVersioned()
		a.Close()
		if err != nil {
			return failed, err
		}
		var problems []string
		if version == 0 {
			problems = append(problems, "nothing stored")
		} else {
			same(state, any(expected()[id]), "", &problems)
		}
		if len(problems) > 0 {
			failed++
			fmt.Printf("FAIL go read %s:\n", id)
			for _, p := range problems {
				fmt.Printf("    %s\n", p)
			}
		} else {
			fmt.Printf("ok   go read %s\n", id)
		}
	}
	return failed, nil
}

func main() {
	args := os.Args[1:]
	var err error
	switch {
	case len(args) == 3 && args[0] == "write":
		err = write(args[1], args[2])
	case len(args) == 2 && args[0] == "read":
		var failed int
		failed, err = read(args[1])
		if err == nil && failed > 0 {
			os.Exit(1)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: crosslanguage write STORE OUT | read STORE")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crosslanguage:", err)
		os.Exit(1)
	}
}
