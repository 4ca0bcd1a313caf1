// A connection to PostgreSQL that stops answering without closing — a
// server that hangs, a path that vanished without a reset — shown through
// a proxy (internal/pgfault) that keeps the connection open and forwards
// nothing: what frees the client is its own bounds (BoundConnections, the
// listener's check), never the network.

package postgres_test

import (
	"context"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/internal/pgfault"
	"github.com/oncepush/oncepush/internal/testdb"
)

// silentHangGuard bounds each wait below: a hang guard, far past the bounds
// under test (10 s, 5 s, 1 s), not a measure of speed.
const silentHangGuard = 90 * time.Second

// proxiedPool is a pool bounded as the oncepush command bounds it, on a
// fresh schema reached through a proxy; direct reaches the schema without it.
func proxiedPool(t *testing.T) (p *pgfault.Proxy, pool *pgxpool.Pool, direct string) {
	t.Helper()
	direct = testdb.Schema(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	if p, err = pgfault.Start(u.Host); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	u.Host = p.Addr()
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		t.Fatal(err)
	}
	postgres.BoundConnections(cfg)
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return true } // pgxpool: after a second idle
	if pool, err = pgxpool.NewWithConfig(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return p, pool, direct
}

// TestSilentIdleConnectionIsReplaced: a connection of the pool goes silent
// while idle; the next statement is answered on another connection, within
// its deadline, rather than spending it on the dead one.
func TestSilentIdleConnectionIsReplaced(t *testing.T) {
	t.Parallel()
	p, pool, _ := proxiedPool(t)
	if _, err := pool.Exec(t.Context(), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if n := p.SilenceAll(); n != 1 {
		t.Fatalf("silenced %d connections, want the pool's one", n)
	}
	ctx, cancel := context.WithTimeout(t.Context(), silentHangGuard)
	defer cancel()
	if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatalf("a statement after the pool's connection went silent: %v", err)
	}
}

// TestSilentStartUpFreesItsSlot: the server never answers a new
// connection's start-up. The caller gives up at once; the pool's attempt
// ends too, freeing its slot, rather than waiting for good.
func TestSilentStartUpFreesItsSlot(t *testing.T) {
	t.Parallel()
	p, pool, _ := proxiedPool(t)
	p.SetSilent(true)
	start := time.Now()
	actx, cancel := context.WithCancel(t.Context())
	go func() { // the caller gives up once the pool is connecting
		for p.SilencedSince(start) == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if c, err := pool.Acquire(actx); err == nil {
		c.Release()
		t.Fatal("a connection was acquired through a silent proxy")
	}
	deadline := time.Now().Add(silentHangGuard)
	for pool.Stat().ConstructingConns() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the pool still connects %s after the start-up went unanswered: its slot is held for good", silentHangGuard)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSilentListenerReconnects: the wake-up listener's connection goes
// silent; the listener notices, connects again and hears the next
// notification.
func TestSilentListenerReconnects(t *testing.T) {
	t.Parallel()
	p, pool, direct := proxiedPool(t)
	drv := postgres.New(pool)
	if _, err := drv.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	postgres.SetListenCheck(drv, time.Second)
	var wakes atomic.Int64
	woken := make(chan struct{}, 100)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = drv.Listen(ctx, func() { wakes.Add(1); woken <- struct{}{} })
	}()
	defer func() { cancel(); <-done }()
	await := func(what string) {
		t.Helper()
		select {
		case <-woken:
		case <-time.After(silentHangGuard):
			t.Fatalf("no wake-up %s within %s", what, silentHangGuard)
		}
	}
	await("once listening")
	p.SilenceAll()
	// Notify from outside the proxy, until a wake-up comes: the listener's
	// own after it connects again, or the notification's.
	directDrv := postgres.New(testdb.Pool(t, direct, 2))
	deadline := time.Now().Add(silentHangGuard)
	for before := wakes.Load(); wakes.Load() == before; {
		if time.Now().After(deadline) {
			t.Fatalf("the listener heard nothing for %s after its connection went silent", silentHangGuard)
		}
		if err := directDrv.Notify(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
