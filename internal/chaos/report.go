//go:build unix

package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// printSummary prints the one table (per driver and policy), then what
// each phase injected and measured, then every broken promise.
func printSummary(out io.Writer, results []*phaseResult, total time.Duration) {
	fmt.Fprintf(out, "\nchaos: results after %s\n\n", total.Round(time.Second))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "driver\tpolicy\tattempted\tacknowledged\tdeliveries\tpairs\tok\tlost\tdup (marked)\tdup (unmarked)\tunexpected\tambiguous\tnever received\t")
	for _, r := range results {
		for _, row := range r.check.Rows {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", r.plan.label(), row.Policy,
				row.Attempted, row.Acknowledged, row.Deliveries, row.Pairs, row.OK, row.Lost, row.DupMarked,
				row.DupUnmarked, row.Unexpected, row.Ambiguous, row.NeverReceived)
		}
	}
	_ = tw.Flush()
	fmt.Fprintln(out, "\n  attempted, acknowledged: notifications (distinct keys) posted, and answered 202; pairs: (delivery, device) rows of the ledger;")
	fmt.Fprintln(out, "  dup: pairs the provider may have accepted more than once (marked: with an ambiguous mark for every extra submission);")
	fmt.Fprintln(out, "  never received: submissions the ledger counted that the provider never read whole.")
	for _, r := range results {
		fmt.Fprintln(out)
		printPhase(out, r)
	}
}

func printPhase(out io.Writer, r *phaseResult) {
	c := r.check
	count := func(kind string) int {
		n := 0
		for _, f := range r.faults {
			if f.Kind == kind {
				n++
			}
		}
		return n
	}
	fmt.Fprintf(out, "%s: %s in all; faults for %s: %d worker kills, %d SIGSTOP (%s each), %d API kills, %d PostgreSQL restarts",
		r.plan.label(), r.elapsed.Round(time.Second), r.chaos.Round(time.Second), count(faultKill), count(faultStop),
		r.stopFor.Round(100*time.Millisecond), count(faultAPIKill), count(faultPGRestart))
	if r.pgDown > 0 {
		fmt.Fprintf(out, " (down %s; %d worker starts refused meanwhile)", r.pgDown.Round(100*time.Millisecond), r.refusedStarts)
	}
	fmt.Fprintf(out, "; quiescence %s\n", r.quiesce.Round(100*time.Millisecond))
	printScenario(out, r)
	printClock(out, r)
	printDisk(out, r)
	if r.stopStalled {
		fmt.Fprintf(out, "  the SIGSTOP landed inside a write transaction: no request reached the provider for %s, and the worker was let go early\n", stallQuiet)
	}

	held, maxHeld, withHeld := 0, 0, 0
	for _, f := range r.faults {
		if f.Kind != faultKill && f.Kind != faultStop {
			continue
		}
		n := 0
		for _, v := range f.Held {
			n += v
		}
		held += n
		maxHeld = max(maxHeld, n)
		if n > 0 {
			withHeld++
		}
	}
	workerFaults := count(faultKill) + count(faultStop)
	if workerFaults > 0 {
		fmt.Fprintf(out, "  requests held at the fault for the victim: %d of %d faults, mean %.1f, max %d\n",
			withHeld, workerFaults, float64(held)/float64(workerFaults), maxHeld)
	}
	fmt.Fprintf(out, "  requests received %d, submissions counted %d: %d never received", c.Received, c.Submissions, c.NeverReceived)
	if c.NeverReceived > 0 {
		most := 0
		for _, pf := range c.PerFault {
			for _, n := range pf.NeverReceived {
				most = max(most, n)
			}
		}
		fmt.Fprintf(out, ", charged to %d of the faults, at most %d per fault and transport (a killed worker can have %d in flight)",
			len(c.PerFault), most, engineConcurrentSends)
	}
	fmt.Fprintln(out)
	if len(c.Window) > 0 {
		mw := mean(c.Window)
		fmt.Fprintf(out, "  ambiguous window (provider read → ledger record) over %d pairs: p50 %s, p99 %s, max %s, mean %s\n",
			len(c.Window), ms(percentile(c.Window, 50)), ms(percentile(c.Window, 99)), ms(c.Window[len(c.Window)-1]), ms(mw))
		if workerFaults > 0 && r.chaos > 0 {
			// Little's law: a worker has, at any moment, its rate times the
			// mean window of pairs read by the provider and not yet recorded.
			rate := float64(c.Received) / r.chaos.Seconds() / float64(max(r.workers(), 1))
			predicted := rate * mw.Seconds()
			share := 0.0
			if c.Pairs > 0 {
				share = float64(c.ResendPairs) / float64(c.Pairs)
			}
			fmt.Fprintf(out, "  per worker fault: %.1f pairs made ambiguous with every request received (the window predicts %.1f: %.0f requests/s per worker × %s), %.1f resend duplicates (predicts %.1f)\n",
				float64(c.FaultAmbiguous)/float64(workerFaults), predicted, rate, ms(mw),
				float64(c.FaultDuplicates)/float64(workerFaults), predicted*share)
		}
	}
	fmt.Fprintf(out, "  resend duplicates the fake's own answers explain (a reset, an answer held past the send timeout): %d; records refused for a lost lease: %d\n",
		c.AnswerDuplicates, r.leaseLost)
	if c.UnsettledGone > 0 {
		fmt.Fprintf(out, "  pairs left pending by a final delivery, their device deleted meanwhile (its token answered invalid): %d\n", c.UnsettledGone)
	}
	for _, t := range r.targets {
		fmt.Fprintf(out, "  TARGET NOT MET: %s\n", t)
	}
	vs := append(append([]Violation(nil), c.Violations...), r.harness...)
	if len(vs) == 0 {
		fmt.Fprintln(out, "  no violation")
		return
	}
	fmt.Fprintf(out, "  VIOLATIONS (seed %d):\n", r.plan.seed)
	for _, v := range vs {
		fmt.Fprintf(out, "    %s: %s\n", v.Kind, strings.TrimSpace(v.Detail))
	}
	fmt.Fprintln(out, "  the faults, for the evidence:")
	printFaults(out, r.faults, "    ")
}

// printFaults lists faults with their times and what the fake held.
func printFaults(out io.Writer, faults []Fault, indent string) {
	for _, f := range faults {
		fmt.Fprintf(out, "%s%s %s %s, held %v\n", indent, f.At.UTC().Format("15:04:05.000000"), f.Kind, f.Target, f.Held)
	}
}

func (r *phaseResult) workers() int { return r.nWorkers }

// ms prints a duration in milliseconds below 10 s.
func ms(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return d.Round(100 * time.Millisecond).String()
}
