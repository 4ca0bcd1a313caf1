//go:build unix

package main

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// The checker's rules, each shown to catch the violation it is for on a
// small hand-made provider record and ledger.

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// at is t0 plus ms milliseconds.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// world builds a checker input: notifications, their deliveries and pairs,
// and the provider's receipts.
type world struct {
	in  Input
	seq int64
}

func newWorld() *world {
	return &world{in: Input{Limits: Limits{InFlight: 4, AllInFlight: 8, SendTimeout: 2 * time.Second, Lease: 6 * time.Second, Workers: 2, Chaos: 10 * time.Second}}}
}

// notify adds an acknowledged notification and one final delivery ("sent")
// per recipient, without pairs; it returns the deliveries' ids.
func (w *world) notify(key, policy string, recipients ...string) []int64 {
	id := int64(len(w.in.Notifications) + 1)
	w.in.Notifications = append(w.in.Notifications, Notification{Key: key, Policy: policy, Recipients: recipients, Posts: 1, Acked: true, IDs: []int64{id}})
	var ids []int64
	for _, r := range recipients {
		d := Delivery{ID: int64(len(w.in.Deliveries) + 1), MessageID: id, Recipient: r, OncepushID: oncepushID(key, r), DedupeKey: key, Status: "sent"}
		w.in.Deliveries = append(w.in.Deliveries, d)
		ids = append(ids, d.ID)
	}
	return ids
}

func oncepushID(key, recipient string) string { return key + "/" + recipient }

// pair adds the ledger row of delivery d's FCM device tok.
func (w *world) pair(d int64, tok, state string, submissions, ambiguous int, first, last, updated time.Time) *Pair {
	w.in.Pairs = append(w.in.Pairs, Pair{DeliveryID: d, Transport: "fcm", Token: tok, State: state, Submissions: submissions,
		Ambiguous: ambiguous, FirstSentAt: first, LastSentAt: last, UpdatedAt: updated})
	return &w.in.Pairs[len(w.in.Pairs)-1]
}

// receipt adds a request the provider read for delivery d's FCM device tok.
func (w *world) receipt(d int64, tok, fate string, status int, received time.Time) *Receipt {
	del := w.in.Deliveries[d-1]
	w.seq++
	w.in.Receipts = append(w.in.Receipts, Receipt{Seq: w.seq, Transport: "fcm", Token: tok, CollapseID: "c-" + del.OncepushID,
		NotificationID: del.OncepushID, Status: status, Fate: fate, ReceivedAt: received, At: received.Add(10 * time.Millisecond)})
	return &w.in.Receipts[len(w.in.Receipts)-1]
}

// sentOnce adds a notification to one recipient whose one device was sent
// once, accepted and recorded 300 ms after the provider read it.
func (w *world) sentOnce(key, policy string) int64 {
	d := w.notify(key, policy, "u_"+key)[0]
	w.pair(d, "tok-"+key, "accepted", 1, 0, at(0), at(0), at(310))
	w.receipt(d, "tok-"+key, fateAnswered, 200, at(10))
	return d
}

func (w *world) fault(kind string, atMs int) {
	w.in.Faults = append(w.in.Faults, Fault{Kind: kind, At: at(atMs), Target: fmt.Sprintf("%s at %d", kind, atMs)})
}

// kinds counts the result's violations by kind.
func kinds(r *Result) map[string]int {
	m := map[string]int{}
	for _, v := range r.Violations {
		m[v.Kind]++
	}
	return m
}

func rowOf(t *testing.T, r *Result, policy string) *Row {
	t.Helper()
	for _, row := range r.Rows {
		if row.Policy == policy {
			return row
		}
	}
	t.Fatalf("no row for policy %q in %+v", policy, r.Rows)
	return nil
}

