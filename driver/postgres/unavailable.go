package postgres

import (
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
)

// Unavailable reports whether err says the database cannot be reached right
// now, rather than that a statement failed: a connection that cannot be made
// (refused, reset, timed out, or refused by the server: 57P03
// cannot_connect_now while it starts or stops, 53300 too_many_connections),
// a connection the server ended (57P01 admin_shutdown, 57P02 crash_shutdown,
// class 08 connection exceptions, EOF mid-answer: a backend that PANICked,
// as one that cannot write its WAL on a full disk does), a server short of
// room or memory (53100 disk_full, 53000 insufficient_resources, 53200
// out_of_memory), or a pool that was closed.
// A server answers such errors with 503 and Retry-After, not 500: the same
// request may succeed once the database is back.
func (d *Driver) Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) || errors.Is(err, puddle.ErrClosedPool) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", "53000", "53100", "53200", "53300":
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08")
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}
