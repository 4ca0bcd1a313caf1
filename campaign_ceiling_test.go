package oncepush

import (
	"slices"
	"testing"
	"time"

	"github.com/oncepush/oncepush/driver"
)

// TestWindowAt: a minute's windows allow exactly the ceiling between them,
// each at least the most one delivery can need, and each instant is in the
// window whose bounds hold it.
func TestWindowAt(t *testing.T) {
	for _, tc := range []struct{ perMinute, maxPer, wantK int }{
		{600000, 10, 60}, {600, 10, 60}, {120, 10, 12}, {90, 10, 9}, {10, 10, 1}, {7, 1, 7}, {61, 1, 60},
	} {
		sum, windows := 0, map[time.Time]bool{}
		for ms := 0; ms < 60000; ms += 250 {
			now := t0.Add(time.Duration(ms) * time.Millisecond)
			w := windowAt(now, tc.perMinute, tc.maxPer)
			if now.Before(w.start) || !now.Before(w.end) {
				t.Fatalf("ceiling %d: %s is not in its window [%s, %s)", tc.perMinute, now, w.start, w.end)
			}
			if w.allowance < tc.maxPer {
				t.Fatalf("ceiling %d: a window allows %d, below the %d one delivery may need", tc.perMinute, w.allowance, tc.maxPer)
			}
			if !windows[w.start] {
				windows[w.start] = true
				sum += w.allowance
			}
		}
		if len(windows) != tc.wantK || sum != tc.perMinute {
			t.Errorf("ceiling %d/min: %d windows allowing %d in all; want %d windows allowing the ceiling", tc.perMinute, len(windows), sum, tc.wantK)
		}
	}
}

// TestApplyCeilings: campaign deliveries are kept in claim order while their
// pairs fit the grant; the rest are put back, due when their window ends,
// attempts unchanged; transactional deliveries and transports without a
// ceiling are never held.
func TestApplyCeilings(t *testing.T) {
	mk := func(id int64, campaign bool, attempts int, trs ...Transport) *delivery {
		r := row(id, 1, "r", attempts)
		r.Campaign = campaign
		d := &delivery{row: r, attempts: attempts}
		for _, tr := range trs {
			d.pairs = append(d.pairs, &pair{d: d, dev: Device{Transport: tr}})
		}
		return d
	}
	ds := []*delivery{
		mk(1, true, 0, TransportFCM, TransportFCM),
		mk(2, false, 0, TransportFCM, TransportFCM, TransportFCM), // transactional: never held
		mk(3, true, 2, TransportFCM, TransportAPNs),               // needs 1 FCM: fits
		mk(4, true, 0, TransportFCM, TransportFCM),                // needs 2, 1 left: put back
		mk(5, true, 0, TransportAPNs),                             // no ceiling on APNs
		mk(6, true, 1, TransportFCM),                              // the 1 left: fits
		mk(7, true, 0, TransportFCM, TransportFCM, TransportFCM),  // none left: put back
	}
	p := &claimPlan{deliveries: ds}
	for _, d := range ds {
		p.pairs = append(p.pairs, d.pairs...)
	}
	ceilings := map[Transport]int{TransportFCM: 600}
	if asks := p.ceilingAsks(ceilings); asks[TransportFCM] != 9 || len(asks) != 1 {
		t.Fatalf("asks %v, want 9 FCM pairs of campaign deliveries", asks)
	}
	end := t0.Add(time.Second)
	deferred, until := p.applyCeilings(map[Transport]int{TransportFCM: 4}, map[Transport]ceilingWindow{TransportFCM: {start: t0, end: end, allowance: 10}})
	var kept []int64
	for _, d := range p.deliveries {
		kept = append(kept, d.row.ID)
	}
	if want := []int64{1, 2, 3, 5, 6}; !slices.Equal(kept, want) || len(p.pairs) != 9 {
		t.Fatalf("kept %v with %d pairs, want %v with 9", kept, len(p.pairs), want)
	}
	if deferred != 2 || !until.Equal(end) || len(p.updates) != 2 {
		t.Fatalf("deferred %d until %s, updates %+v; want deliveries 4 and 7 put back until %s", deferred, until, p.updates, end)
	}
	u := p.updates[0]
	if u.ID != 4 || u.Status != driver.StatusPending || u.Attempts != 0 || !u.NextAttemptAt.Equal(end) {
		t.Fatalf("update %+v, want delivery 4 pending, attempts 0, due %s", u, end)
	}
}

// TestApplyCeilingsNeverHoldsAnOversizedDelivery: a delivery that needs more
// than a whole window goes while anything of the grant is left.
func TestApplyCeilingsNeverHoldsAnOversizedDelivery(t *testing.T) {
	r := row(1, 1, "r", 0)
	r.Campaign = true
	d := &delivery{row: r}
	for range 4 {
		d.pairs = append(d.pairs, &pair{d: d, dev: Device{Transport: TransportFCM}})
	}
	windows := map[Transport]ceilingWindow{TransportFCM: {start: t0, end: t0.Add(time.Second), allowance: 3}}
	for left, wantKept := range map[int]bool{0: false, 1: true, 3: true} {
		p := &claimPlan{deliveries: []*delivery{d}, pairs: slices.Clone(d.pairs)}
		p.applyCeilings(map[Transport]int{TransportFCM: left}, windows)
		if kept := len(p.deliveries) == 1; kept != wantKept {
			t.Errorf("%d left of a window of 3, a delivery of 4 pairs: kept %v, want %v", left, kept, wantKept)
		}
	}
}
