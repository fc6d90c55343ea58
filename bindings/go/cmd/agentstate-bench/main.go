// Command agentstate-bench times SetState and GetState through the Go binding (cgo included),
// at the state sizes of the C ABI benchmark. `make bench` runs it; it prints a Markdown table
// and writes the raw figures as JSON.
//
//	go run ./cmd/agentstate-bench [-smoke] [-out FILE] [-dir DIR]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	agentstate "github.com/agent-state/agent-state/bindings/go"
	"github.com/agent-state/agent-state/bindings/go/internal/benchstate"
)

// makeState is the benchmark state shared with the codec benchmarks.
var makeState = benchstate.State

type row struct {
	Op    string  `json:"op"`
	Size  int     `json:"size"`
	NsOp  float64 `json:"ns_per_op"`
	Ops   int     `json:"ops"`
	Notes string  `json:"notes"`
}

// timeIt returns the median time per operation over rounds of n operations.
func timeIt(rounds, n int, f func(i int)) float64 {
	f(0)
	var samples []float64
	k := 0
	for r := 0; r < rounds; r++ {
		start := time.Now()
		for i := 0; i < n; i++ {
			k++
			f(k)
		}
		samples = append(samples, float64(time.Since(start).Nanoseconds())/float64(n))
	}
	sort.Float64s(samples)
	return samples[len(samples)/2]
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentstate-bench:", err)
		os.Exit(1)
	}
}

func main() {
	smoke := flag.Bool("smoke", false, "a few hundred operations per case")
	out := flag.String("out", "", "write the raw figures as JSON to this file")
	dir := flag.String("dir", os.TempDir(), "directory for the store files")
	flag.Parse()

	rounds, setOps, getOps := 9, 300, 3000
	if *smoke {
		rounds, setOps, getOps = 3, 30, 100
	}
	work, err := os.MkdirTemp(*dir, "agentstate-go-bench-")
	must(err)
	defer os.RemoveAll(work)

	var rows []row
	for _, size := range []int{1024, 16 * 1024, 256 * 1024} {
		a, err := agentstate.Open(filepath.Join(work, fmt.Sprintf("go_%d.db", size)),
			agentstate.Options{Synchronous: agentstate.SyncNormal, MaxValueBytes: 4 << 20})
		must(err)
		_, err = a.ReplaceStateJSON(makeState(size))
		must(err)
		patches := make([][]byte, 64)
		maps := make([]map[string]any, 64)
		for i := range patches {
			patches[i] = []byte(fmt.Sprintf(`{"status":"s%d","m1":{"id":%d,"score":%d.25}}`, i, i, i%7))
			must(json.Unmarshal(patches[i], &maps[i]))
		}
		n := setOps
		if size > 16*1024 {
			n = setOps / 5
		}
		rows = append(rows,
			row{"SetStateJSON", size, timeIt(rounds, n, func(i int) {
				_, err := a.SetStateJSON(patches[i%64])
				must(err)
			}), n, "raw JSON in and out, synchronous=normal"},
			row{"SetState", size, timeIt(rounds, n, func(i int) {
				_, err := a.SetState(maps[i%64])
				must(err)
			}), n, "map in, decoded map out, synchronous=normal"},
			row{"GetStateJSON", size, timeIt(rounds, getOps, func(int) {
				_, err := a.GetStateJSON()
				must(err)
			}), getOps, "copies the bytes into a Go slice"},
			row{"GetState", size, timeIt(rounds, getOps/10+1, func(int) {
				_, err := a.GetState()
				must(err)
			}), getOps/10 + 1, "decodes into map[string]any"},
		)
		must(a.Close())
	}

	fmt.Println("| Go operation | state | µs/op | what it includes |")
	fmt.Println("|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %d KiB | %.2f | %s |\n", r.Op, r.Size/1024, r.NsOp/1000, r.Notes)
	}
	if *out != "" {
		data, err := json.MarshalIndent(rows, "", " ")
		must(err)
		must(os.MkdirAll(filepath.Dir(*out), 0o755))
		must(os.WriteFile(*out, data, 0o644))
	}
}
