package enginetest

import (
	"context"
	"testing"
	"time"
)

// callEach calls each of the hooks once.
func callEach(h *Hooks) {
	h.ClaimCommitted(1, 2)
	h.SendStarting(1)
	h.RecordCommitting(1)
	h.RecordFailed(1, nil, true)
	h.WorkerIdle(1, true)
	h.StopWaiting()
	h.CleanupDone()
}

func TestNilHooksDoNothing(t *testing.T) {
	t.Parallel()
	callEach(nil)
	callEach(&Hooks{}) // unset fields too
	if From(context.Background()) != nil {
		t.Fatal("a context without hooks has hooks")
	}
}

func TestHooksTravelInTheContext(t *testing.T) {
	t.Parallel()
	var claims, sends, records, failures, idle, stops, cleanups Counter
	h := &Hooks{
		OnClaimCommitted:   func(leased, pairs int) { claims.Add() },
		OnSendStarting:     func(int64) { sends.Add() },
		OnRecordCommitting: func(int) { records.Add() },
		OnRecordFailed:     func(int, error, bool) { failures.Add() },
		OnWorkerIdle:       func(int, bool) { idle.Add() },
		OnStopWaiting:      stops.Add,
		OnCleanupDone:      cleanups.Add,
	}
	ctx, cancel := context.WithCancel(WithHooks(context.Background(), h))
	defer cancel()
	got := From(context.WithoutCancel(ctx))
	if got != h {
		t.Fatal("hooks lost on the way through derived contexts")
	}
	callEach(got)
	for name, c := range map[string]*Counter{"claims": &claims, "sends": &sends, "records": &records, "failures": &failures,
		"idle": &idle, "stops": &stops, "cleanups": &cleanups} {
		if c.Count() != 1 {
			t.Errorf("%s: %d calls, want 1", name, c.Count())
		}
	}
}

func TestCounterWait(t *testing.T) {
	t.Parallel()
	var c Counter
	done := make(chan bool)
	go func() { done <- c.Wait(context.Background(), 3) }()
	for range 3 {
		c.Add()
	}
	if !<-done {
		t.Fatal("Wait did not see the third call")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if c.Wait(ctx, 4) {
		t.Fatal("Wait reported a call that never came")
	}
	if !c.Wait(context.Background(), 2) {
		t.Fatal("Wait for a count already reached blocked")
	}
}
