package server_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/enginetest"
	"github.com/oncepush/oncepush/internal/server"
)

// TestConcurrentPostsFailAlone: POSTs written in one group (held until they
// have all queued) are answered each on its own: a dedupeKey conflict is 409
// and an invalid request 400 while the others are accepted, and the
// conflicting request wrote nothing.
func TestConcurrentPostsFailAlone(t *testing.T) {
	// One group at a time, so that the held leader's group takes them all.
	each(t, envOptions{config: func(c *oncepush.Config) { c.SendGroups = 1 }}, func(t *testing.T, e *env) {
		first := e.send(e.admin, obj{"recipients": []string{"u_first"}, "title": "Hello", "dedupeKey": "k-1"})
		before := metricValues(t, e)

		queued := &enginetest.Counter{}
		release := make(chan struct{})
		var held sync.Once
		e.hooks.Store(&enginetest.Hooks{
			OnSendQueued:  func(int) { queued.Add() },
			OnGroupTaking: func() { held.Do(func() { <-release }) },
		})
		bodies := []obj{
			{"recipients": []string{"u_1"}, "title": "one"},
			{"recipients": []string{"u_2"}, "title": "two", "dedupeKey": "k-2"},
			{"recipients": []string{"u_first"}, "title": "Hello", "dedupeKey": "k-1"},
			{"recipients": []string{"u_3"}, "title": "another request", "dedupeKey": "k-1"},
			{"recipients": []string{"u_4"}, "title": "bad", "ttlSeconds": -1},
		}
		replies := make([]*reply, len(bodies))
		errs := make([]error, len(bodies))
		var wg sync.WaitGroup
		for i, b := range bodies {
			wg.Go(func() { replies[i], errs[i] = e.request("POST", "/v1/notifications", e.admin, b) })
		}
		// The invalid request never queues: the leader takes the other four.
		if !queued.Wait(t.Context(), 4) {
			t.Fatalf("%d requests queued, want 4", queued.Count())
		}
		close(release)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
		}

		var a server.SendAnswer
		for i := range 2 {
			replies[i].want(t, http.StatusAccepted).decode(t, &a)
			if a.Queued != 1 || a.Duplicate || a.ID == 0 || a.ID == first.ID {
				t.Errorf("request %d answered %+v", i, a)
			}
		}
		replies[2].want(t, http.StatusAccepted).decode(t, &a)
		if !a.Duplicate || a.ID != first.ID {
			t.Errorf("the replay answered %+v, want notification %d again", a, first.ID)
		}
		replies[3].wantProblem(t, http.StatusConflict, "idempotency_conflict", "dedupeKey")
		replies[4].wantProblem(t, http.StatusBadRequest, "invalid_field", "ttlSeconds")
		if n := e.count("oncepush_delivery"); n != 3 {
			t.Errorf("%d deliveries, want 3 (the first send's and two new)", n)
		}

		after := metricValues(t, e)
		const size = "oncepush_send_group_size"
		if groups, sends := after[size+"_count"]-before[size+"_count"], after[size+"_sum"]-before[size+"_sum"]; groups != 1 || sends != 4 {
			t.Errorf("%s counted %v groups of %v sends, want 1 of 4", size, groups, sends)
		}
	})
}