// expect fails unless the violations are exactly want (kind → count).
func expect(t *testing.T, r *Result, want map[string]int) {
	t.Helper()
	got := kinds(r)
	if len(want) == 0 && len(got) == 0 {
		return
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("violations %v, want %v; details:", got, want)
		for _, v := range r.Violations {
			t.Logf("  %s: %s", v.Kind, v.Detail)
		}
	}
}

func TestCheckCleanRun(t *testing.T) {
	w := newWorld()
	w.sentOnce("a", "resend")
	w.sentOnce("b", "at-most-once")
	// A retry after a definite refusal is not a duplicate.
	d := w.notify("c", "resend", "u_c")[0]
	w.pair(d, "tok-c", "accepted", 2, 0, at(0), at(2000), at(2400))
	w.receipt(d, "tok-c", fateAnswered, 503, at(10))
	w.receipt(d, "tok-c", fateAnswered, 200, at(2010))
	// A dead token: answered invalid, recorded, nothing accepted.
	d = w.notify("e", "at-most-once", "u_e")[0]
	w.pair(d, "tok-e", "invalid", 1, 0, at(0), at(0), at(100))
	w.receipt(d, "tok-e", fateAnswered, 404, at(10))
	w.in.Deliveries[d-1].Status = "failed"

	r := Check(w.in)
	expect(t, r, nil)
	resend, amo := rowOf(t, r, "resend"), rowOf(t, r, "at-most-once")
	if resend.Attempted != 2 || resend.Acknowledged != 2 || resend.Pairs != 2 || resend.OK != 2 || amo.OK != 2 {
		t.Errorf("rows %+v %+v, want 2 attempted, acknowledged and ok pairs each", resend, amo)
	}
	if r.Submissions != 5 || r.Received != 5 || r.NeverReceived != 0 {
		t.Errorf("submissions %d, received %d, never received %d; want 5, 5, 0", r.Submissions, r.Received, r.NeverReceived)
	}
	if want := []time.Duration{90 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond, 390 * time.Millisecond}; !slices.Equal(r.Window, want) {
		t.Errorf("window %v, want %v", r.Window, want)
	}
}

func TestCheckLost(t *testing.T) {
	t.Run("recorded sent, never accepted by the provider", func(t *testing.T) {
		w := newWorld()
		d := w.notify("a", "resend", "u_a")[0]
		w.pair(d, "tok-a", "accepted", 1, 0, at(0), at(0), at(100))
		w.receipt(d, "tok-a", fateAnswered, 503, at(10))
		r := Check(w.in)
		expect(t, r, map[string]int{vLostPair: 1})
		if row := rowOf(t, r, "resend"); row.Lost != 1 || row.OK != 0 {
			t.Errorf("row %+v, want 1 lost, 0 ok", row)
		}
	})
	t.Run("recorded sent, provider has no request at all", func(t *testing.T) {
		w := newWorld()
		d := w.notify("a", "at-most-once", "u_a")[0]
		w.pair(d, "tok-a", "accepted", 0, 0, time.Time{}, time.Time{}, at(100))
		expect(t, Check(w.in), map[string]int{vLostPair: 1})
	})
	t.Run("delivery still pending", func(t *testing.T) {
		w := newWorld()
		d := w.sentOnce("a", "resend")
		w.in.Deliveries[d-1].Status = "pending"
		r := Check(w.in)
		expect(t, r, map[string]int{vNotFinal: 1})
		if row := rowOf(t, r, "resend"); row.Lost != 1 {
			t.Errorf("row %+v, want 1 lost", row)
		}
	})
	t.Run("final delivery with a pair never settled", func(t *testing.T) {
		w := newWorld()
		d := w.sentOnce("a", "resend")
		w.pair(d, "tok-a2", "sending", 1, 0, at(0), at(0), at(0))
		w.receipt(d, "tok-a2", fateAnswered, 200, at(10))
		expect(t, Check(w.in), map[string]int{vNotFinal: 1})
	})
	t.Run("final delivery with a pair whose device was deleted meanwhile", func(t *testing.T) {
		w := newWorld()
		d := w.sentOnce("a", "resend")
		w.pair(d, "tok-dead", "pending", 0, 0, time.Time{}, time.Time{}, at(0)).DeviceGone = true
		r := Check(w.in)
		expect(t, r, nil)
		if r.UnsettledGone != 1 {
			t.Errorf("unsettled pairs of deleted devices %d, want 1", r.UnsettledGone)
		}
	})
	t.Run("acknowledged, no delivery", func(t *testing.T) {
		w := newWorld()
		w.sentOnce("a", "resend")
		w.in.Notifications[0].Recipients = append(w.in.Notifications[0].Recipients, "u_forgotten")
		r := Check(w.in)
		expect(t, r, map[string]int{vMissing: 1})
		if row := rowOf(t, r, "resend"); row.Lost != 1 {
			t.Errorf("row %+v, want 1 lost", row)
		}
	})
	t.Run("never acknowledged", func(t *testing.T) {
		w := newWorld()
		w.sentOnce("a", "resend")
		w.in.Notifications[0].Acked, w.in.Notifications[0].IDs = false, nil
		expect(t, Check(w.in), map[string]int{vNotAcknowledged: 1})
	})
}

