// Command agentstate-bench times SetState and GetState through the Go binding (cgo included),
// and their awaited Context forms against them, at the state sizes of the C ABI benchmark.
// `make bench` runs it; it prints a Markdown table and writes the raw figures as JSON.
//
//	go run ./cmd/agentstate-bench [-smoke] [-out FILE] [-dir DIR]
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	agentstate "github.com/agent-state/agent-state/bindings/go"
	"github.com/agent-state/agent-state/bindings/go/internal/benchstate"
	"github.com/agent-state/agent-state/bindings/go/internal/sqlitedriver"
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

// race runs the contenders in alternating rounds of n operations (the starting contender
// rotating each round, as the C ABI benchmark does); returns each one's median ns/op.
func race(rounds, n int, fs ...func(i int)) []float64 {
	samples := make([][]float64, len(fs))
	k := 0
	for _, f := range fs {
		f(0)
	}
	for r := 0; r < rounds; r++ {
		for j := range fs {
			c := (r + j) % len(fs)
			start := time.Now()
			for i := 0; i < n; i++ {
				k++
				fs[c](k)
			}
			samples[c] = append(samples[c], float64(time.Since(start).Nanoseconds())/float64(n))
		}
	}
	out := make([]float64, len(fs))
	for c, s := range samples {
		sort.Float64s(s)
		if len(s)%2 == 1 {
			out[c] = s[len(s)/2]
		} else {
			out[c] = (s[len(s)/2-1] + s[len(s)/2]) / 2
		}
	}
	return out
}

// mergePatch is RFC 7396 over decoded JSON, as a user would write it; it never aliases the
// patch's objects into the target.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
		} else {
			t[k] = mergePatch(t[k], v)
		}
	}
	return t
}

// handRolled is the state as one JSON blob in a plain SQLite table through database/sql, with
// prepared statements on one connection, the same pragmas (WAL, synchronous=NORMAL).
type handRolled struct {
	conn                    *sql.Conn
	begin, sel, upd, commit *sql.Stmt
}

func openHandRolled(path string, state []byte) *handRolled {
	db, err := sql.Open("agentstate-bench-sqlite3", path)
	must(err)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	must(err)
	for _, q := range []string{"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL",
		"CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v BLOB NOT NULL)"} {
		_, err := conn.ExecContext(ctx, q)
		must(err)
	}
	_, err = conn.ExecContext(ctx,
		"INSERT INTO kv VALUES ('state', ?) ON CONFLICT(k) DO UPDATE SET v = excluded.v", state)
	must(err)
	prep := func(q string) *sql.Stmt {
		s, err := conn.PrepareContext(ctx, q)
		must(err)
		return s
	}
	return &handRolled{conn, prep("BEGIN IMMEDIATE"), prep("SELECT v FROM kv WHERE k = 'state'"),
		prep("UPDATE kv SET v = ? WHERE k = 'state'"), prep("COMMIT")}
}

// setState is the read-merge-write: BEGIN IMMEDIATE, SELECT, json.Unmarshal, merge,
// json.Marshal, UPDATE, COMMIT; it returns the merged state as SetState does.
func (h *handRolled) setState(patch map[string]any) map[string]any {
	_, err := h.begin.Exec()
	must(err)
	var raw []byte
	must(h.sel.QueryRow().Scan(&raw))
	var state map[string]any
	must(json.Unmarshal(raw, &state))
	merged := mergePatch(state, patch).(map[string]any)
	out, err := json.Marshal(merged)
	must(err)
	_, err = h.upd.Exec(out)
	must(err)
	_, err = h.commit.Exec()
	must(err)
	return merged
}

