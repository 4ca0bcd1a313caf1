//go:build unix

package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/oncepush/oncepush/internal/pgfault"
)

// Faults on the connections between the workers and PostgreSQL, injected by
// a pgProxy in front of the database (the API and the harness reach it
// directly). Every kind can leave a statement's outcome unknown to the
// worker that sent it, so every kind can explain a submission the provider
// never received (a mark that committed unbeknown to its run).
const (
	faultNetReset     = "net-reset"     // every connection inside a statement reset (RST)
	faultNetCommit    = "net-commit"    // a COMMIT forwarded, its answer dropped; the connection reset or held
	faultNetLatency   = "net-latency"   // every message delayed, some past the engine's 30 s statement bounds
	faultNetBlackhole = "net-blackhole" // every connection, and those opened meanwhile, silent for good
	faultNetBandwidth = "net-bandwidth" // every connection slowed to a few KB/s
)

// netKinds are the connection faults, in the order the summary prints them.
var netKinds = []string{faultNetReset, faultNetCommit, faultNetLatency, faultNetBlackhole, faultNetBandwidth}

// The schedule: a reset or a COMMIT trap every netPointEvery, by turns, and
// a window fault (latency, black hole, bandwidth, by turns) every
// netWindowEvery.
const (
	netPointEvery  = time.Second
	netWindowEvery = 10 * time.Second
	// netLatency is a spike's delay; every netLongEvery-th spike lasts
	// netLatencyLong instead, past the engine's 30 s bound on a claim, a
	// mark and a record try.
	netLatency     = 3 * time.Second
	netLatencyLong = 35 * time.Second
	netLongEvery   = 4
	netWindow      = 3 * time.Second // how long a latency, black hole or bandwidth window lasts
	netBandwidth   = 8 << 10         // bytes per second per connection and direction
	// holeRelease is how long after its black hole the proxy closes the
	// server side of a black-holed connection (its client is told
	// nothing), so that PostgreSQL's backends do not pile up.
	holeRelease = time.Minute
	// commitWait bounds the wait for a COMMIT to take an armed trap.
	commitWait = 10 * time.Second
)

// netState is what the net faults measured.
type netState struct {
	mu sync.Mutex
	// resumed holds, per black hole, the time from its end to the next
	// request the providers received.
	resumed []time.Duration
	reset   int // connections reset, over all resets
	holed   int // connections black-holed
	// stillWaiting and stillIdle count, once every delivery is final, the
	// black-holed connections a client still held: one it sent something
	// on holeRelease ago or more (it has waited that long: a hang, since
	// a statement's bound is 30 s and pgx's close of a dead connection
	// 15 s), or one silent that long and unused since (idle in a pool, to
	// be pinged and replaced when next used).
	stillWaiting, stillIdle int
}

// proxied starts a proxy in front of the database at database (a URL) and
// returns the URL through it.
func proxied(database string) (*pgfault.Proxy, string, error) {
	u, err := url.Parse(database)
	if err != nil {
		return nil, "", err
	}
	p, err := pgfault.Start(u.Host)
	if err != nil {
		return nil, "", err
	}
	u.Host = p.Addr()
	return p, u.String(), nil
}

// runNetFaults injects connection faults until ctx ends.
func (inj *injector) runNetFaults(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() { // the window faults
		defer wg.Done()
		for i := 0; ; i++ {
			if err := sleep(ctx, netWindowEvery); err != nil {
				return
			}
			switch i % 3 {
			case 0:
				inj.netLatency(ctx, i/3)
			case 1:
				inj.netBlackhole(ctx)
			case 2:
				inj.netBandwidth(ctx)
			}
			inj.proxy.Release(holeRelease)
		}
	}()
	for i := 0; ; i++ {
		if err := sleep(ctx, netPointEvery); err != nil {
			return nil
		}
		if i%2 == 0 {
			n := inj.proxy.ResetMidStatement()
			inj.netMu().reset += n
			inj.unlockNet()
			inj.record(Fault{Kind: faultNetReset, At: time.Now(), Target: "proxy", Held: map[string]int{"connections": n}})
			continue
		}
		inj.netCommit(ctx, i%4 == 3)
	}
}