func TestCheckDuplicates(t *testing.T) {
	// Each case: one pair's provider requests and ledger counts.
	type rq struct {
		fate   string
		status int
		ms     int
	}
	cases := []struct {
		name        string
		policy      string
		state       string
		subs, amb   int
		reqs        []rq
		want        map[string]int
		marked, unm int
	}{
		{"at-most-once accepted twice", "at-most-once", "accepted", 2, 1,
			[]rq{{fateAnswered, 200, 10}, {fateAnswered, 200, 7000}}, map[string]int{vDuplicated: 1}, 0, 1},
		{"at-most-once reset then accepted", "at-most-once", "accepted", 2, 1,
			[]rq{{fateDropped, 0, 10}, {fateAnswered, 200, 7000}}, map[string]int{vDuplicated: 1}, 0, 1},
		{"resend after a lost answer, marked", "resend", "accepted", 2, 1,
			[]rq{{fateAbandoned, 0, 10}, {fateAnswered, 200, 7000}}, nil, 1, 0},
		{"resend twice accepted, no mark", "resend", "accepted", 2, 0,
			[]rq{{fateAnswered, 200, 10}, {fateAnswered, 200, 7000}}, map[string]int{vUnmarked: 1}, 0, 1},
		{"resend three times, one mark", "resend", "accepted", 3, 1,
			[]rq{{fateDropped, 0, 10}, {fateDropped, 0, 3000}, {fateAnswered, 200, 7000}}, map[string]int{vUnmarked: 1}, 0, 1},
		{"resend three times, two marks", "resend", "accepted", 3, 2,
			[]rq{{fateDropped, 0, 10}, {fateDropped, 0, 3000}, {fateAnswered, 200, 7000}}, nil, 1, 0},
		{"retry after 503 is no duplicate", "resend", "accepted", 2, 0,
			[]rq{{fateAnswered, 503, 10}, {fateAnswered, 200, 7000}}, nil, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld()
			d := w.notify("a", c.policy, "u_a")[0]
			last := at(c.reqs[len(c.reqs)-1].ms - 10)
			w.pair(d, "tok", c.state, c.subs, c.amb, at(0), last, last.Add(time.Second))
			for _, q := range c.reqs {
				w.receipt(d, "tok", q.fate, q.status, at(q.ms))
			}
			r := Check(w.in)
			expect(t, r, c.want)
			if row := rowOf(t, r, c.policy); row.DupMarked != c.marked || row.DupUnmarked != c.unm {
				t.Errorf("dup marked %d, unmarked %d; want %d, %d", row.DupMarked, row.DupUnmarked, c.marked, c.unm)
			}
		})
	}
	t.Run("resend changed identity", func(t *testing.T) {
		w := newWorld()
		d := w.notify("a", "resend", "u_a")[0]
		w.pair(d, "tok", "accepted", 2, 1, at(0), at(7000), at(7500))
		w.receipt(d, "tok", fateAbandoned, 0, at(10))
		w.receipt(d, "tok", fateAnswered, 200, at(7010)).CollapseID = "another"
		expect(t, Check(w.in), map[string]int{vIdentity: 1})
	})
	t.Run("apns-id changed", func(t *testing.T) {
		w := newWorld()
		d := w.notify("a", "resend", "u_a")[0]
		w.pair(d, "tok", "accepted", 2, 1, at(0), at(7000), at(7500))
		w.receipt(d, "tok", fateAbandoned, 0, at(10)).APNsID = "0f6c2c1e-0000-5000-8000-000000000001"
		w.receipt(d, "tok", fateAnswered, 200, at(7010)).APNsID = "0f6c2c1e-0000-5000-8000-000000000002"
		expect(t, Check(w.in), map[string]int{vIdentity: 1})
	})
	t.Run("where a duplicate came from", func(t *testing.T) {
		w := newWorld()
		// Answered success, the worker killed before its record: a fault.
		d := w.notify("a", "resend", "u_a")[0]
		w.pair(d, "tok", "accepted", 2, 1, at(0), at(7000), at(7500))
		w.receipt(d, "tok", fateAnswered, 200, at(10))
		w.receipt(d, "tok", fateAnswered, 200, at(7010))
		// Reset by the fake: its own answer.
		d = w.notify("b", "resend", "u_b")[0]
		w.pair(d, "tok", "accepted", 2, 1, at(0), at(500), at(900))
		w.receipt(d, "tok", fateDropped, 0, at(10))
		w.receipt(d, "tok", fateAnswered, 200, at(510))
		r := Check(w.in)
		expect(t, r, nil)
		if r.FaultDuplicates != 1 || r.AnswerDuplicates != 1 || r.FaultAmbiguous != 1 {
			t.Errorf("fault duplicates %d, answer duplicates %d, fault ambiguous %d; want 1, 1, 1", r.FaultDuplicates, r.AnswerDuplicates, r.FaultAmbiguous)
		}
	})
}

