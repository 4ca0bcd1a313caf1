package pgfault

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush/internal/testdb"
)

// The proxy's faults, each shown to do what the scenario counts on against
// a real server: a COMMIT whose answer never arrives committed all the
// same, a reset that ends a statement the client waits on.

func TestIsCommit(t *testing.T) {
	for q, want := range map[string]bool{
		"commit\x00": true, " COMMIT; \x00": true, "end": true, "commit work": true,
		"begin\x00": false, "select 'commit'\x00": false, "commit_x\x00": false, "rollback\x00": false,
	} {
		if got := isCommit([]byte(q)); got != want {
			t.Errorf("isCommit(%q) = %v, want %v", q, got, want)
		}
	}
}

// proxyTest connects to a fresh schema through a proxy, and directly.
func proxyTest(t *testing.T) (p *Proxy, via, direct *pgx.Conn) {
	t.Helper()
	dsn := testdb.Schema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p, err = Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	u.Host = p.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if direct, err = pgx.Connect(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close(context.Background()) })
	if via, err = pgx.Connect(ctx, u.String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = via.Close(context.Background()) })
	if _, err := direct.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
		t.Fatal(err)
	}
	return p, via, direct
}

func count(t *testing.T, c *pgx.Conn) int {
	t.Helper()
	var n int
	if err := c.QueryRow(context.Background(), "SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestProxyCommitAnswerLost(t *testing.T) {
	for _, hold := range []bool{false, true} {
		t.Run(map[bool]string{false: "reset", true: "held"}[hold], func(t *testing.T) {
			p, via, direct := proxyTest(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard
			defer cancel()
			trap := p.ArmCommit(hold)
			tx, err := via.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil {
				t.Fatal(err)
			}
			cctx, stop := context.WithCancel(ctx)
			go func() { // a held COMMIT is answered never: the client gives up
				<-trap.Fired()
				if hold {
					stop()
				}
			}()
			err = tx.Commit(cctx)
			stop()
			if err == nil {
				t.Fatal("COMMIT answered through a trapped connection")
			}
			// Committed all the same: the server had it, the client cannot know.
			for count(t, direct) != 1 {
				if ctx.Err() != nil {
					t.Fatal("the trapped COMMIT never committed")
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

func TestProxyResetMidStatement(t *testing.T) {
	p, via, _ := proxyTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := via.Exec(ctx, "SELECT pg_sleep(600)")
		done <- err
	}()
	for !p.Busy() { // awaited: the proxy sees the statement under way
		time.Sleep(time.Millisecond)
	}
	if n := p.ResetMidStatement(); n != 1 {
		t.Fatalf("reset %d connections, want the one inside a statement", n)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the statement succeeded through a reset connection")
		}
	case <-ctx.Done():
		t.Fatal("the client did not see the reset")
	}
}

// TestHeldLongerTellsWaitingFromIdle: a silent connection the client sent
// on is waited on; one it did not touch is idle; one the client closed is
// neither.
func TestHeldLongerTellsWaitingFromIdle(t *testing.T) {
	p, via, _ := proxyTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard
	defer cancel()
	if n := p.SilenceAll(); n != 1 {
		t.Fatalf("silenced %d connections, want 1", n)
	}
	if waiting, idle := p.HeldLonger(0); len(waiting) != 0 || idle != 1 {
		t.Fatalf("before a send: waiting %v, idle %d; want none, 1", waiting, idle)
	}
	qctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := via.Exec(qctx, "SELECT 1"); done <- err }()
	for { // awaited: the proxy has the query
		if waiting, _ := p.HeldLonger(0); len(waiting) == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	stop() // the client gives up: pgx closes the connection
	if err := <-done; err == nil {
		t.Fatal("a query was answered through a silent connection")
	}
	for { // awaited: pgx's close reaches the proxy (within its 15 s drain)
		waiting, idle := p.HeldLonger(0)
		if len(waiting) == 0 && idle == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the closed connection is still held: waiting %v, idle %d", waiting, idle)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
