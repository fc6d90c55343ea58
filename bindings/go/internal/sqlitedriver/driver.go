//go:build agentstate_benchsql

package sqlitedriver

/*
#cgo LDFLAGS: -lsqlite3
#include <sqlite3.h>
#include <stdlib.h>

static int bind_blob(sqlite3_stmt *s, int i, const void *p, int n) {
	return sqlite3_bind_blob(s, i, p, n, SQLITE_TRANSIENT);
}
static int bind_text(sqlite3_stmt *s, int i, const char *p, int n) {
	return sqlite3_bind_text(s, i, p, n, SQLITE_TRANSIENT);
}
*/
import "C"

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"unsafe"
)

// Available reports whether the driver is built in (tag agentstate_benchsql); it registers as
// "agentstate-bench-sqlite3".
const Available = true

func init() { sql.Register("agentstate-bench-sqlite3", drv{}) }

type drv struct{}

type conn struct{ db *C.sqlite3 }

type stmt struct {
	c *conn
	s *C.sqlite3_stmt
}

type rows struct {
	st    *stmt
	cols  []string
	owned bool // the statement is closed with the rows (a query without Prepare)
}

func (c *conn) err(rc C.int) error {
	return fmt.Errorf("sqlite3: %d: %s", int(rc), C.GoString(C.sqlite3_errmsg(c.db)))
}

func (drv) Open(name string) (driver.Conn, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var db *C.sqlite3
	flags := C.SQLITE_OPEN_READWRITE | C.SQLITE_OPEN_CREATE | C.SQLITE_OPEN_NOMUTEX
	if rc := C.sqlite3_open_v2(cname, &db, C.int(flags), nil); rc != C.SQLITE_OK {
		C.sqlite3_close_v2(db)
		return nil, fmt.Errorf("sqlite3: open %s: %d", name, int(rc))
	}
	C.sqlite3_busy_timeout(db, 5000)
	return &conn{db}, nil
}

func (c *conn) Prepare(query string) (driver.Stmt, error) {
	cq := C.CString(query)
	defer C.free(unsafe.Pointer(cq))
	var s *C.sqlite3_stmt
	if rc := C.sqlite3_prepare_v2(c.db, cq, -1, &s, nil); rc != C.SQLITE_OK {
		return nil, c.err(rc)
	}
	return &stmt{c, s}, nil
}

func (c *conn) Close() error {
	C.sqlite3_close_v2(c.db)
	return nil
}

func (c *conn) Begin() (driver.Tx, error) {
	return nil, errors.New("sqlite3: use Exec(\"BEGIN IMMEDIATE\") on a sql.Conn")
}

func (s *stmt) Close() error {
	C.sqlite3_finalize(s.s)
	return nil
}

func (s *stmt) NumInput() int { return int(C.sqlite3_bind_parameter_count(s.s)) }

func (s *stmt) bind(args []driver.Value) error {
	C.sqlite3_reset(s.s)
	for i, a := range args {
		n := C.int(i + 1)
		var rc C.int
		switch v := a.(type) {
		case nil:
			rc = C.sqlite3_bind_null(s.s, n)
		case int64:
			rc = C.sqlite3_bind_int64(s.s, n, C.sqlite3_int64(v))
		case []byte:
			var p unsafe.Pointer
			if len(v) > 0 {
				p = unsafe.Pointer(&v[0])
			}
			rc = C.bind_blob(s.s, n, p, C.int(len(v)))
		case string:
			b := []byte(v)
			var p *C.char
			if len(b) > 0 {
				p = (*C.char)(unsafe.Pointer(&b[0]))
			}
			rc = C.bind_text(s.s, n, p, C.int(len(b)))
		default:
			return fmt.Errorf("sqlite3: cannot bind %T", a)
		}
		if rc != C.SQLITE_OK {
			return s.c.err(rc)
		}
	}
	return nil
}

func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	if err := s.bind(args); err != nil {
		return nil, err
	}
	for {
		rc := C.sqlite3_step(s.s)
		if rc == C.SQLITE_DONE {
			break
		}
		if rc != C.SQLITE_ROW {
			C.sqlite3_reset(s.s)
			return nil, s.c.err(rc)
		}
	}
	C.sqlite3_reset(s.s)
	return driver.RowsAffected(C.sqlite3_changes(s.c.db)), nil
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	if err := s.bind(args); err != nil {
		return nil, err
	}
	n := int(C.sqlite3_column_count(s.s))
	cols := make([]string, n)
	for i := range cols {
		cols[i] = C.GoString(C.sqlite3_column_name(s.s, C.int(i)))
	}
	return &rows{st: s, cols: cols}, nil
}

func (r *rows) Columns() []string { return r.cols }

func (r *rows) Close() error {
	C.sqlite3_reset(r.st.s)
	return nil
}

func (r *rows) Next(dest []driver.Value) error {
	rc := C.sqlite3_step(r.st.s)
	if rc == C.SQLITE_DONE {
		return io.EOF
	}
	if rc != C.SQLITE_ROW {
		return r.st.c.err(rc)
	}
	for i := range dest {
		ci := C.int(i)
		switch C.sqlite3_column_type(r.st.s, ci) {
		case C.SQLITE_NULL:
			dest[i] = nil
		case C.SQLITE_INTEGER:
			dest[i] = int64(C.sqlite3_column_int64(r.st.s, ci))
		case C.SQLITE_FLOAT:
			dest[i] = float64(C.sqlite3_column_double(r.st.s, ci))
		default: // text and blob, as bytes (database/sql copies them out for a Scan into []byte)
			p := C.sqlite3_column_blob(r.st.s, ci)
			n := C.sqlite3_column_bytes(r.st.s, ci)
			dest[i] = C.GoBytes(p, n)
		}
	}
	return nil
}