func TestCheckUnexpected(t *testing.T) {
	t.Run("a request no pair explains", func(t *testing.T) {
		w := newWorld()
		w.sentOnce("a", "resend")
		w.seq++
		w.in.Receipts = append(w.in.Receipts, Receipt{Seq: w.seq, Transport: "apns", Token: "ffff", NotificationID: "nobody's", Fate: fateAnswered, Status: 200, ReceivedAt: at(50)})
		r := Check(w.in)
		expect(t, r, map[string]int{vUnexpected: 1})
		if row := rowOf(t, r, "?"); row.Unexpected != 1 {
			t.Errorf("row %+v, want 1 unexpected", row)
		}
	})
	t.Run("the right notification to a device it was not for", func(t *testing.T) {
		w := newWorld()
		d := w.sentOnce("a", "resend")
		w.receipt(d, "tok-someone-else", fateAnswered, 200, at(20))
		expect(t, Check(w.in), map[string]int{vUnexpected: 1})
	})
	t.Run("a delivery nobody asked for", func(t *testing.T) {
		w := newWorld()
		w.sentOnce("a", "resend")
		w.in.Deliveries = append(w.in.Deliveries, Delivery{ID: 99, MessageID: 42, Recipient: "u_x", OncepushID: "x", DedupeKey: "never-posted", Status: "sent"})
		expect(t, Check(w.in), map[string]int{vUnexpected: 1})
	})
}

