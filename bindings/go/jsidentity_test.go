package agentstate

import "testing"

// The library's rule for "the same member twice" in a $set (or key twice in a $map): numbers
// by value, as JavaScript's SameValueZero compares them (1 and 1.0 are one value, so are 0 and
// -0); arrays and objects by structure, since Go and Python have no object identity to keep.
func TestSetAndMapDuplicatesFollowTheLibraryRule(t *testing.T) {
	a := openAgent(t, "", Options{})
	for _, in := range []string{
		`{"s":{"$set":[1,1.0]}}`,
		`{"s":{"$set":[0,-0]}}`,
		`{"m":{"$map":[[1,"a"],[1e0,"b"]]}}`,
		`{"m":{"$map":[[{"a":1},1],[{"a":1},2]]}}`,
	} {
		_, err := a.SetStateJSON([]byte(in))
		wantStatus(t, err, ErrCodec, "twice")
	}
	if _, err := a.SetStateJSON([]byte(`{"m":{"$map":[[{"a":1},1],[{"a":2},2]]},"s":{"$set":[1,"1",[1]]}}`)); err != nil {
		t.Fatalf("distinct keys refused: %v", err)
	}
}
