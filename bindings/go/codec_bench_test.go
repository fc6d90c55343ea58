package agentstate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agent-state/agent-state/bindings/go/internal/benchstate"
)

// The codec alone (no cgo, no SQLite) on the states of `make bench` (cmd/agentstate-bench): the
// figures that decide whether a hand-written path is worth keeping over encoding/json.

// benchState is the state of `make bench` (internal/benchstate).
var benchState = benchstate.State

type benchMember struct {
	ID    int      `json:"id"`
	Name  string   `json:"name"`
	Tags  []string `json:"tags"`
	Score float64  `json:"score"`
	Text  string   `json:"text"`
}

var benchSizes = []int{1024, 16 * 1024, 256 * 1024}

func BenchmarkCodecDecodeAny(b *testing.B) {
	for _, size := range benchSizes {
		data := benchState(size)
		b.Run(fmt.Sprintf("%dKiB", size/1024), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				if _, err := unmarshalAny(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCodecUnmarshalTyped(b *testing.B) {
	for _, size := range benchSizes {
		data := benchState(size)
		b.Run(fmt.Sprintf("%dKiB", size/1024), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				var v struct {
					Status string      `json:"status"`
					M0     benchMember `json:"m0"`
					M1     benchMember `json:"m1"`
				}
				if err := Unmarshal(data, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCodecMarshal(b *testing.B) {
	for _, size := range benchSizes {
		v, err := unmarshalAny(benchState(size))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("%dKiB", size/1024), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := Marshal(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The encoder's hand-written string escaper against encoding/json doing the same job, on the
// strings of the benchmark states (encoding/json's text then differs only in the escapes the
// library writes otherwise, which these strings do not have).

func benchStrings() []string {
	return []string{"status", "idle", "m12", "id", "name", "member 12", "tags", "alpha", "beta",
		"score", "text", strings.Repeat("x", 150)}
}

func BenchmarkScalarString(b *testing.B) {
	strs := benchStrings()
	b.Run("handwritten", func(b *testing.B) {
		e := encoder{}
		for i := 0; i < b.N; i++ {
			e.buf = e.buf[:0]
			for _, s := range strs {
				if err := e.str(s); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		for i := 0; i < b.N; i++ {
			buf.Reset()
			for _, s := range strs {
				if err := enc.Encode(s); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
