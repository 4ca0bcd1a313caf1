package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgOutage gives a test a pool whose PostgreSQL it can take down the way a
// restart does, without touching the server other tests share: begin
// terminates this pool's backends (they answer FATAL 57P01
// admin_shutdown) and makes every new connection meet a server that is
// starting up (FATAL 57P03 cannot_connect_now); end lets connections through
// again.
type pgOutage struct {
	t       *testing.T
	pool    *pgxpool.Pool
	app     string // application_name of the pool's connections, and only theirs
	adminDB *pgx.ConnConfig
	down    atomic.Bool
}

// outagePoolConns bounds the pool's connections: after that many requests
// in an outage, every connection the outage killed has been found dead.
const outagePoolConns = 4

// outagePool opens a pool on connString whose outages the test controls.
func outagePool(t *testing.T, connString string) *pgOutage {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	o := &pgOutage{t: t, app: "oncepush_server_test_" + hex.EncodeToString(b[:])}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		t.Fatalf("pool config: %v", err)
	}
	cfg.MaxConns = outagePoolConns
	o.adminDB = cfg.ConnConfig.Copy()
	o.adminDB.RuntimeParams["application_name"] = o.app + "_admin"
	cfg.ConnConfig.RuntimeParams["application_name"] = o.app
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if o.down.Load() {
			return startingUp(), nil
		}
		return dial(ctx, network, addr)
	}
	if o.pool, err = pgxpool.NewWithConfig(context.Background(), cfg); err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(o.pool.Close)
	return o
}

// begin takes the database away from the pool: it returns once every backend
// of the pool has exited.
func (o *pgOutage) begin() {
	o.t.Helper()
	o.down.Store(true)
	ctx := context.WithoutCancel(o.t.Context())
	conn, err := pgx.ConnectConfig(ctx, o.adminDB)
	if err != nil {
		o.t.Fatalf("outage: connect: %v", err)
	}
	defer conn.Close(ctx)
	// With a timeout, pg_terminate_backend waits for the backend to exit
	// (false if it did not within the timeout, a bound that is never reached
	// on a healthy server).
	rows, err := conn.Query(ctx, `SELECT pg_terminate_backend(pid, 60000) FROM pg_stat_activity WHERE application_name = $1`, o.app)
	if err != nil {
		o.t.Fatalf("outage: terminate backends: %v", err)
	}
	gone, err := pgx.CollectRows(rows, pgx.RowTo[bool])
	if err != nil {
		o.t.Fatalf("outage: terminate backends: %v", err)
	}
	for _, ok := range gone {
		if !ok {
			o.t.Fatal("outage: a backend did not exit")
		}
	}
}

// end gives the database back; the pool forgets the connections the outage
// killed, as it would one by one on its own.
func (o *pgOutage) end() {
	o.down.Store(false)
	o.pool.Reset()
}

// startingUp is a connection to a server that answers the startup message as
// PostgreSQL does while it starts (or shuts down): FATAL 57P03.
func startingUp() net.Conn {
	client, server := net.Pipe()
	go func() {
		defer server.Close()
		be := pgproto3.NewBackend(server, server)
		if _, err := be.ReceiveStartupMessage(); err != nil {
			return
		}
		be.Send(&pgproto3.ErrorResponse{
			Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: pgerrcodeCannotConnectNow,
			Message: "the database system is starting up",
		})
		_ = be.Flush()
	}()
	return client
}

// pgerrcodeCannotConnectNow is SQLSTATE 57P03.
const pgerrcodeCannotConnectNow = "57P03"