// netMu locks and returns the net state (unlockNet unlocks it).
func (inj *injector) netMu() *netState { inj.net.mu.Lock(); return inj.net }
func (inj *injector) unlockNet()       { inj.net.mu.Unlock() }

// netCommit arms a COMMIT trap and waits until a COMMIT takes it.
func (inj *injector) netCommit(ctx context.Context, hold bool) {
	t := inj.proxy.ArmCommit(hold)
	select {
	case <-t.Fired():
	case <-time.After(commitWait):
		if inj.proxy.Disarm(t) {
			return // no COMMIT came
		}
		<-t.Fired() // taken meanwhile
	case <-ctx.Done():
		if inj.proxy.Disarm(t) {
			return
		}
		<-t.Fired()
	}
	what := "COMMIT answer dropped, connection reset"
	if hold {
		what = "COMMIT answer dropped, connection silent"
	}
	inj.record(Fault{Kind: faultNetCommit, At: t.At(), Target: what})
}

// netLatency delays every message by netLatency (every netLongEvery-th
// time netLatencyLong) for netWindow.
func (inj *injector) netLatency(ctx context.Context, i int) {
	d := netLatency
	if i%netLongEvery == netLongEvery-1 {
		d = netLatencyLong
	}
	start := time.Now()
	inj.proxy.SetLatency(d)
	_ = sleep(ctx, netWindow)
	inj.proxy.SetLatency(0)
	// A message read at the end of the window arrives d later.
	inj.record(Fault{Kind: faultNetLatency, At: start, Until: time.Now().Add(d), Target: fmt.Sprintf("proxy, +%s", d)})
}

// netBandwidth limits every connection to netBandwidth for netWindow.
func (inj *injector) netBandwidth(ctx context.Context) {
	start := time.Now()
	inj.proxy.SetRate(netBandwidth)
	_ = sleep(ctx, netWindow)
	inj.proxy.SetRate(0)
	inj.record(Fault{Kind: faultNetBandwidth, At: start, Until: time.Now().Add(netWindow), Target: fmt.Sprintf("proxy, %d B/s", netBandwidth)})
}

// netBlackhole makes every connection open now, and every one opened within
// netWindow, silent for good: nothing forwarded either way, nothing closed.
// Then it measures how long the providers wait for their next request, and,
// holeRelease later, how many of those connections their clients still
// hold (a client that never gives up a silent connection hangs on it).
func (inj *injector) netBlackhole(ctx context.Context) {
	start := time.Now()
	inj.proxy.SetSilent(true)
	holed := inj.proxy.SilenceAll()
	_ = sleep(ctx, netWindow)
	inj.proxy.SetSilent(false)
	end := time.Now()
	conns := inj.proxy.SilencedSince(start)
	inj.record(Fault{Kind: faultNetBlackhole, At: start, Until: end, Target: "proxy",
		Held: map[string]int{"connections open": holed, "connections": conns}})
	inj.netMu().holed += conns
	inj.unlockNet()

	before, err := inj.fake.stats(ctx)
	if err == nil {
		for deadline := end.Add(2 * time.Minute); time.Now().Before(deadline); {
			st, err := inj.fake.stats(ctx)
			if err != nil || st.Received > before.Received {
				inj.netMu().resumed = append(inj.net.resumed, time.Since(end))
				inj.unlockNet()
				break
			}
			if sleep(ctx, 50*time.Millisecond) != nil {
				break
			}
		}
	}
}

// netSummary is the net phase's line for the summary.
func (s *netState) summary(faults []Fault) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	counts := map[string]int{}
	for _, f := range faults {
		counts[f.Kind]++
	}
	var parts []string
	for _, k := range netKinds {
		parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
	}
	var worst time.Duration
	for _, d := range s.resumed {
		worst = max(worst, d)
	}
	return fmt.Sprintf("connection faults: %s; %d connections reset, %d black-holed; sends resumed at most %s after a black hole (%d measured); black-holed connections a client waited on for %s or more: %d (%d idle since)",
		strings.Join(parts, ", "), s.reset, s.holed, worst.Round(10*time.Millisecond), len(s.resumed), holeRelease, s.stillWaiting, s.stillIdle)
}
