//go:build unix

package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// This file is the checker: a pure function of what the fake providers
// recorded and what the ledger says, with no process, clock or network in it,
// so that its rules are unit-tested on hand-made inputs (check_test.go).

// Receipt is one request the fake providers read whole: the provider's own
// account of what reached it (GET /_fake/received).
type Receipt struct {
	Seq            int64
	Transport      string
	Token          string // for Web Push: the subscription's endpoint id
	CollapseID     string
	NotificationID string // the payload's oncepush_id
	APNsID         string
	Status         int    // the HTTP status answered (0: none)
	Fate           string // held, answered, dropped, abandoned
	ReceivedAt     time.Time
	At             time.Time // when it settled (answered, dropped, abandoned)
	RemoteAddr     string
}

// The fates a receipt can have (pushtest.FakeFate).
const (
	fateHeld      = "held"
	fateAnswered  = "answered"
	fateDropped   = "dropped"
	fateAbandoned = "abandoned"
)

// mayHaveAccepted reports whether the provider may have taken the request
// for delivery: it answered success, or the client never heard an answer
// (the stream was reset after the request was read, or the client went away
// while the answer was held). A definite refusal (5xx, 429, an invalid
// token) is the only receipt that certainly delivered nothing.
func (r *Receipt) mayHaveAccepted() bool {
	switch r.Fate {
	case fateDropped, fateAbandoned, fateHeld:
		return true
	}
	return r.Status >= 200 && r.Status < 300
}

// Notification is one notification the harness asked for: one key, posted
// one or more times (duplicates on purpose, retries after a lost answer).
type Notification struct {
	Key        string
	Policy     string // resend or at-most-once
	Recipients []string
	// Posts counts the POSTs made with this key; Acked whether any of them
	// was answered 202, and IDs the distinct notification ids the 202s named.
	Posts int
	Acked bool
	IDs   []int64
	// Conflicts counts 409 answers: the same body refused under its own key.
	Conflicts int
}

// Delivery is one delivery of the ledger as the API lists it.
type Delivery struct {
	ID         int64
	MessageID  int64
	Recipient  string
	OncepushID string
	DedupeKey  string
	Status     string
}

// Pair is one (delivery, device) row of the ledger as the API lists it, with
// the token the harness registered for its device.
type Pair struct {
	DeliveryID  int64
	Transport   string
	Token       string // as the fake records it (Web Push: endpoint id)
	State       string
	Submissions int
	Ambiguous   int
	FirstSentAt time.Time // zero: never marked sending
	LastSentAt  time.Time
	UpdatedAt   time.Time
	// DeviceGone: the device is no longer registered at the end (its token
	// was answered invalid for another delivery), so an unsettled pair of a
	// final delivery had nothing left to be sent to.
	DeviceGone bool
}

// Fault is one fault the harness injected.
type Fault struct {
	Kind   string // kill, stop, api-kill, pg-restart
	At     time.Time
	Target string         // the process, e.g. "worker-2 (pid 1234)"
	Held   map[string]int // requests of the target the fake held at the fault, per transport
	// Until is the end of a fault that lasts (a connection fault's window);
	// zero for a fault of a moment.
	Until time.Time
}

// end is when the fault ended: Until, or At for a fault of a moment.
func (f *Fault) end() time.Time {
	if f.Until.After(f.At) {
		return f.Until
	}
	return f.At
}

// Fault kinds. Only those that can interrupt a provider request between its
// mark and its arrival explain a submission the provider never received.
const (
	faultKill      = "kill"
	faultStop      = "stop"
	faultAPIKill   = "api-kill"
	faultPGRestart = "pg-restart"
)

func (f *Fault) interruptsSends() bool {
	return f.Kind == faultKill || f.Kind == faultStop || f.Kind == faultPGRestart || f.Kind == faultDiskFull || scenarioInterrupts(f.Kind)
}

