package sqlite

import (
	"database/sql"
	"errors"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Unavailable reports whether err says the database cannot be used right now,
// rather than that a statement failed: a write that waited past the busy
// timeout (ErrBusy, SQLITE_BUSY, SQLITE_LOCKED), a file that cannot be opened
// or read (SQLITE_CANTOPEN, SQLITE_IOERR), or a handle that was closed. A
// server answers such errors with 503 and Retry-After, not 500.
func (d *Driver) Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if d.closed.Load() || errors.Is(err, ErrBusy) || errors.Is(err, sql.ErrConnDone) {
		return true
	}
	var se *msqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR:
			return true
		}
	}
	return false
}
