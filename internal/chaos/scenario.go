//go:build unix

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/oncepush/oncepush/internal/pgfault"
)

// Scenarios are PostgreSQL phases of their own, after the drivers' phases,
// each with one kind of fault and no worker kill: the connection faults
// (netfault.go) and a failover to a standby (failover.go).
const (
	scenarioNet           = "netfaults"
	scenarioFailoverSync  = "failover-sync"
	scenarioFailoverAsync = "failover-async"
)

// pgScenario reports whether a phase's scenario is one of these, which run
// on a PostgreSQL of their own (scenarioDatabase), rather than "" (kills),
// "clock" or "disk", which run on each driver.
func pgScenario(name string) bool {
	return name == scenarioNet || name == scenarioFailoverSync || name == scenarioFailoverAsync
}

// scenarioFlags are the command line's scenario flags.
type scenarioFlags struct {
	net      bool
	failover string // "", sync, async or both
}

func (s *scenarioFlags) register() {
	flag.BoolVar(&s.net, "netfaults", false, "a PostgreSQL phase with faults on the workers' connections (a proxy: resets, lost COMMIT answers, latency, black holes, bandwidth); on in the long mode")
	flag.Var((*failoverFlag)(&s.failover), "failover", "a PostgreSQL phase failing over to a streaming standby: sync, async or both (-failover alone: both); both in the long mode")
}

// failoverFlag is -failover[=sync|async|both].
type failoverFlag string

func (f *failoverFlag) String() string   { return string(*f) }
func (f *failoverFlag) IsBoolFlag() bool { return true } // -failover alone
func (f *failoverFlag) Set(v string) error {
	switch v {
	case "sync", "async", "both":
		*f = failoverFlag(v)
	case "true":
		*f = "both"
	case "false":
		*f = ""
	default:
		return fmt.Errorf("want sync, async or both")
	}
	return nil
}

// scenarios lists the scenarios the options ask for.
func (h *harness) scenarios() []string {
	var out []string
	if h.o.sc.net || (h.o.long && !h.o.scSet) {
		out = append(out, scenarioNet)
	}
	f := h.o.sc.failover
	if f == "" && h.o.long && !h.o.scSet {
		f = "both"
	}
	if f == "sync" || f == "both" {
		out = append(out, scenarioFailoverSync)
	}
	if f == "async" || f == "both" {
		out = append(out, scenarioFailoverAsync)
	}
	return out
}

// scenarioChaos is how long a scenario's faults last: -scenario-duration,
// or a fifth of -duration (two minutes in the long mode), at least a minute.
func (h *harness) scenarioChaos() time.Duration {
	if h.o.scenarioDuration > 0 {
		return h.o.scenarioDuration
	}
	return max(h.o.duration/5, time.Minute)
}

// scenarioPlan is the plan of one scenario's phase.
func (h *harness) scenarioPlan(name string, i int) plan {
	p := h.plan("postgres", name, len(h.o.drivers)+i)
	p.scenario = name
	p.chaos, p.maxChaos = h.scenarioChaos(), h.scenarioChaos()
	p.minSends, p.minKills = 0, 0
	p.killEvery, p.stops, p.apiKills, p.pgRestarts = 0, 0, 0, 0
	p.skip = ""
	if name == scenarioFailoverAsync {
		p.measureOnly = true
	}
	return p
}

