//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The clock scenario (-clock): the wall clock of each worker and of the API
// steps backwards and forwards by up to clockMaxOffset, at random moments,
// each process on its own, so that they disagree with each other and with
// the database. The machine's clock is not touched (PostgreSQL and the rest
// of the machine share it, and Go reads it through the vDSO, out of reach of
// libfaketime): the binary is built with the tag oncepush_failpoints, whose
// internal/wallclock adds an offset the harness writes to a file and
// announces with SIGUSR1, and acknowledges each read in a file of its own.
//
// No process is killed or stopped in this scenario, so every ambiguity and
// every duplicate is the clocks' doing. At the end every offset goes back to
// zero (the clocks are corrected, as NTP would) and every delivery must be
// final within the quiescence bound: clockMaxOffset (a retry scheduled by a
// clock that far ahead falls due that much later) plus two minutes.
const (
	// faultClock is a clock step; it interrupts no send.
	faultClock = "clock-step"
	// clockMaxOffset bounds each process's offset from the true time.
	clockMaxOffset = 3 * time.Minute
	// clockAckWait bounds the wait for a process to acknowledge a step.
	clockAckWait = 10 * time.Second
)

// clockPlan sets a phase up for the clock scenario: steps instead of kills.
func (p *plan) clockPlan(long bool) {
	p.scenario = "clock"
	p.killEvery, p.stops, p.apiKills, p.pgRestarts = 0, 0, 0, 0
	p.minKills, p.minSends = 0, 0
	p.clockEvery = time.Second
	p.chaos = 40 * time.Second
	if long {
		p.chaos = 2 * time.Minute
	}
	p.maxChaos = p.chaos
	p.quiesce = clockMaxOffset + 2*time.Minute
}

// clocks is the harness's side of the offsets: a directory of one file per
// process, and what it wrote there.
type clocks struct {
	dir string

	mu      sync.Mutex
	reads   map[int]int           // pid → reads the process has acknowledged
	offsets map[int]time.Duration // pid → its offset now
	steps   int
	back    int           // steps that moved a clock backwards
	spread  time.Duration // the widest disagreement between two processes seen
	acks    []time.Duration
}

func newClocks(dir string) (*clocks, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &clocks{dir: dir, reads: map[int]int{}, offsets: map[int]time.Duration{}}, nil
}

// env is what every child of the phase gets: where its offset lives.
func (c *clocks) env() []string { return []string{"ONCEPUSH_CLOCK_DIR=" + c.dir} }

// set gives the process offset d and waits until it has read it.
func (c *clocks) set(ctx context.Context, p *proc, d time.Duration) error {
	pid := p.Pid()
	path := filepath.Join(c.dir, strconv.Itoa(pid))
	c.mu.Lock()
	if _, ok := c.reads[pid]; !ok {
		c.reads[pid] = 1 // the read as it started, before it said it was working
	}
	want := c.reads[pid] + 1
	c.mu.Unlock()
	if err := os.WriteFile(path+".tmp", []byte(d.String()+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return err
	}
	start := time.Now()
	if err := p.Signal(syscall.SIGUSR1); err != nil {
		return err
	}
	// Awaited: the process's acknowledgement of this read (a file it
	// rewrites after each read).
	for {
		b, _ := os.ReadFile(path + ".ack")
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n >= want {
			break
		}
		if p.Exited() {
			return fmt.Errorf("%s exited before it read its clock offset; its log: %s", p, p.logPath)
		}
		if time.Since(start) > clockAckWait {
			return fmt.Errorf("%s did not acknowledge its clock offset within %s: is it built with -tags oncepush_failpoints? its log: %s",
				p, clockAckWait, p.logPath)
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads[pid] = want
	c.acks = append(c.acks, time.Since(start))
	return nil
}

// step moves one process's clock and notes the step.
func (c *clocks) step(ctx context.Context, p *proc, d time.Duration) error {
	if err := c.set(ctx, p, d); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d < c.offsets[p.Pid()] {
		c.back++
	}
	c.offsets[p.Pid()] = d
	c.steps++
	lo, hi := time.Duration(0), time.Duration(0) // the database's clock is true time
	for _, o := range c.offsets {
		lo, hi = min(lo, o), max(hi, o)
	}
	c.spread = max(c.spread, hi-lo)
	return nil
}

// stepClocks steps a random process's clock (a worker's or the API's) about
// every clockEvery until ctx ends, then sets every clock right again.
func (inj *injector) stepClocks(ctx context.Context) error {
	c := inj.clocks
	defer func() {
		// The clocks are corrected: every live process back to offset 0.
		wctx := context.WithoutCancel(ctx)
		for _, p := range inj.clockProcs() {
			c.mu.Lock()
			off := c.offsets[p.Pid()]
			c.mu.Unlock()
			if off != 0 && !p.Exited() {
				_ = c.step(wctx, p, 0)
			}
		}
	}()
	for {
		inj.mu.Lock()
		wait := inj.p.clockEvery/2 + time.Duration(inj.rng.Int64N(int64(inj.p.clockEvery)))
		inj.mu.Unlock()
		if err := sleep(ctx, wait); err != nil {
			return nil
		}
		ps := inj.clockProcs()
		inj.mu.Lock()
		p := ps[inj.rng.IntN(len(ps))]
		// Whole seconds from −max to +max; now and then the true time.
		d := time.Duration(inj.rng.Int64N(int64(2*clockMaxOffset/time.Second)+1))*time.Second - clockMaxOffset
		if inj.rng.IntN(8) == 0 {
			d = 0
		}
		inj.mu.Unlock()
		if p.Exited() {
			continue // noted as a crash by the checks of the phase's end
		}
		inj.record(Fault{Kind: faultClock, At: time.Now(), Target: fmt.Sprintf("%s to %+v", p, d)})
		if err := c.step(ctx, p, d); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// clockProcs are the processes whose clocks step: the workers and the API.
func (inj *injector) clockProcs() []*proc {
	var ps []*proc
	for _, s := range inj.slotsNow() {
		ps = append(ps, s.proc)
	}
	return append(ps, inj.api.proc.Load())
}

// ledgerSkew is the phase's Limits.ClockSkew: on SQLite the ledger's times
// are read from the processes' clocks, each up to clockMaxOffset off; on
// PostgreSQL from the database's now(), the harness's clock.
func (c *clocks) ledgerSkew(driver string) time.Duration {
	if c == nil || driver != "sqlite" {
		return 0
	}
	return clockMaxOffset
}

// printClock prints what the clock scenario did.
func printClock(out io.Writer, r *phaseResult) {
	c := r.clocks
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var slowest time.Duration
	for _, a := range c.acks {
		slowest = max(slowest, a)
	}
	fmt.Fprintf(out, "  clock steps: %d (%d backwards), offsets within ±%s, widest disagreement between two processes %s; slowest acknowledgement %s\n",
		c.steps, c.back, clockMaxOffset, c.spread, ms(slowest))
}
