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
// or read (SQLITE_CANTOPEN, SQLITE_IOERR), a disk that is full (SQLITE_FULL),
// a file that can no longer be written (SQLITE_READONLY: its permissions or
// its file system changed under the process), or a handle that was closed.
// A server answers such errors with 503 and Retry-After, not 500: each
// passes when the operator frees space or restores the file, and the write
// refused left nothing behind.
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
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR,
			sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY:
			return true
		}
	}
	return false
}
