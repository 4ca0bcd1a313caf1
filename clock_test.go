package oncepush_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/pushtest"
)

// clockUser is a fake provider that tells time.
type clockUser struct {
	*pushtest.Provider
	got []oncepush.Clock
}

func (p *clockUser) UseClock(c oncepush.Clock) { p.got = append(p.got, c) }

func TestClientClockReachesProviders(t *testing.T) {
	t.Parallel()
	drv := postgres.New(nil)
	clock := pushtest.NewClock(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	p := &clockUser{Provider: pushtest.NewProvider(oncepush.TransportFCM)}
	if _, err := oncepush.NewClient[pgx.Tx](drv, &oncepush.Config{Clock: clock, Providers: []oncepush.Provider{p}}); err != nil {
		t.Fatal(err)
	}
	if len(p.got) != 1 || p.got[0] != clock {
		t.Fatalf("the provider was given %v, want the client's clock", p.got)
	}
	q := &clockUser{Provider: pushtest.NewProvider(oncepush.TransportFCM)}
	if _, err := oncepush.NewClient[pgx.Tx](drv, &oncepush.Config{Providers: []oncepush.Provider{q}}); err != nil {
		t.Fatal(err)
	}
	if len(q.got) != 0 {
		t.Fatalf("a client on the database's clock handed its providers %v", q.got)
	}
}