// Limits are the engine settings the checker's bounds follow from.
type Limits struct {
	// InFlight is the most submissions one killed worker can leave marked
	// and unreceived on one transport: all its runs together mark at most
	// concurrentSends pairs not yet finished (the window is the process's,
	// D120). AllInFlight is the same for every worker at once: a
	// PostgreSQL restart, or a SIGSTOP that holds SQLite's write lock, can
	// keep every worker from recording.
	InFlight    int
	AllInFlight int
	// SendTimeout bounds a request from its mark to its end; Lease bounds
	// how long after its mark a run can still record it (after that its
	// pairs are recovered).
	SendTimeout time.Duration
	Lease       time.Duration
	// Workers is how many worker processes ran (for the window's prediction);
	// Chaos how long faults were injected.
	Workers int
	Chaos   time.Duration
	// ClockSkew is how far the clocks that stamp the ledger's mark times
	// may be from the harness's: zero but in the clock scenario on SQLite,
	// where each process's clock is the database's (clock.go). It widens
	// the windows in which a mark is matched with receipts and faults, and
	// makes a clock step a fault that can interrupt sends: a clock ahead
	// takes other runs' leases before they end, and a run that lost its
	// lease can no longer give back a submission it marked and never sent.
	ClockSkew time.Duration
}

// Input is everything the checker reads.
type Input struct {
	Notifications []Notification
	Deliveries    []Delivery
	Pairs         []Pair
	Receipts      []Receipt
	Faults        []Fault
	Limits        Limits
}

// Row is one line of the summary table: one policy's counts.
type Row struct {
	Policy        string
	Attempted     int // notifications posted (distinct keys)
	Acknowledged  int // … of which a POST was answered 202
	Deliveries    int
	Pairs         int
	OK            int // pairs the provider's record and the ledger agree on, sent at most once
	Lost          int // deliveries missing or not final, and pairs recorded sent that the provider never accepted
	DupMarked     int // pairs the provider may have accepted more than once, each extra one marked ambiguous
	DupUnmarked   int // … with fewer ambiguous marks than extra submissions
	Unexpected    int // receipts with no pair, and deliveries no notification asked for
	Ambiguous     int // pairs with an ambiguous mark
	NeverReceived int // submissions the ledger counted that the provider never read whole
}

// FaultCount is what the checker attributes to one fault.
type FaultCount struct {
	Fault         int            // index into Input.Faults
	NeverReceived map[string]int // per transport
}

// Violation is one broken promise, with what shows it.
type Violation struct {
	Kind   string
	Detail string
}

// Violation kinds.
const (
	vNotFinal        = "not final"
	vMissing         = "lost delivery"
	vLostPair        = "lost pair"
	vDuplicated      = "duplicated under at-most-once"
	vUnmarked        = "duplicate without an ambiguous mark"
	vIdentity        = "resend changed identity"
	vUnexpected      = "unexpected"
	vUncounted       = "received more often than counted"
	vNeverUnmarked   = "never received, not ambiguous"
	vUnattributed    = "never received, no fault to explain it"
	vInFlight        = "never received beyond what the faults had in flight"
	vDedup           = "one key, several notifications"
	vConflict        = "same body refused"
	vNotAcknowledged = "never acknowledged"
)

// Result is what the checker found.
type Result struct {
	Rows       []*Row // one per policy, in policyOrder, then any unknown
	Violations []Violation
	// Submissions is the ledger's count of provider calls; Received the
	// provider's count of requests read whole.
	Submissions, Received int
	NeverReceived         int
	PerFault              []FaultCount
	// Window holds, sorted, the time from the provider reading a request to
	// the ledger's record of its answer, for every pair recorded from an
	// answer.
	Window []time.Duration
	// FaultAmbiguous counts pairs made ambiguous by a fault rather than by
	// the fake's own answers (a reset, an answer held past the send
	// timeout), every submission of which reached the provider: a request
	// answered whose answer was never recorded, or one the client gave up
	// while held. FaultDuplicates counts the resend pairs among them that the
	// provider may have accepted more than once; AnswerDuplicates the resend
	// duplicates the fake's answers explain.
	FaultAmbiguous, FaultDuplicates, AnswerDuplicates int
	ResendPairs, Pairs                                int
	// UnsettledGone counts pairs of final deliveries left pending or
	// sending because their device was deleted meanwhile.
	UnsettledGone int
	// Counts is the number of violations of each kind (Violations lists
	// the first few of each).
	Counts map[string]int
}

// Failed reports whether any promise was broken.
func (r *Result) Failed() bool { return len(r.Violations) > 0 }

var policyOrder = []string{"resend", "at-most-once"}

