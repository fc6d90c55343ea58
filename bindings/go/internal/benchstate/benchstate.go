// Package benchstate builds the states the benchmarks use, so `make bench`
// (cmd/agentstate-bench) and the codec benchmarks measure the same shape.
package benchstate

import (
	"fmt"
	"strings"
)

// State builds a state of about size bytes: a status plus members of ~250 bytes,
// the same shape as the C ABI benchmark's.
func State(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"status":"idle"`)
	for i := 0; b.Len()+260 < size || i < 2; i++ {
		fmt.Fprintf(&b, `,"m%d":{"id":%d,"name":"member %d","tags":["alpha","beta"],"score":0.5,"text":"%s"}`,
			i, i, i, strings.Repeat("x", 150))
	}
	b.WriteString("}")
	return []byte(b.String())
}
