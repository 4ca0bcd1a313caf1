package oncepush_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/pushtest"
)

func TestConfigRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	drv := postgres.New(nil) // NewClient does not touch the database
	fcm := pushtest.NewProvider(oncepush.TransportFCM)
	for name, cfg := range map[string]*oncepush.Config{
		"negative batch":           {BatchSize: -1},
		"huge batch":               {BatchSize: 20000},
		"lease too short":          {RunBudget: 10 * time.Second, SendTimeout: 15 * time.Second, Lease: 20 * time.Second},
		"backoff upside down":      {BackoffMin: time.Hour, BackoffMax: time.Minute},
		"unknown policy":           {Ambiguity: "twice"},
		"bad category policy":      {Categories: map[string]oncepush.Category{"news": {Ambiguity: "never"}}},
		"two fcm providers":        {Providers: []oncepush.Provider{fcm, fcm}},
		"nil provider":             {Providers: []oncepush.Provider{nil}},
		"unknown transport":        {Providers: []oncepush.Provider{pushtest.NewProvider("hms")}},
		"lifetime beyond ttl":      {MessageLifetime: 30 * 24 * time.Hour},
		"negative poll":            {PollInterval: -time.Second},
		"negative concurrency":     {ConcurrentSends: -5},
		"nil deleter":              {RecipientDeleters: []oncepush.RecipientDeleter{nil}},
		"ceiling, no transport":    {CampaignCeilings: map[oncepush.Transport]int{"pigeon": 1000}},
		"ceiling below a delivery": {CampaignCeilings: map[oncepush.Transport]int{oncepush.TransportFCM: 9}},
		"ceiling of nothing":       {CampaignCeilings: map[oncepush.Transport]int{oncepush.TransportFCM: 0}},
	} {
		if _, err := oncepush.NewClient[pgx.Tx](drv, cfg); err == nil {
			t.Errorf("%s: NewClient accepted it", name)
		}
	}
	c, err := oncepush.NewClient[pgx.Tx](drv, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Config()
	if got.BatchSize != oncepush.BatchSizeDefault || got.Lease != oncepush.RunBudgetDefault+2*oncepush.SendTimeoutDefault+time.Minute ||
		got.Ambiguity != oncepush.AmbiguityResend || got.MaxAttempts != 6 || got.ConcurrentSends != 256 {
		t.Fatalf("defaults not applied: %+v", got)
	}
}

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
