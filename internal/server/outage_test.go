package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgOutage gives a test a pool whose PostgreSQL it can take down the way a
// restart does, without touching the server other tests share: begin
// terminates this pool's backends (they answer FATAL 57P01
// admin_shutdown) and makes every new connection meet a server that is
// starting up (FATAL 57P03 cannot_connect_now); end lets connections through
// again.
//
// The pool never pings a connection before handing it out (pgxpool does,
// after a second idle), so the connections the outage killed are met by
// the requests that follow, whatever the time between; and a connection
// whose handshake ends during the outage is refused like a new one, so
// that a dial begun just before begin — the engine's wake-up NOTIFY runs
// on the pool in a goroutine of its own after a send — cannot slip a live
// connection past it.
type pgOutage struct {
	t       *testing.T
	pool    *pgxpool.Pool
	app     string // application_name of the pool's connections, and only theirs
	adminDB *pgx.ConnConfig
	down    atomic.Bool
	// killed is how many backends the last begin terminated.
	killed int
	// met counts the statements that failed during an outage: on the
	// pool's connections, which the outage killed (none is made during
	// one), so each is a caller meeting what a restart leaves behind.
	met atomic.Int32
}

// outageTracer counts in met the statements and batches that fail during
// an outage. A ping is no statement: the pool's pings, were they on, would
// find the dead connections without a caller meeting them.
type outageTracer struct{ o *pgOutage }

func (tr outageTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (tr outageTracer) TraceQueryEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	tr.failed(d.Err)
}

func (tr outageTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (tr outageTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (tr outageTracer) TraceBatchEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchEndData) {
	tr.failed(d.Err)
}

func (tr outageTracer) failed(err error) {
	if err != nil && tr.o.down.Load() {
		tr.o.met.Add(1)
	}
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
	cfg.AfterConnect = func(context.Context, *pgx.Conn) error {
		if o.down.Load() {
			return &pgconn.PgError{Severity: "FATAL", Code: pgerrcodeCannotConnectNow, Message: "the database system is starting up"}
		}
		return nil
	}
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	cfg.ConnConfig.Tracer = outageTracer{o}
	if o.pool, err = pgxpool.NewWithConfig(context.Background(), cfg); err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(o.pool.Close)
	return o
}

// begin takes the database away from the pool: it returns once every backend
// of the pool has exited, and says how many it terminated (killed).
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
	// on a healthy server, or if the backend had exited by itself — a
	// connection the pool closed — between the two reads).
	type backend struct {
		Pid   int32
		Gone  bool
		State *string
	}
	rows, err := conn.Query(ctx, `SELECT pid, pg_terminate_backend(pid, 60000), state FROM pg_stat_activity WHERE application_name = $1`, o.app)
	if err != nil {
		o.t.Fatalf("outage: terminate backends: %v", err)
	}
	backends, err := pgx.CollectRows(rows, pgx.RowToStructByPos[backend])
	if err != nil {
		o.t.Fatalf("outage: terminate backends: %v", err)
	}
	o.killed = 0
	o.met.Store(0)
	for _, b := range backends {
		if b.Gone {
			o.killed++
		}
	}
	var left []string
	rows, err = conn.Query(ctx, `SELECT format('pid %s, %s since %s: %s', pid, state, state_change, left(query, 80)) FROM pg_stat_activity WHERE application_name = $1`, o.app)
	if err == nil {
		left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || len(left) > 0 {
		o.t.Fatalf("outage: backends of the pool still there after terminating %+v: %q (%v)", backends, left, err)
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
