package agentstate

// What the library refuses to store, checked by the encoder before any call into C, so that a
// Go value the library cannot take fails one way (ErrCodec), whatever its depth or shape,
// instead of failing as malformed JSON past the parser's limit or coming back as another type.

import "fmt"

// maxStoredDepth is the library's nesting limit (MAX_DEPTH in crates/agent_state/src/value/codec.rs): the top-level
// object of a state is level 1, each array or object one more; a tagged value counts with its
// inner structure ($map: object, array, pair; $set: object, array; the others: the object).
const maxStoredDepth = 64

// enter counts n levels for the container about to be written and refuses them beyond the
// library's limit; leave(n) gives them back once the container is written.
func (e *encoder) enter(n int) error {
	if e.level+n > maxStoredDepth {
		return &codecError{msg: fmt.Sprintf("nesting deeper than %d levels, the most the library stores", maxStoredDepth), nesting: true}
	}
	e.level += n
	return nil
}

func (e *encoder) leave(n int) { e.level -= n }

// rawNesting refuses the JSON text of a json.Marshaler when it nests so deep, below the current
// level, that the library would refuse it too. The text's brackets may count one level more
// than the library does (the member object of a $typedarray or $regexp is not a level), so only
// what is deeper than that is refused here; the library checks the rest exactly.
func (e *encoder) rawNesting(raw []byte) error {
	depth, deepest := 0, 0
	inString := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			if depth > deepest {
				deepest = depth
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	if e.level+deepest > maxStoredDepth+1 {
		return &codecError{msg: fmt.Sprintf("nesting deeper than %d levels, the most the library stores (in MarshalJSON output)", maxStoredDepth), nesting: true}
	}
	return nil
}

// tagShaped refuses a Go map or struct (kind) whose only member is name when name is a tag:
// stored, it would be a tagged value and come back as another Go type (a map with only "$date"
// would come back as a time.Time), or be refused as a malformed one.
func tagShaped(kind, name string) error {
	for _, tag := range tagNames {
		if name == tag {
			return encErr("a Go %s whose only member is %q would be stored as a tagged %s value "+
				"and read back as another type; store the tagged value's Go type (time.Time, *big.Int, "+
				"[]byte, Map, Set, TypedArray, RegExp), or json.RawMessage for tagged JSON text", kind, name, tag)
		}
	}
	return nil
}