type versusRow struct {
	Fig         string   `json:"fig"`
	Op          string   `json:"op"`
	Size        int      `json:"size"`
	OursNs      float64  `json:"ours_ns"`
	Alternative string   `json:"alternative"`
	AltNs       float64  `json:"alt_ns"`
	Ratio       float64  `json:"ratio"`
	Target      *float64 `json:"target"`
	Verdict     string   `json:"verdict"`
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
	var versus []versusRow
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

		// The awaited calls (the Context forms, submitted to the library's worker pool) against
		// the same calls made in a cgo call, in alternating rounds.
		ctx := context.Background()
		set := race(rounds, n, func(i int) {
			_, err := a.SetState(maps[i%64])
			must(err)
		}, func(i int) {
			_, err := a.SetStateContext(ctx, maps[i%64])
			must(err)
		})
		get := race(rounds, getOps, func(int) {
			_, err := a.GetStateJSON()
			must(err)
		}, func(int) {
			_, err := a.GetStateJSONContext(ctx)
			must(err)
		})
		// A handle read only through the Context form, never by a read without it (whether its
		// validated copy answers such reads is agent_submit's to say).
		awaitedOnly, err := agentstate.Open(filepath.Join(work, fmt.Sprintf("go_%d.db", size)),
			agentstate.Options{MaxValueBytes: 4 << 20})
		must(err)
		coldGet := timeIt(rounds, getOps/10+1, func(int) {
			_, err := awaitedOnly.GetStateJSONContext(ctx)
			must(err)
		})
		must(awaitedOnly.Close())
		rows = append(rows,
			row{"GetStateJSONContext, Context reads only", size, coldGet, getOps/10 + 1,
				"a handle read only through GetStateJSONContext, nothing committed meanwhile"},
			row{"SetStateContext", size, set[1], n, fmt.Sprintf(
				"SetState awaited (submitted to the library's workers; the goroutine waits on a channel, holding no thread): %.2f× SetState's %.2f µs, alternating rounds",
				set[1]/set[0], set[0]/1000)},
			row{"GetStateJSONContext", size, get[1], getOps, fmt.Sprintf(
				"GetStateJSON awaited (a read the handle's validated copy answers completes before the submission returns): %.2f× GetStateJSON's %.2f µs, alternating rounds",
				get[1]/get[0], get[0]/1000)},
		)

		// Figure 11: SetState with a decoded map against encoding/json + database/sql doing
		// the same read-merge-write, in alternating rounds.
		if sqlitedriver.Available {
			h := openHandRolled(filepath.Join(work, fmt.Sprintf("hand_%d.db", size)), makeState(size))
			t := race(rounds, n, func(i int) {
				_, err := a.SetState(maps[i%64])
				must(err)
			}, func(i int) {
				h.setState(maps[i%64])
			})
			target := 1.0
			r := versusRow{"11", "SetState(map)", size, t[0],
				"encoding/json + database/sql read-merge-write", t[1], t[1] / t[0], &target, "MISS"}
			if r.Ratio >= target {
				r.Verdict = "PASS"
			}
			versus = append(versus, r)
			must(h.conn.Close())
		}
		must(a.Close())
	}

	fmt.Println("| Go operation | state | µs/op | what it includes |")
	fmt.Println("|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %d KiB | %.2f | %s |\n", r.Op, r.Size/1024, r.NsOp/1000, r.Notes)
	}
	fmt.Println()
	if !sqlitedriver.Available {
		fmt.Println("fig. 11, SetState vs encoding/json + database/sql: not run (built without -tags agentstate_benchsql; bench/run.sh sets it)")
	} else {
		fmt.Println("| fig. | Go operation | state | agent_state (µs) | contender | contender (µs) | ratio | target | |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|")
		for _, r := range versus {
			fmt.Printf("| %s | %s | %d KiB | %.2f | %s | %.2f | %.2f× | ≥ %g× | %s |\n", r.Fig, r.Op,
				r.Size/1024, r.OursNs/1000, r.Alternative, r.AltNs/1000, r.Ratio, *r.Target, r.Verdict)
		}
		fmt.Println("(contender: database/sql over a minimal cgo driver on the system's libsqlite3, internal/sqlitedriver: no SQLite driver is vendored and the module builds offline)")
	}
	if *out != "" {
		data, err := json.MarshalIndent(map[string]any{"rows": rows, "versus": versus}, "", " ")
		must(err)
		must(os.MkdirAll(filepath.Dir(*out), 0o755))
		must(os.WriteFile(*out, data, 0o644))
	}
}