// runScenarios runs the scenarios the options ask for.
func (h *harness) runScenarios(ctx context.Context) ([]*phaseResult, error) {
	var out []*phaseResult
	for i, name := range h.scenarios() {
		r, err := h.runPhase(ctx, h.scenarioPlan(name, i))
		if err != nil {
			return out, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// label names a phase: its driver, and its scenario if any.
func (p plan) label() string {
	if p.scenario == "" {
		return p.driver
	}
	return p.driver + "-" + p.scenario
}

// scenarioInterrupts reports whether a scenario's fault kind can stop a run
// between its mark and its record: every connection fault and the failover
// can (a mark committed while its answer was lost).
func scenarioInterrupts(kind string) bool {
	switch kind {
	case faultNetReset, faultNetCommit, faultNetLatency, faultNetBlackhole, faultNetBandwidth, faultFailover:
		return true
	}
	return false
}

// scenarioDatabase makes a scenario's database: a private cluster behind a
// proxy (the workers' URL is the proxy's), or a primary with a standby (one
// multi-host URL for all). It returns the API's URL, the workers' URL and
// what ends it all; the workers' URL, when it differs, goes in
// inj.workerDB.
func (h *harness) scenarioDatabase(ctx context.Context, inj *scenarioState, p plan, dir string) (database string, stop func(), err error) {
	switch p.scenario {
	case scenarioNet:
		c, err := newCluster(ctx, h.ps, dir, h.tmp)
		if err != nil {
			return "", func() {}, err
		}
		if _, err := createDatabase(ctx, c.url("postgres"), "chaos"); err != nil {
			c.stop()
			return "", func() {}, err
		}
		px, via, err := proxied(c.url("chaos"))
		if err != nil {
			c.stop()
			return "", func() {}, err
		}
		inj.proxy, inj.net, inj.workerDB = px, &netState{}, via
		return c.url("chaos"), func() { px.Close(); c.stop() }, nil
	case scenarioFailoverSync, scenarioFailoverAsync:
		r, err := newReplicated(ctx, h.ps, dir, h.tmp, "chaos", p.scenario == scenarioFailoverSync)
		if err != nil {
			if r != nil {
				r.stop()
			}
			return "", func() {}, err
		}
		inj.repl = r
		return r.url("chaos"), r.stop, nil
	}
	return "", func() {}, fmt.Errorf("unknown scenario %q", p.scenario)
}

// scenarioState is what an injector keeps for its scenario.
type scenarioState struct {
	workerDB   string // the workers' database URL, when not the API's
	proxy      *pgfault.Proxy
	net        *netState
	repl       *replicated
	failoverIn time.Duration // no primary took writes for this long
}

// runScenario injects the scenario's faults until ctx ends.
func (inj *injector) runScenario(ctx context.Context, start time.Time) error {
	switch {
	case inj.proxy != nil:
		return inj.runNetFaults(ctx)
	case inj.repl != nil:
		if err := sleepUntil(ctx, start.Add(inj.p.chaos/2)); err != nil {
			return nil
		}
		inj.record(Fault{Kind: faultFailover, At: time.Now(), Target: "primary stopped (immediate), standby promoted"})
		d, err := inj.repl.failover(context.WithoutCancel(ctx))
		inj.mu.Lock()
		inj.failoverIn = d
		inj.mu.Unlock()
		return err
	}
	return nil
}

// scenarioEnd measures, once every delivery is final, what the scenario
// measures then.
func (inj *injector) scenarioEnd() {
	if inj.proxy != nil {
		waiting, idle := inj.proxy.HeldLonger(holeRelease)
		s := inj.netMu()
		s.stillWaiting, s.stillIdle = len(waiting), idle
		inj.unlockNet()
		if len(waiting) > 0 {
			inj.harnessViolation("waited on a silent connection", fmt.Sprintf("%d connections to PostgreSQL went silent more than %s ago, and their clients, having sent on them since, still hold them (%s)",
				len(waiting), holeRelease, inj.dumpOwners(waiting)))
		}
	}
}

// printScenario prints a scenario's own figures.
func printScenario(out io.Writer, r *phaseResult) {
	switch {
	case r.net != nil:
		fmt.Fprintf(out, "  %s\n", r.net.summary(r.faults))
	case r.plan.scenario == scenarioFailoverSync || r.plan.scenario == scenarioFailoverAsync:
		mode := "synchronous (synchronous_standby_names, synchronous_commit on)"
		if r.plan.scenario == scenarioFailoverAsync {
			mode = "asynchronous"
		}
		fmt.Fprintf(out, "  failover: %s replication through a %s lag; no primary for %s\n", mode, replicationLag, r.failoverIn.Round(10*time.Millisecond))
		if r.plan.measureOnly {
			var parts []string
			for _, k := range sortedKeys(r.check.Counts) {
				parts = append(parts, fmt.Sprintf("%d %s", r.check.Counts[k], k))
			}
			if len(parts) == 0 {
				parts = []string{"nothing"}
			}
			fmt.Fprintf(out, "  measured, not asserted: an asynchronous standby can lack commits the primary acknowledged; what this failover lost: %s\n", strings.Join(parts, ", "))
		}
	}
}

// scenarioDir is the directory of a phase.
func (h *harness) phaseDir(p plan) string { return filepath.Join(h.tmp, p.label()) }

// workerDatabase is the URL the workers are given.
func (inj *injector) workerDatabase() string {
	if inj.workerDB != "" {
		return inj.workerDB
	}
	return inj.database
}

// dumpOwners finds the workers that own the given client addresses (from
// /proc) and has each write its goroutines to its log (SIGQUIT, which also
// ends it): the evidence of what waits. It says where to look.
func (inj *injector) dumpOwners(addrs []string) string {
	byPid := map[int]*slot{}
	var pids []int
	for _, s := range inj.slotsNow() {
		if !s.proc.Exited() {
			byPid[s.proc.Pid()] = s
			pids = append(pids, s.proc.Pid())
		}
	}
	owners := socketOwners(pids)
	var out []string
	for _, a := range addrs {
		_, port, _ := net.SplitHostPort(a)
		n, _ := strconv.Atoi(port)
		s := byPid[owners[n]]
		if s == nil {
			out = append(out, a+": no worker owns it")
			continue
		}
		inj.mu.Lock()
		s.busy = true
		inj.mu.Unlock()
		_ = s.proc.Signal(syscall.SIGQUIT)
		_ = s.proc.Wait(10 * time.Second)
		out = append(out, fmt.Sprintf("%s: %s, its goroutines in %s", a, s.proc, s.proc.logPath))
	}
	return strings.Join(out, "; ")
}