// pairKey names a (notification, device) pair the way both sides can: the
// provider sees the notification id in the payload and the token; the ledger
// has the delivery's notification id and the device's token.
type pairKey struct{ oncepushID, transport, token string }

// attributionSlack is added around a pair's mark times when matching them
// with receipts and faults: the ledger's clock (the database's) and the
// harness's are one host clock, read at slightly different moments.
const attributionSlack = time.Second

// maxDetails bounds the violations listed per kind (the count is exact).
const maxDetails = 5

// Check compares the provider's record with the ledger.
func Check(in Input) *Result {
	res := &Result{}
	rows := map[string]*Row{}
	row := func(policy string) *Row {
		if policy == "" {
			policy = "?"
		}
		if rows[policy] == nil {
			rows[policy] = &Row{Policy: policy}
		}
		return rows[policy]
	}
	for _, p := range policyOrder {
		row(p)
	}
	counts := map[string]int{}
	violate := func(kind, format string, args ...any) {
		counts[kind]++
		if counts[kind] <= maxDetails {
			res.Violations = append(res.Violations, Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)})
		}
	}

	// Notifications: what was asked for, and what the API answered.
	byKey := map[string]*Notification{}
	for i := range in.Notifications {
		n := &in.Notifications[i]
		byKey[n.Key] = n
		r := row(n.Policy)
		r.Attempted++
		if n.Acked {
			r.Acknowledged++
		} else {
			violate(vNotAcknowledged, "key %s: %d POSTs, none answered 202", n.Key, n.Posts)
		}
		if len(n.IDs) > 1 {
			violate(vDedup, "key %s answered with notification ids %v", n.Key, n.IDs)
		}
		if n.Conflicts > 0 {
			violate(vConflict, "key %s: %d POSTs of the same body answered 409", n.Key, n.Conflicts)
		}
	}

	// Deliveries: one per (key, recipient), final, for every acknowledged
	// notification.
	deliveries := map[int64]*Delivery{}
	type keyRecipient struct{ key, recipient string }
	seen := map[keyRecipient][]int64{}
	for i := range in.Deliveries {
		d := &in.Deliveries[i]
		deliveries[d.ID] = d
		n := byKey[d.DedupeKey]
		if n == nil {
			row("?").Unexpected++
			violate(vUnexpected, "delivery %d (key %q, recipient %s) was asked for by no notification", d.ID, d.DedupeKey, d.Recipient)
			continue
		}
		r := row(n.Policy)
		r.Deliveries++
		seen[keyRecipient{d.DedupeKey, d.Recipient}] = append(seen[keyRecipient{d.DedupeKey, d.Recipient}], d.ID)
		if d.Status == "pending" {
			r.Lost++
			violate(vNotFinal, "delivery %d (key %s, recipient %s) is still pending", d.ID, d.DedupeKey, d.Recipient)
		}
		if len(n.IDs) > 0 && !slices.Contains(n.IDs, d.MessageID) {
			violate(vDedup, "delivery %d of key %s belongs to notification %d, the API answered %v", d.ID, d.DedupeKey, d.MessageID, n.IDs)
		}
	}
	for kr, ids := range seen {
		if len(ids) > 1 {
			violate(vDedup, "key %s has %d deliveries to %s: %v", kr.key, len(ids), kr.recipient, ids)
		}
	}
	for i := range in.Notifications {
		n := &in.Notifications[i]
		if !n.Acked {
			continue
		}
		for _, rc := range n.Recipients {
			if len(seen[keyRecipient{n.Key, rc}]) == 0 {
				row(n.Policy).Lost++
				violate(vMissing, "key %s was acknowledged (ids %v), the ledger has no delivery to %s", n.Key, n.IDs, rc)
			}
		}
	}

	// Receipts, by the pair they name.
	receipts := map[pairKey][]*Receipt{}
	for i := range in.Receipts {
		r := &in.Receipts[i]
		k := pairKey{r.NotificationID, r.Transport, r.Token}
		receipts[k] = append(receipts[k], r)
	}
	res.Received = len(in.Receipts)
	for _, rs := range receipts {
		slices.SortFunc(rs, func(a, b *Receipt) int { return cmp.Compare(a.Seq, b.Seq) })
	}

	// Faults that can leave a submission unreceived, in time order.
	slack := attributionSlack + in.Limits.ClockSkew
	var faults []int
	for i := range in.Faults {
		if in.Faults[i].interruptsSends() || (in.Faults[i].Kind == faultClock && in.Limits.ClockSkew > 0) {
			faults = append(faults, i)
		}
	}
	slices.SortStableFunc(faults, func(a, b int) int { return in.Faults[a].At.Compare(in.Faults[b].At) })
	var unreceived []unreceivedSubmission
	okPairs := map[int]*Row{} // pairs counted ok, by index: a submission no fault explains takes it back

	matched := map[pairKey]bool{}
	for i := range in.Pairs {
		p := &in.Pairs[i]
		d := deliveries[p.DeliveryID]
		if d == nil {
			violate(vUnexpected, "pair of delivery %d (%s) has no delivery", p.DeliveryID, p.Transport)
			continue
		}
		n := byKey[d.DedupeKey]
		if n == nil {
			continue // counted as an unexpected delivery
		}
		r := row(n.Policy)
		r.Pairs++
		res.Pairs++
		if n.Policy == "resend" {
			res.ResendPairs++
		}
		k := pairKey{d.OncepushID, p.Transport, p.Token}
		matched[k] = true
		rs := receipts[k]
		res.Submissions += p.Submissions
		name := fmt.Sprintf("delivery %d %s (key %s, recipient %s)", d.ID, p.Transport, d.DedupeKey, d.Recipient)
		bad := false

		accepted, answered2xx := 0, false
		for _, rc := range rs {
			if rc.mayHaveAccepted() {
				accepted++
			}
			if rc.Fate == fateAnswered && rc.Status >= 200 && rc.Status < 300 {
				answered2xx = true
			}
			if rc.CollapseID != rs[0].CollapseID || rc.APNsID != rs[0].APNsID {
				bad = true
				violate(vIdentity, "%s: receipt %d carries collapse id %q apns-id %q, receipt %d %q %q",
					name, rs[0].Seq, rs[0].CollapseID, rs[0].APNsID, rc.Seq, rc.CollapseID, rc.APNsID)
			}
		}
		if d.Status != "pending" && (p.State == "pending" || p.State == "sending") {
			if p.DeviceGone {
				res.UnsettledGone++
			} else {
				bad = true
				r.Lost++
				violate(vNotFinal, "%s: the delivery ended %s with this pair still %s, its device still registered", name, d.Status, p.State)
			}
		}
		if p.State == "accepted" && !answered2xx {
			bad = true
			r.Lost++
			violate(vLostPair, "%s: the ledger says accepted, the provider answered success to none of its %d requests", name, len(rs))
		}
		if p.Ambiguous > 0 {
			r.Ambiguous++
		}

		missing := p.Submissions - len(rs)
		if missing < 0 {
			bad = true
			violate(vUncounted, "%s: %d requests received, %d submissions counted", name, len(rs), p.Submissions)
			missing = 0
		}
		// Every submission after one the provider may have accepted, and
		// every submission it never read, needs an ambiguous mark of its own.
		extra := max(accepted-1, 0)
		if accepted > 1 {
			bad = true
			switch {
			case n.Policy == "at-most-once":
				r.DupUnmarked++
				violate(vDuplicated, "%s: the provider may have accepted it %d times", name, accepted)
			case p.Ambiguous < extra+missing:
				r.DupUnmarked++
				violate(vUnmarked, "%s: %d requests the provider may have accepted, %d never received, %d ambiguous marks",
					name, accepted, missing, p.Ambiguous)
			default:
				r.DupMarked++
			}
		} else if missing > 0 && p.Ambiguous < missing {
			bad = true
			violate(vNeverUnmarked, "%s: %d submissions never received, %d ambiguous marks", name, missing, p.Ambiguous)
		}
		if p.Ambiguous > 0 && missing == 0 {
			if fromFault(p, rs, in.Limits.SendTimeout) {
				res.FaultAmbiguous++
				if n.Policy == "resend" && accepted > 1 {
					res.FaultDuplicates++
				}
			} else if n.Policy == "resend" && accepted > 1 {
				res.AnswerDuplicates++
			}
		}

		if missing > 0 {
			r.NeverReceived += missing
			res.NeverReceived += missing
			for _, m := range unreceivedMarks(p, rs, missing, in.Limits.SendTimeout, slack) {
				u := unreceivedSubmission{pair: i, transport: p.Transport,
					detail: fmt.Sprintf("%s: marked (first %s, last %s), receipts %s", name,
						p.FirstSentAt.Format(time.RFC3339Nano), p.LastSentAt.Format(time.RFC3339Nano), receiptTimes(rs))}
				// The run that marked it stopped recording before its lease
				// ended: the fault came after the mark, within a lease. A
				// mark between the first and the last is not in the ledger,
				// only that it lies between them.
				from, to := m, m
				if m.IsZero() {
					from, to = p.FirstSentAt, p.LastSentAt
				}
				u.from, u.to = from.Add(-slack), to.Add(in.Limits.Lease+slack)
				unreceived = append(unreceived, u)
			}
		}

		// The ambiguous window: from the provider reading the request to the
		// ledger's record of its answer (not measured on clocks apart).
		if last := lastReceipt(rs); last != nil && recordedFromAnswer(p.State) && last.Fate == fateAnswered && in.Limits.ClockSkew == 0 {
			if w := p.UpdatedAt.Sub(last.ReceivedAt); w >= 0 {
				res.Window = append(res.Window, w)
			}
		}
		if !bad {
			r.OK++
			okPairs[i] = r
		}
	}

	// Receipts no pair explains.
	for k, rs := range receipts {
		if !matched[k] {
			row("?").Unexpected += len(rs)
			violate(vUnexpected, "%d receipts (%s token %s, oncepush_id %s, first seq %d) match no pair of the ledger",
				len(rs), k.transport, k.token, k.oncepushID, rs[0].Seq)
		}
	}

	// Never-received submissions, against what the faults near them could
	// have had in flight.
	capacity := func(f int) int {
		if in.Faults[f].Kind == faultKill {
			return in.Limits.InFlight
		}
		return in.Limits.AllInFlight
	}
	perFault := map[int]map[string]int{}
	for _, u := range assignToFaults(unreceived, in.Faults, faults, capacity) {
		if u.fault >= 0 {
			if perFault[u.fault] == nil {
				perFault[u.fault] = map[string]int{}
			}
			perFault[u.fault][u.transport]++
			continue
		}
		if r := okPairs[u.pair]; r != nil {
			r.OK--
			delete(okPairs, u.pair)
		}
		near := false
		for _, f := range faults {
			near = near || (!in.Faults[f].end().Before(u.from) && !in.Faults[f].At.After(u.to))
		}
		if near {
			violate(vInFlight, "%s: every fault within a lease of its mark already had as many never-received %s submissions as it could have in flight",
				u.detail, u.transport)
		} else {
			violate(vUnattributed, "%s: a submission never reached the provider, and no fault that can stop a run between its mark and its send (a worker kill, SIGSTOP, PostgreSQL restart, connection fault, failover) came within a lease (%s) of its mark",
				u.detail, in.Limits.Lease)
		}
	}
	for _, f := range faults {
		if per := perFault[f]; per != nil {
			res.PerFault = append(res.PerFault, FaultCount{Fault: f, NeverReceived: per})
		}
	}

	res.Counts = counts
	for kind, n := range counts {
		if n > maxDetails {
			res.Violations = append(res.Violations, Violation{Kind: kind, Detail: fmt.Sprintf("… %d in all", n)})
		}
	}
	slices.SortStableFunc(res.Violations, func(a, b Violation) int { return strings.Compare(a.Kind, b.Kind) })
	slices.Sort(res.Window)
	for _, p := range policyOrder {
		res.Rows = append(res.Rows, rows[p])
	}
	if r := rows["?"]; r != nil {
		res.Rows = append(res.Rows, r)
	}
	return res
}

