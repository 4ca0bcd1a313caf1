//go:build unix

// Command chaos attacks oncepush's two promises — each (notification,
// device) pair submitted to its provider at most once under the system's own
// retry model, and every delivery ending in a recorded outcome — from the
// outside, against the real binary.
//
// It builds cmd/oncepush, starts 'oncepush fake-providers', one API process
// ('oncepush serve --no-workers') and several 'oncepush work' processes on a
// fresh database (SQLite: one file shared by every process; PostgreSQL: a
// database of its own), registers FCM, APNs, Web Push and RuStore devices
// over the API, and posts notifications — some to several recipients and
// devices, some posted again under the same key, some of those concurrently,
// under both ambiguity policies. Meanwhile it SIGKILLs workers while the fake
// holds their requests, SIGSTOPs one past its lease, SIGKILLs the API
// mid-request, crash-restarts PostgreSQL (a private cluster, long mode), and
// the fake answers a mix of 503, 429 with Retry-After, invalid tokens,
// latency past the send timeout, and accept-then-reset.
//
// Once every delivery is final it compares the fake's own record of every
// request it read with the ledger read through the API (check.go), prints
// one table per driver and policy, and exits 1 on any broken promise.
//
//	go run ./internal/chaos -short        # about a minute: both drivers, a few kills (scripts/test runs it)
//	go run ./internal/chaos               # the long run: ≥ 10 min, ≥ 100 kills, ≥ 100,000 sends, a PostgreSQL restart
//	go run ./internal/chaos -driver sqlite -duration 2m -workers 4 -seed 7 -keep
//	go run ./internal/chaos -clock        # only the clock scenario (clock.go): each process's wall clock steps ±3 min
//	go run ./internal/chaos -disk         # only the disk scenario (disk.go): SQLite's tmpfs filled and freed (root)
//	go run ./internal/chaos -driver none -netfaults -failover -scenario-duration 3m
//
// The last line runs only the scenarios (scenario.go), PostgreSQL phases
// of their own that the long mode runs after the drivers': faults on the
// workers' connections through a proxy (netfault.go), and a failover to a
// streaming standby, synchronous and asynchronous (failover.go).
//
// PostgreSQL: the short mode creates (and drops) a database on the server
// scripts/test uses ($ONCEPUSH_TEST_DATABASE_URL, default
// postgres://postgres@127.0.0.1:5432/postgres); a run that restarts
// PostgreSQL initdbs a private cluster in a temporary directory instead.
// It runs on Unix (signals), fully on Linux: it reads /proc to tell which
// worker the fake is holding requests for.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// options are the command line.
type options struct {
	short, long bool
	drivers     []string
	seed        uint64
	duration    time.Duration // faults injected, over all drivers
	workers     int
	keep        bool
	verbose     bool
	bin         string
	killEvery   time.Duration
	minSends    int // long mode: requests the providers must have received, over all drivers
	minKills    int
	pgRestart   bool
	// The scenarios (scenario.go): asked for, and whether any flag of theirs
	// was given (otherwise the long mode runs them all).
	sc               scenarioFlags
	scSet            bool
	scenarioDuration time.Duration
	// scenarios run in order, each once per driver: "" (kills, stops,
	// restarts), "clock" (clock.go).
	scenarios []string
}

func main() {
	os.Exit(run())
}