func TestCheckDedup(t *testing.T) {
	t.Run("one key answered with two notifications", func(t *testing.T) {
		w := newWorld()
		w.sentOnce("a", "resend")
		w.in.Notifications[0].IDs = []int64{1, 2}
		expect(t, Check(w.in), map[string]int{vDedup: 1})
	})
	t.Run("two deliveries of one key to one recipient", func(t *testing.T) {
		w := newWorld()
		w.sentOnce("a", "resend")
		extra := w.in.Deliveries[0]
		extra.ID = 2
		w.in.Deliveries = append(w.in.Deliveries, extra)
		expect(t, Check(w.in), map[string]int{vDedup: 1})
	})
	t.Run("a delivery of another notification than the one answered", func(t *testing.T) {
		w := newWorld()
		w.sentOnce("a", "resend")
		w.in.Deliveries[0].MessageID = 7
		expect(t, Check(w.in), map[string]int{vDedup: 1})
	})
	t.Run("the same body refused under its key", func(t *testing.T) {
		w := newWorld()
		w.sentOnce("a", "resend")
		w.in.Notifications[0].Conflicts = 1
		expect(t, Check(w.in), map[string]int{vConflict: 1})
	})
}

func TestCheckSubmissions(t *testing.T) {
	// neverReceived adds an at-most-once pair marked at markMs whose request
	// never reached the provider.
	neverReceived := func(w *world, key string, markMs, ambiguous int) {
		d := w.notify(key, "at-most-once", "u_"+key)[0]
		w.in.Deliveries[d-1].Status = "ambiguous"
		w.pair(d, "tok-"+key, "ambiguous", 1, ambiguous, at(markMs), at(markMs), at(markMs+6000))
	}
	t.Run("more requests than submissions counted", func(t *testing.T) {
		w := newWorld()
		d := w.sentOnce("a", "resend")
		w.receipt(d, "tok-a", fateAnswered, 200, at(20))
		expect(t, Check(w.in), map[string]int{vUncounted: 1, vUnmarked: 1})
	})
	t.Run("never received, marked ambiguous, killed in flight", func(t *testing.T) {
		w := newWorld()
		neverReceived(w, "a", 1000, 1)
		w.fault(faultKill, 1100)
		r := Check(w.in)
		expect(t, r, nil)
		if r.NeverReceived != 1 || len(r.PerFault) != 1 || r.PerFault[0].NeverReceived["fcm"] != 1 {
			t.Errorf("never received %d, per fault %+v; want 1, at the kill", r.NeverReceived, r.PerFault)
		}
		if row := rowOf(t, r, "at-most-once"); row.NeverReceived != 1 || row.Ambiguous != 1 || row.OK != 1 {
			t.Errorf("row %+v, want 1 never received, ambiguous, ok", row)
		}
	})
	t.Run("never received, not marked ambiguous", func(t *testing.T) {
		w := newWorld()
		neverReceived(w, "a", 1000, 0)
		w.fault(faultKill, 1100)
		expect(t, Check(w.in), map[string]int{vNeverUnmarked: 1})
	})
	t.Run("never received, no fault", func(t *testing.T) {
		w := newWorld()
		neverReceived(w, "a", 1000, 1)
		w.fault(faultKill, -500)    // before the mark
		w.fault(faultKill, 9000)    // past the lease: the run would have recorded by then
		w.fault(faultAPIKill, 1100) // the API sends nothing
		expect(t, Check(w.in), map[string]int{vUnattributed: 1})
	})
	t.Run("a stop and a PostgreSQL restart explain it too", func(t *testing.T) {
		w := newWorld()
		neverReceived(w, "a", 1000, 1)
		neverReceived(w, "b", 9000, 1)
		w.fault(faultStop, 1050)
		w.fault(faultPGRestart, 9010)
		r := Check(w.in)
		expect(t, r, nil)
		if len(r.PerFault) != 2 {
			t.Errorf("per fault %+v, want the stop and the restart", r.PerFault)
		}
	})
	t.Run("more never received than can be in flight", func(t *testing.T) {
		w := newWorld()
		for i := range 5 { // InFlight is 4
			neverReceived(w, fmt.Sprint("k", i), 1000+i, 1)
		}
		w.fault(faultKill, 1100)
		expect(t, Check(w.in), map[string]int{vInFlight: 1})

		w = newWorld()
		for i := range 4 {
			neverReceived(w, fmt.Sprint("k", i), 1000+i, 1)
		}
		w.fault(faultKill, 1100)
		expect(t, Check(w.in), nil)
	})
	t.Run("two faults within the lease share them", func(t *testing.T) {
		w := newWorld()
		for i := range 5 {
			neverReceived(w, fmt.Sprint("k", i), 1000+i, 1)
		}
		w.fault(faultKill, 1100)
		w.fault(faultKill, 4000)
		r := Check(w.in)
		expect(t, r, nil)
		if len(r.PerFault) != 2 || r.PerFault[0].NeverReceived["fcm"] != 4 || r.PerFault[1].NeverReceived["fcm"] != 1 {
			t.Errorf("per fault %+v, want 4 and 1", r.PerFault)
		}
	})
	t.Run("a stop can leave every worker's submissions", func(t *testing.T) {
		w := newWorld()
		for i := range 8 { // AllInFlight is 8
			neverReceived(w, fmt.Sprint("k", i), 1000+i, 1)
		}
		w.fault(faultStop, 1100)
		expect(t, Check(w.in), nil)
	})
	t.Run("each fault takes those whose lease ends first", func(t *testing.T) {
		w := newWorld()
		w.in.Limits.InFlight = 1
		neverReceived(w, "early", 0, 1)   // only the first kill is within its lease
		neverReceived(w, "late", 5000, 1) // both are
		w.fault(faultKill, 6000)
		w.fault(faultKill, 9000)
		expect(t, Check(w.in), nil)
	})
	t.Run("a resend: the first submission is the one never received", func(t *testing.T) {
		w := newWorld()
		d := w.notify("a", "resend", "u_a")[0]
		w.pair(d, "tok", "accepted", 2, 1, at(1000), at(8000), at(8400))
		w.receipt(d, "tok", fateAnswered, 200, at(8010))
		w.fault(faultKill, 1050)
		w.fault(faultKill, 8100) // after the resend was received: not its fault
		r := Check(w.in)
		expect(t, r, nil)
		if len(r.PerFault) != 1 || r.PerFault[0].Fault != 0 {
			t.Errorf("per fault %+v, want the first kill", r.PerFault)
		}
	})
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if p50, p99 := percentile(ds, 50), percentile(ds, 99); p50 != 50*time.Millisecond || p99 != 99*time.Millisecond {
		t.Errorf("p50 %s, p99 %s; want 50ms, 99ms", p50, p99)
	}
	if m := mean(ds); m != 50500*time.Microsecond {
		t.Errorf("mean %s, want 50.5ms", m)
	}
	if percentile(nil, 50) != 0 || mean(nil) != 0 {
		t.Error("an empty list has no percentile or mean")
	}
}

// TestCheckClockSteps: on SQLite each process's clock is the database's, so
// in the clock scenario a worker whose clock is ahead takes other runs'
// leases before they end, and the runs it took them from can no longer give
// back a submission they marked and never sent. Such a submission, marked on
// a clock minutes from the harness's, is explained by a clock step when the
// ledger's clocks may be that far off (Limits.ClockSkew); on PostgreSQL
// (ClockSkew 0: the database's now() judges leases) a clock step explains
// nothing.
func TestCheckClockSteps(t *testing.T) {
	for _, tc := range []struct {
		name string
		skew time.Duration
		want map[string]int
	}{
		{"sqlite", 3 * time.Minute, nil},
		{"postgres", 0, map[string]int{vUnattributed: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			w.in.Limits.ClockSkew = tc.skew
			d := w.notify("k1", "at-most-once", "r1")[0]
			mark := at(150_000) // the marking worker's clock: 2.5 minutes ahead
			w.pair(d, "t1", "ambiguous", 1, 1, mark, mark, at(1000))
			w.fault(faultClock, 400)
			expect(t, Check(w.in), tc.want)
		})
	}
}
