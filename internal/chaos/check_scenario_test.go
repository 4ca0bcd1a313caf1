//go:build unix

package main

import (
	"fmt"
	"testing"
)

// The checker's rules for the scenarios' faults: connection faults that last
// a window, and a failover.

// unmarked adds an at-most-once pair marked at markMs and never received,
// ambiguous, as a run interrupted between its mark and its send leaves it.
func unmarked(w *world, key string, markMs int) {
	d := w.notify(key, "at-most-once", "u_"+key)[0]
	w.in.Deliveries[d-1].Status = "ambiguous"
	w.pair(d, "tok-"+key, "ambiguous", 1, 1, at(markMs), at(markMs), at(markMs+6000))
}

// window adds a fault lasting from fromMs to untilMs.
func (w *world) window(kind string, fromMs, untilMs int) {
	w.in.Faults = append(w.in.Faults, Fault{Kind: kind, At: at(fromMs), Until: at(untilMs), Target: kind})
}

func TestCheckScenarioFaults(t *testing.T) {
	t.Run("a latency window explains a mark made inside it", func(t *testing.T) {
		w := newWorld()
		unmarked(w, "a", 20000) // 19 s into a 35 s spike: more than a lease after it began
		w.window(faultNetLatency, 1000, 40000)
		expect(t, Check(w.in), nil)
	})
	t.Run("not a mark made after it ended", func(t *testing.T) {
		w := newWorld()
		unmarked(w, "a", 50000)
		w.window(faultNetLatency, 1000, 40000)
		expect(t, Check(w.in), map[string]int{vUnattributed: 1})
	})
	t.Run("a connection fault can leave every worker's submissions", func(t *testing.T) {
		for _, kind := range []string{faultNetReset, faultNetCommit, faultFailover} {
			w := newWorld()
			for i := range 8 { // AllInFlight is 8, InFlight 4
				unmarked(w, fmt.Sprint("k", i), 1000+i)
			}
			w.fault(kind, 1100)
			expect(t, Check(w.in), nil)
		}
	})
	t.Run("but no more", func(t *testing.T) {
		w := newWorld()
		for i := range 9 {
			unmarked(w, fmt.Sprint("k", i), 1000+i)
		}
		w.window(faultNetBlackhole, 1100, 4100)
		expect(t, Check(w.in), map[string]int{vInFlight: 1})
	})
}
