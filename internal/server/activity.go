package server

import (
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/wallclock"
)

// Recent activity: GET /v1/activity answers the due backlog, read from the
// database when asked, and this process's provider calls of the last
// recentWindow by transport and outcome, from a ring of counters that
// Metrics (the engine's Observer) fills. See docs/decisions.md D72.

// The ring's shape: recentBuckets buckets of recentBucket each.
const (
	recentBucket  = 10 * time.Second
	recentBuckets = 30
	recentWindow  = recentBucket * recentBuckets
)

// outcomeNames are the outcomes the answer counts, always all of them.
var outcomeNames = []string{
	oncepush.OutcomeAccepted.String(), oncepush.OutcomeInvalidToken.String(), oncepush.OutcomeRetry.String(),
	oncepush.OutcomeRejected.String(), oncepush.OutcomeMaybeSent.String(),
}

// recentBucketCounts is one bucket: calls by transport and outcome, and
// ambiguous attempts by transport.
type recentBucketCounts struct {
	slot      int64 // the bucket's start, in recentBucket units since the Unix epoch
	calls     map[oncepush.Transport]map[string]int
	ambiguous map[oncepush.Transport]int
}

// recentRing counts provider calls into time buckets, on one clock.
type recentRing struct {
	mu      sync.Mutex
	clock   oncepush.Clock // nil: the wall clock
	buckets [recentBuckets]recentBucketCounts
}

func (r *recentRing) now() time.Time {
	if r.clock != nil {
		return r.clock.Now()
	}
	return wallclock.Now()
}

// useClock makes the ring count on the engine's clock.
func (r *recentRing) useClock(c oncepush.Clock) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clock = c
}

// bucket returns the current bucket, emptied if it last held an older slot.
// r.mu is held.
func (r *recentRing) bucket() *recentBucketCounts {
	slot := r.now().UnixNano() / int64(recentBucket)
	b := &r.buckets[slot%recentBuckets]
	if b.slot != slot || b.calls == nil {
		*b = recentBucketCounts{slot: slot, calls: map[oncepush.Transport]map[string]int{}, ambiguous: map[oncepush.Transport]int{}}
	}
	return b
}

func (r *recentRing) call(t oncepush.Transport, o oncepush.Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.bucket()
	if b.calls[t] == nil {
		b.calls[t] = map[string]int{}
	}
	b.calls[t][o.String()]++
}

func (r *recentRing) ambiguousAttempt(t oncepush.Transport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bucket().ambiguous[t]++
}

// recentView is the "recent" part of GET /v1/activity.
type recentView struct {
	// Scope is "process": the figures are this process's provider calls.
	Scope         string          `json:"scope"`
	WindowSeconds int             `json:"windowSeconds"`
	BucketSeconds int             `json:"bucketSeconds"`
	Since         time.Time       `json:"since"`
	Calls         int             `json:"calls"`
	Ambiguous     int             `json:"ambiguous"`
	AmbiguousRate float64         `json:"ambiguousRate"`
	Transports    []transportView `json:"transports"`
}

type transportView struct {
	Transport      string         `json:"transport"`
	Calls          int            `json:"calls"`
	SendsPerSecond float64        `json:"sendsPerSecond"`
	Outcomes       map[string]int `json:"outcomes"`
	Ambiguous      int            `json:"ambiguous"`
	// Buckets counts the calls of each bucket, oldest first.
	Buckets []int `json:"buckets"`
}

// snapshot sums the window ending in the current bucket, for the transports
// given (those served) and any other that has calls in it.
func (r *recentRing) snapshot(served []oncepush.Transport) recentView {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.now().UnixNano() / int64(recentBucket)
	first := last - recentBuckets + 1
	v := recentView{
		Scope: "process", WindowSeconds: int(recentWindow / time.Second), BucketSeconds: int(recentBucket / time.Second),
		Since: time.Unix(0, first*int64(recentBucket)).UTC(), Transports: []transportView{},
	}
	names := slices.Clone(served)
	for _, b := range r.buckets {
		if b.slot < first || b.slot > last {
			continue
		}
		for t := range b.calls {
			names = append(names, t)
		}
		for t := range b.ambiguous {
			names = append(names, t)
		}
	}
	slices.Sort(names)
	for _, t := range slices.Compact(names) {
		tv := transportView{Transport: string(t), Outcomes: map[string]int{}, Buckets: make([]int, recentBuckets)}
		for _, o := range outcomeNames {
			tv.Outcomes[o] = 0
		}
		for _, b := range r.buckets {
			if b.slot < first || b.slot > last {
				continue
			}
			for o, n := range b.calls[t] {
				tv.Outcomes[o] += n
				tv.Calls += n
				tv.Buckets[b.slot-first] += n
			}
			tv.Ambiguous += b.ambiguous[t]
		}
		tv.SendsPerSecond = float64(tv.Calls) / recentWindow.Seconds()
		v.Calls += tv.Calls
		v.Ambiguous += tv.Ambiguous
		v.Transports = append(v.Transports, tv)
	}
	if v.Calls > 0 {
		v.AmbiguousRate = float64(v.Ambiguous) / float64(v.Calls)
	}
	return v
}

// activityView is GET /v1/activity.
type activityView struct {
	At      time.Time   `json:"at"`
	Backlog backlogView `json:"backlog"`
	// Recent is null when the server counts no provider calls (no Metrics).
	Recent *recentView `json:"recent"`
}

type backlogView struct {
	// Due counts due pending deliveries up to DueCap (at DueCap: at least).
	Due              int     `json:"due"`
	DueCap           int     `json:"dueCap"`
	OldestDueSeconds float64 `json:"oldestDueSeconds"`
}

func (s *Server[TTx]) getActivity(w http.ResponseWriter, r *http.Request) error {
	b, at, err := s.readBacklog(r.Context())
	if err != nil {
		return err
	}
	v := activityView{At: at.UTC(), Backlog: backlogView{Due: b.Due, DueCap: s.backlogMax, OldestDueSeconds: b.OldestAge.Seconds()}}
	if s.metrics != nil {
		var served []oncepush.Transport
		for _, p := range s.client.Config().Providers {
			served = append(served, p.Transport())
		}
		rv := s.metrics.recent.snapshot(served)
		v.Recent = &rv
	}
	return replyJSON(w, http.StatusOK, v)
}
