// Package sqlitedriver is a minimal database/sql driver over the system's SQLite (cgo,
// -lsqlite3), for the Go benchmark's contender only: encoding/json + database/sql doing the
// read-merge-write a user would write instead of SetState. The module vendors no SQLite driver
// and builds offline, so this is the closest honest stand-in for mattn/go-sqlite3, which is cgo
// over the same C API too; this one is thinner (no context watcher, no type conversion hooks),
// so it errs in the contender's favour.
//
// It is built only with -tags agentstate_benchsql (bench/run.sh sets it and makes sure the
// system's SQLite headers are installed), so that `go vet ./...` and the binding's tests need no
// SQLite headers; without the tag, Available is false and the benchmark says it skipped the
// contender.
package sqlitedriver
