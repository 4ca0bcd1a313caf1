package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/apikey"
	"github.com/oncepush/oncepush/internal/server"
)

func TestDeviceLookupByToken(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		tok := e.token(oncepush.TransportAPNs)
		dev := e.putDevice("u_8831", obj{"transport": "apns", "token": tok})
		reader := e.key(apikey.ScopeRead)

		var got server.DeviceView
		// Another spelling of the same APNs token finds the same device.
		e.do("POST", "/v1/devices/lookup", reader, obj{"transport": "apns", "token": strings.ToUpper(tok)}).
			want(t, http.StatusOK).decode(t, &got)
		if got.ID != dev.ID || got.Recipient != "u_8831" || got.Token != dev.Token || strings.Contains(got.Token, tok[10:50]) {
			t.Errorf("lookup answered %+v; want device %d of u_8831, token masked as %q", got, dev.ID, dev.Token)
		}

		// One transport's token only; an unknown token is a 404.
		e.do("POST", "/v1/devices/lookup", reader, obj{"transport": "fcm", "token": e.token(oncepush.TransportFCM)}).
			wantProblem(t, http.StatusNotFound, "not_found", "")
		e.do("POST", "/v1/devices/lookup", reader, obj{"transport": "carrier-pigeon", "token": "x"}).
			wantProblem(t, http.StatusBadRequest, "invalid_field", "transport")
		e.do("POST", "/v1/devices/lookup", reader, obj{"transport": "apns"}).
			wantProblem(t, http.StatusBadRequest, "missing_field", "token")
		e.do("POST", "/v1/devices/lookup", e.key(apikey.ScopeSend), obj{"transport": "apns", "token": tok}).
			wantProblem(t, http.StatusForbidden, "forbidden", "")
	})
}

func TestActivityCountsRecentCallsByTransportAndOutcome(t *testing.T) {
	each(t, envOptions{backlogMax: 50}, func(t *testing.T, e *env) {
		e.register("u_fcm", oncepush.TransportFCM, nil)
		e.register("u_apns", oncepush.TransportAPNs, nil)
		e.register("u_rus", oncepush.TransportRuStore, nil)
		e.apns.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeRetry, Text: "503 ServiceUnavailable"})
		e.rus.Answer(func(context.Context, *oncepush.Submission) oncepush.Result {
			return oncepush.Result{Outcome: oncepush.OutcomeMaybeSent, Text: "no answer after the request was written"}
		})
		activity := func() server.ActivityView {
			t.Helper()
			return answerOf[server.ActivityView](e, "GET", "/v1/activity", nil)
		}

		e.send(e.admin, obj{"recipients": []string{"u_fcm", "u_apns", "u_rus"}, "title": "Hi", "body": "there"})
		e.clock.Advance(90 * time.Second)
		a := activity()
		if a.Backlog.Due != 3 || a.Backlog.DueCap != 50 || a.Backlog.OldestDueSeconds != 90 || !a.At.Equal(e.clock.Now()) {
			t.Errorf("before delivery: %+v at %s; want 3 due of at most 50, the oldest for 90 s, at %s", a.Backlog, a.At, e.clock.Now())
		}
		if a.Recent == nil || a.Recent.Calls != 0 || a.Recent.Scope != "process" || len(a.Recent.Transports) != 4 {
			t.Fatalf("before delivery, recent: %+v; want no calls, the 4 served transports listed", a.Recent)
		}

		e.drain()
		a = activity()
		byName := map[string]server.ActivityTransport{}
		for _, tv := range a.Recent.Transports {
			byName[tv.Transport] = tv
		}
		if a.Backlog.Due != 0 {
			t.Errorf("after delivery: %d due, want 0 (the APNs retry backs off)", a.Backlog.Due)
		}
		for name, want := range map[string]string{"fcm": "accepted", "apns": "retry", "rustore": "maybe_sent"} {
			tv := byName[name]
			if tv.Calls != 1 || tv.Outcomes[want] != 1 || tv.Buckets[len(tv.Buckets)-1] != 1 || tv.SendsPerSecond != 1.0/300 {
				t.Errorf("%s: %+v; want one %s call in the current bucket", name, tv, want)
			}
		}
		if a.Recent.Calls != 3 || a.Recent.Ambiguous != 1 || byName["rustore"].Ambiguous != 1 || a.Recent.AmbiguousRate != 1.0/3 {
			t.Errorf("recent: %d calls, %d ambiguous (rate %v); want 3, 1 (1/3)", a.Recent.Calls, a.Recent.Ambiguous, a.Recent.AmbiguousRate)
		}

		// Past the window the calls are forgotten.
		e.clock.Advance(5 * time.Minute)
		if a := activity(); a.Recent.Calls != 0 || a.Recent.Ambiguous != 0 {
			t.Errorf("5 minutes later: %d calls, %d ambiguous; want none", a.Recent.Calls, a.Recent.Ambiguous)
		}
		e.do("GET", "/v1/activity", e.key(apikey.ScopeDevices), nil).wantProblem(t, http.StatusForbidden, "forbidden", "")
	})
}
