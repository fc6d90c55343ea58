package agentstate

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// A reference RFC 7396 merge over ordered JSON (existing members keep their place, new ones are
// appended in patch order), compared byte for byte with the library on random states and
// patches.
func TestMergeMatchesAReferenceImplementation(t *testing.T) {
	rng := rand.New(rand.NewSource(7396))
	a := openAgent(t, "", Options{})
	state := &node{kind: '{'}
	for step := 0; step < 400; step++ {
		patch := randomObject(rng, 0, true)
		patchText := serialize(patch)
		want := serialize(mergeNodes(state, patch))
		got, err := a.SetStateJSON([]byte(patchText))
		if err != nil {
			t.Fatalf("step %d: SetStateJSON(%s): %v", step, patchText, err)
		}
		if string(got) != want {
			t.Fatalf("step %d: state %s\npatch %s\n got %s\nwant %s", step, serialize(state), patchText, got, want)
		}
		if state, err = parseJSON(got); err != nil {
			t.Fatal(err)
		}
		if step%50 == 49 { // occasionally start over from a replaced state
			r := randomObject(rng, 0, false)
			if _, err := a.ReplaceStateJSON([]byte(serialize(r))); err != nil {
				t.Fatal(err)
			}
			state = r
		}
	}
}

var mergeKeys = []string{"a", "b", "c", "d", "e", "f"}

func randomValue(rng *rand.Rand, depth int, patch bool) *node {
	switch r := rng.Intn(10); {
	case r < 2 && patch:
		return &node{kind: 'z', raw: []byte("null")}
	case r < 5 && depth < 3:
		return randomObject(rng, depth+1, patch)
	case r < 6:
		n := &node{kind: '['}
		for i := rng.Intn(3); i > 0; i-- {
			n.vals = append(n.vals, randomValue(rng, depth+1, false))
		}
		return n
	case r < 7:
		tagged := []string{`{"$set":[1,"x"]}`, `{"$date":"2026-11-30T03:06:44.123Z"}`, `{"$bigint":"-5"}`}
		n, _ := parseJSON([]byte(tagged[rng.Intn(len(tagged))]))
		return n
	case r < 8:
		s := fmt.Sprintf(`"s%d"`, rng.Intn(100))
		return &node{kind: 's', raw: []byte(s)}
	default:
		s := fmt.Sprint(rng.Intn(1000) - 500)
		return &node{kind: 'n', raw: []byte(s)}
	}
}

// randomObject makes a plain object (patch: values may be null, for deletion).
func randomObject(rng *rand.Rand, depth int, patch bool) *node {
	n := &node{kind: '{'}
	for _, i := range rng.Perm(len(mergeKeys))[:rng.Intn(4)] {
		n.keys = append(n.keys, mergeKeys[i])
		n.vals = append(n.vals, randomValue(rng, depth, patch))
	}
	return n
}

func isPlainObject(n *node) bool { return n != nil && n.kind == '{' && tagOf(n) == "" }

// mergeNodes is RFC 7396 MergePatch(target, patch), with tagged values as leaves.
func mergeNodes(target, patch *node) *node {
	if !isPlainObject(patch) {
		return patch
	}
	out := &node{kind: '{'}
	if isPlainObject(target) {
		out.keys = append(out.keys, target.keys...)
		out.vals = append(out.vals, target.vals...)
	}
	for i, k := range patch.keys {
		v := patch.vals[i]
		pos := -1
		for j, ok := range out.keys {
			if ok == k {
				pos = j
			}
		}
		switch {
		case v.kind == 'z' && pos >= 0:
			out.keys = append(out.keys[:pos:pos], out.keys[pos+1:]...)
			out.vals = append(out.vals[:pos:pos], out.vals[pos+1:]...)
		case v.kind == 'z':
		case pos >= 0:
			out.vals[pos] = mergeNodes(out.vals[pos], v)
		default:
			out.keys = append(out.keys, k)
			out.vals = append(out.vals, mergeNodes(nil, v))
		}
	}
	return out
}

func serialize(n *node) string {
	switch n.kind {
	case '{':
		parts := make([]string, len(n.keys))
		for i, k := range n.keys {
			parts[i] = fmt.Sprintf("%q:%s", k, serialize(n.vals[i]))
		}
		return "{" + strings.Join(parts, ",") + "}"
	case '[':
		parts := make([]string, len(n.vals))
		for i, v := range n.vals {
			parts[i] = serialize(v)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return string(n.raw)
}