func run() int {
	var o options
	var driver string
	flag.BoolVar(&o.short, "short", false, "the short mode: about a minute on 2 cores, both drivers, a few kills, one SIGSTOP and one API kill per driver, no PostgreSQL restart")
	flag.BoolVar(&o.long, "long", false, "the long mode (the default): ≥ 10 minutes, ≥ 100 kills, ≥ 100,000 sends, one PostgreSQL restart, two SIGSTOPs")
	flag.StringVar(&driver, "driver", "both", "sqlite, postgres, both, or none (the scenarios alone)")
	flag.Uint64Var(&o.seed, "seed", uint64(time.Now().UnixNano()%1e6), "seed of the workload, the fake's answers and the choice of victims (the timing of faults is the machine's)")
	flag.DurationVar(&o.duration, "duration", 0, "how long faults are injected, over all drivers (default 30s short, 10m long)")
	flag.IntVar(&o.workers, "workers", 3, "'oncepush work' processes per driver")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (logs, databases, the fake's credentials); it is also kept when a check fails")
	flag.BoolVar(&o.verbose, "v", false, "print every fault as it is injected")
	flag.StringVar(&o.bin, "bin", "", "an oncepush binary to use instead of building ./cmd/oncepush (the clock scenario needs one built with -tags oncepush_failpoints)")
	flag.DurationVar(&o.killEvery, "kill-every", 0, "time between worker kills (default 4s short, 3s long)")
	flag.IntVar(&o.minSends, "min-sends", -1, "run until the providers received this many requests (default 0 short, 100000 long), up to twice -duration")
	flag.IntVar(&o.minKills, "min-kills", -1, "run until this many workers were killed (default 0 short, 100 long), up to twice -duration")
	flag.BoolVar(&o.pgRestart, "pg-restart", false, "crash-restart PostgreSQL once (a private cluster); on by default in the long mode")
	o.sc.register()
	flag.DurationVar(&o.scenarioDuration, "scenario-duration", 0, "how long each scenario's faults last (default a fifth of -duration, at least a minute)")
	var clock, disk bool
	flag.BoolVar(&clock, "clock", false, "run the clock scenario: each process's wall clock steps by up to ±3 minutes (the long mode runs it after the kills)")
	flag.BoolVar(&disk, "disk", false, "run the disk scenario: SQLite on a tmpfs filled and freed mid-run (needs root; the long mode runs it last)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "chaos: unexpected argument %q\n", flag.Arg(0))
		return 2
	}
	if o.short && o.long {
		fmt.Fprintln(os.Stderr, "chaos: -short and -long exclude each other")
		return 2
	}
	o.long = !o.short
	switch driver {
	case "both":
		o.drivers = []string{"sqlite", "postgres"}
	case "sqlite", "postgres":
		o.drivers = []string{driver}
	case "none": // the scenarios alone
	default:
		fmt.Fprintf(os.Stderr, "chaos: -driver %q: want sqlite, postgres, both or none\n", driver)
		return 2
	}
	if o.workers < 2 || o.workers > 16 {
		fmt.Fprintln(os.Stderr, "chaos: -workers must be from 2 to 16 (one is killed while the others recover its work)")
		return 2
	}
	pgRestartSet := false
	flag.Visit(func(f *flag.Flag) {
		pgRestartSet = pgRestartSet || f.Name == "pg-restart"
		o.scSet = o.scSet || f.Name == "netfaults" || f.Name == "failover"
	})
	// A scenario asked for by name runs alone: -clock does not bring the
	// long mode's PostgreSQL scenarios along, nor -netfaults the clock.
	o.scSet = o.scSet || clock || disk
	if o.long {
		o.duration = cmpOr(o.duration, 10*time.Minute)
		o.killEvery = cmpOr(o.killEvery, 3*time.Second)
		if o.minSends < 0 {
			o.minSends = 100000
		}
		if o.minKills < 0 {
			o.minKills = 100
		}
		if !pgRestartSet {
			o.pgRestart = true
		}
	} else {
		o.duration = cmpOr(o.duration, 30*time.Second)
		o.killEvery = cmpOr(o.killEvery, 4*time.Second)
	}
	o.minSends, o.minKills = max(o.minSends, 0), max(o.minKills, 0)
	switch {
	case clock || disk:
		if clock {
			o.scenarios = append(o.scenarios, "clock")
		}
		if disk {
			o.scenarios = append(o.scenarios, "disk")
		}
	case o.long && !o.scSet:
		o.scenarios = []string{"", "clock", "disk"}
	default:
		o.scenarios = []string{""}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A backstop: every wait of the harness has a bound of its own.
	ctx, cancel := context.WithTimeout(ctx, 3*o.duration+15*time.Minute)
	defer cancel()
	start := time.Now()
	h, err := newHarness(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		return 1
	}
	failed := false
	defer func() {
		h.ps.killAll()
		if o.keep || failed {
			fmt.Printf("chaos: kept %s (logs in %s)\n", h.tmp, h.ps.logs)
		} else {
			_ = os.RemoveAll(h.tmp)
		}
	}()
	mode := "long"
	if o.short {
		mode = "short"
	}
	fmt.Printf("chaos: %s mode, seed %d, drivers %s, %d workers each, faults for %s\n",
		mode, o.seed, strings.Join(o.drivers, "+"), o.workers, o.duration)
	if err := h.build(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		failed = true
		return 1
	}
	var results []*phaseResult
	for _, scenario := range o.scenarios {
		for i, drv := range o.drivers {
			p := h.plan(drv, scenario, i)
			if p.skip != "" {
				fmt.Printf("chaos: WARNING: %s SKIPPED: %s\n", p.label(), p.skip)
				continue
			}
			r, err := h.runPhase(ctx, p)
			if err != nil {
				fmt.Fprintf(os.Stderr, "chaos: %s: %v\n", p.label(), err)
				failed = true
				return 1
			}
			results = append(results, r)
		}
	}
	rs, err := h.runScenarios(ctx)
	results = append(results, rs...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		failed = true
		return 1
	}
	printSummary(os.Stdout, results, time.Since(start))
	for _, r := range results {
		if r.failed() {
			failed = true
		}
	}
	if failed {
		fmt.Println("chaos: FAIL")
		return 1
	}
	fmt.Printf("chaos: PASS in %s\n", time.Since(start).Round(time.Second))
	return 0
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// harness is one invocation: its temporary directory, its children, the
// binary it tests.
type harness struct {
	o   options
	tmp string
	ps  *procs
	bin string
}

func newHarness(o options) (*harness, error) {
	tmp, err := os.MkdirTemp("", "oncepush-chaos-")
	if err != nil {
		return nil, err
	}
	logs := filepath.Join(tmp, "logs")
	if err := os.Mkdir(logs, 0o700); err != nil {
		return nil, err
	}
	return &harness{o: o, tmp: tmp, ps: &procs{logs: logs}}, nil
}

// build compiles the oncepush command (without the race detector: its
// children are many, and the machine has two cores), with the test tag
// oncepush_failpoints: no failpoint is armed, but the clock scenario steps
// the processes' wall clocks (internal/wallclock).
func (h *harness) build(ctx context.Context) error {
	if h.o.bin != "" {
		h.bin = h.o.bin
		return nil
	}
	h.bin = filepath.Join(h.tmp, "oncepush")
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "oncepush_failpoints", "-o", h.bin, "github.com/oncepush/oncepush/cmd/oncepush")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/oncepush: %w\n%s", err, out)
	}
	fmt.Printf("chaos: built the binary in %s\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}
