package agentstate

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A path is a file name, even when it looks like an SQLite URI: the store, its WAL and its
// shared memory are exactly the named files, private to their owner.
func TestURILookingPathOpensExactlyTheNamedFile(t *testing.T) {
	skipOnPostgres(t, "file names")
	dir := chdirTemp(t)
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	for _, name := range []string{"file:notes.db", "file:z.db#frag", "file:q.db?mode=memory"} {
		a, err := Open(name, Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := a.SetState(map[string]any{"n": 1}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, suffix := range []string{"", "-wal", "-shm"} {
			info, err := os.Stat(name + suffix)
			if err != nil {
				t.Fatalf("%s%s: %v", name, suffix, err)
			}
			if mode := info.Mode().Perm(); mode != 0o600 {
				t.Errorf("%s%s has mode %o, want 600", name, suffix, mode)
			}
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, never := range []string{"notes.db", "z.db", "q.db"} {
		if _, err := os.Stat(filepath.Join(dir, never)); err == nil {
			t.Errorf("%s was created: the data went to a file the user never named", never)
		}
	}
}