// unreceivedSubmission is a submission the ledger counted and the provider
// never read: the run that marked it stopped (killed, frozen, or unable to
// reach its database) between its mark and its record, so some fault lies
// in [from, to].
type unreceivedSubmission struct {
	pair      int // index into Input.Pairs
	transport string
	from, to  time.Time
	detail    string
	fault     int // the fault it is charged to; -1: none can take it
}

// assignToFaults charges each unreceived submission to a fault of its
// interval, no fault taking more of one transport than its capacity. It is
// a matching on intervals, and the greedy one is optimal (Glover): the
// faults in time order, each taking, among the submissions whose interval
// has begun, those whose interval ends first. A submission it cannot place
// has no feasible explanation, whatever the assignment. (With faults that
// last, a window taking the submissions begun by its end, the greedy is no
// longer proven optimal: it may report a submission another assignment
// could explain, never the reverse.)
func assignToFaults(us []unreceivedSubmission, faults []Fault, order []int, capacity func(int) int) []unreceivedSubmission {
	byTransport := map[string][]int{}
	for i := range us {
		us[i].fault = -1
		byTransport[us[i].transport] = append(byTransport[us[i].transport], i)
	}
	for _, idx := range byTransport {
		slices.SortFunc(idx, func(a, b int) int { return us[a].from.Compare(us[b].from) })
		var open []int // begun, not yet charged; kept sorted by end
		next := 0
		for _, f := range order {
			// A fault that lasts can take a submission whose interval meets
			// its window.
			at, end := faults[f].At, faults[f].end()
			for next < len(idx) && !us[idx[next]].from.After(end) {
				open = append(open, idx[next])
				next++
			}
			slices.SortFunc(open, func(a, b int) int { return us[a].to.Compare(us[b].to) })
			kept := open[:0]
			taken := 0
			for _, u := range open {
				switch {
				case us[u].to.Before(at):
					// Ended before this fault: no later fault can take it either.
				case taken < capacity(f):
					us[u].fault = f
					taken++
				default:
					kept = append(kept, u)
				}
			}
			open = kept
		}
	}
	return us
}

