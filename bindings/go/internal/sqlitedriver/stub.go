//go:build !agentstate_benchsql

package sqlitedriver

// Available reports whether the driver is built in (tag agentstate_benchsql); it registers as
// "agentstate-bench-sqlite3".
const Available = false