// unreceivedMarks returns the mark times of a pair's submissions that the
// provider never read, as well as the ledger tells them: it keeps the first
// and the last mark only. A mark is taken as received when a receipt came
// within a send timeout of it; the rest, up to missing, are the marks with no
// receipt, then (for submissions between the first and the last) the first.
// slack widens the match: the two clocks are read at different moments, or
// are apart (Limits.ClockSkew).
func unreceivedMarks(p *Pair, rs []*Receipt, missing int, sendTimeout, slack time.Duration) []time.Time {
	marks := []time.Time{p.FirstSentAt}
	if p.Submissions > 1 && !p.LastSentAt.Equal(p.FirstSentAt) {
		marks = append(marks, p.LastSentAt)
	}
	var out []time.Time
	for _, m := range marks {
		covered := false
		for _, r := range rs {
			if !r.ReceivedAt.Before(m.Add(-slack)) && !r.ReceivedAt.After(m.Add(sendTimeout+slack)) {
				covered = true
				break
			}
		}
		if !covered && len(out) < missing {
			out = append(out, m)
		}
	}
	for len(out) < missing {
		out = append(out, time.Time{}) // between the first and the last: matched by the fallback
	}
	return out
}

// fromFault reports whether a pair's ambiguity came from a fault rather than
// from the fake's answers: some request of it was answered success without
// that answer becoming the pair's record, or was given up by its client
// sooner than a send timeout would (its process died or stopped). A reset
// stream and an answer held past the send timeout are the fake's doing.
func fromFault(p *Pair, rs []*Receipt, sendTimeout time.Duration) bool {
	for i, r := range rs {
		switch {
		case r.Fate == fateAnswered && r.Status >= 200 && r.Status < 300:
			if i < len(rs)-1 || p.State != "accepted" {
				return true
			}
		case r.Fate == fateAbandoned && r.At.Sub(r.ReceivedAt) < sendTimeout/2:
			return true
		}
	}
	return false
}

func receiptTimes(rs []*Receipt) string {
	var b strings.Builder
	b.WriteString("[")
	for i, r := range rs {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%d %s %d at %s", r.Seq, r.Fate, r.Status, r.ReceivedAt.Format(time.RFC3339Nano))
	}
	b.WriteString("]")
	return b.String()
}

func lastReceipt(rs []*Receipt) *Receipt {
	if len(rs) == 0 {
		return nil
	}
	return rs[len(rs)-1]
}

// recordedFromAnswer reports whether a pair's final state was written from a
// provider's answer (rather than by a recovery, which writes ambiguous).
func recordedFromAnswer(state string) bool {
	switch state {
	case "accepted", "invalid", "rejected", "retry":
		return true
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// percentile returns the p-th percentile (0–100) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}

// mean returns the mean of durations.
func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}
