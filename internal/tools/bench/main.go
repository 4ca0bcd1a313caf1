// Command bench measures oncepush end to end beside gorush, in one run on
// one machine, and prints the ratios (issue 11; docs/benchmarks.md, "End to
// end against gorush"):
//
//   - the ledger ceiling: the engine's bare claim + record loop in pgbench,
//     rows/s at batch 100 and 500, on a scratch PostgreSQL database;
//   - oncepush (`oncepush serve`, built once or given with -oncepush) on
//     PostgreSQL and on SQLite: single-token sends with the fake answering at
//     once and after 50 ms, a 500-token fan-out with the server's peak RSS,
//     POST → provider latency at a fixed open-loop rate, the workers alone
//     draining a queue, and the API at saturation;
//   - gorush, when given -gorush PATH (a binary built from its public
//     source), on the same loads.
//
// Every system is its own process and sends to one `oncepush fake-providers`
// process. Everything the tool starts is stopped, and its scratch databases
// dropped, at exit, on an error and on Ctrl-C.
//
//	go run ./internal/tools/bench -gorush /path/to/gorush
//	go run ./internal/tools/bench -quick          # a tiny run, as its test does
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

type options struct {
	oncepush, gorush, pgbench string
	postgres                  string
	drivers                   []string
	count, conns, runs        int
	latency                   time.Duration
	fanoutTokens, fanoutSends int
	fanoutConns               int
	rate                      int
	rateFor                   time.Duration
	saturateFor               time.Duration
	drainCount                int
	devices                   int
	ceilingRows               int
	ceilingBatches            []int
	pgbenchClients            int
	gorushWorkers             int
	history                   bool
	historyFinished           int
	historyFuture             int
	timeout                   time.Duration
	quick                     bool
	jsonPath                  string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// runMain is the command: 0 when every case ran, 1 when one failed (the
// table says which), 2 for a bad flag.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rep, err := run(ctx, o, stderr)
	if rep != nil {
		rep.print(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	if rep.failed() {
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.oncepush, "oncepush", "", "oncepush binary to run (default: go build ./cmd/oncepush into a temporary directory)")
	fs.StringVar(&o.gorush, "gorush", "", "gorush binary built from its public source (default: gorush is not run)")
	fs.StringVar(&o.pgbench, "pgbench", "", "pgbench binary (default: on PATH, else /usr/lib/postgresql/*/bin/pgbench)")
	fs.StringVar(&o.postgres, "postgres", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "PostgreSQL server to create the scratch databases on (they are dropped at exit)")
	drivers := fs.String("drivers", "postgres,sqlite", "oncepush's databases to run, comma-separated: postgres, sqlite")
	fs.IntVar(&o.count, "count", 20000, "single-token notifications per run")
	fs.IntVar(&o.conns, "conns", 32, "client connections (single-token and saturation cases)")
	fs.IntVar(&o.runs, "runs", 3, "runs of each single-token case (the median is reported)")
	fs.DurationVar(&o.latency, "latency", 50*time.Millisecond, "the fake's answer latency in the slow-provider cases")
	fs.IntVar(&o.fanoutTokens, "fanout-tokens", 500, "devices per notification in the fan-out case")
	fs.IntVar(&o.fanoutSends, "fanout-sends", 100000, "sends in the fan-out case (a multiple of -fanout-tokens)")
	fs.IntVar(&o.fanoutConns, "fanout-conns", 8, "client connections in the fan-out case")
	fs.IntVar(&o.rate, "rate", 1000, "notifications per second in the open-loop latency cases")
	fs.DurationVar(&o.rateFor, "rate-for", 10*time.Second, "how long the open-loop latency cases send")
	fs.DurationVar(&o.saturateFor, "saturate-for", 10*time.Second, "how long the saturation case sends")
	fs.IntVar(&o.drainCount, "drain", 20000, "notifications queued for the workers-alone case")
	fs.IntVar(&o.devices, "devices", 2000, "devices (one FCM token per recipient) registered before the cases")
	fs.IntVar(&o.ceilingRows, "ceiling-rows", 200000, "rows the ledger ceiling claims and records at each batch size")
	batches := fs.String("ceiling-batches", "100,500", "batch sizes of the ledger ceiling")
	fs.IntVar(&o.pgbenchClients, "pgbench-clients", 2, "pgbench clients of the ledger ceiling")
	fs.IntVar(&o.gorushWorkers, "gorush-workers", 256, "gorush's core.worker_num")
	fs.BoolVar(&o.history, "history", false, "also rerun the single-token case on PostgreSQL with a ledger history (takes minutes)")
	fs.IntVar(&o.historyFinished, "history-finished", 5000000, "finished deliveries of the history (-history)")
	fs.IntVar(&o.historyFuture, "history-future", 1000000, "future-scheduled deliveries of the history (-history)")
	fs.DurationVar(&o.timeout, "timeout", 45*time.Minute, "the whole run's bound")
	fs.BoolVar(&o.quick, "quick", false, "a tiny run (200 notifications, one run per case, no history): checks that the tool works")
	fs.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.quick {
		quick := map[string]func(){
			"count": func() { o.count = 200 }, "runs": func() { o.runs = 1 }, "fanout-sends": func() { o.fanoutSends = 1000 },
			"rate-for":     func() { o.rateFor = 200 * time.Millisecond },
			"saturate-for": func() { o.saturateFor = 500 * time.Millisecond },
			"drain":        func() { o.drainCount = 200 }, "devices": func() { o.devices = 500 },
			"ceiling-rows": func() { o.ceilingRows = 2000 }, "timeout": func() { o.timeout = 5 * time.Minute },
		}
		for name, apply := range quick {
			if !set[name] {
				apply()
			}
		}
		o.history = false
	}
	for _, d := range strings.Split(*drivers, ",") {
		switch d = strings.TrimSpace(d); d {
		case "postgres", "sqlite":
			o.drivers = append(o.drivers, d)
		case "":
		default:
			return nil, fmt.Errorf("-drivers: %q is not postgres or sqlite", d)
		}
	}
	for _, b := range strings.Split(*batches, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(b), &n); err != nil || n < 1 {
			return nil, fmt.Errorf("-ceiling-batches: %q is not a positive number", b)
		}
		o.ceilingBatches = append(o.ceilingBatches, n)
	}
	for name, v := range map[string]int{"count": o.count, "conns": o.conns, "runs": o.runs, "fanout-tokens": o.fanoutTokens,
		"fanout-conns": o.fanoutConns, "rate": o.rate, "drain": o.drainCount, "devices": o.devices,
		"ceiling-rows": o.ceilingRows, "pgbench-clients": o.pgbenchClients, "gorush-workers": o.gorushWorkers} {
		if v < 1 {
			return nil, fmt.Errorf("-%s: must be at least 1, not %d", name, v)
		}
	}
	if o.fanoutSends < o.fanoutTokens || o.fanoutSends%o.fanoutTokens != 0 {
		return nil, fmt.Errorf("-fanout-sends: %d is not a multiple of -fanout-tokens %d", o.fanoutSends, o.fanoutTokens)
	}
	if o.devices < o.fanoutTokens {
		return nil, fmt.Errorf("-devices: %d is fewer than -fanout-tokens %d (a notification's devices must differ)", o.devices, o.fanoutTokens)
	}
	if o.rateFor < time.Second/time.Duration(o.rate) {
		return nil, fmt.Errorf("-rate-for: %s sends nothing at %d/s", o.rateFor, o.rate)
	}
	return o, nil
}

// run runs every case and returns the report; it stops what it started
// before it returns.
func run(ctx context.Context, o *options, log io.Writer) (rep *report, err error) {
	td := &teardown{}
	defer td.run()
	dir, err := os.MkdirTemp("", "oncepush-bench-")
	if err != nil {
		return nil, err
	}
	td.add(func() { os.RemoveAll(dir) })
	rep = &report{Options: o.summary(), Machine: machine(ctx, o), TempDir: dir}
	if o.jsonPath != "" {
		defer func() {
			b, _ := json.MarshalIndent(rep, "", "  ")
			if werr := os.WriteFile(o.jsonPath, append(b, '\n'), 0o644); werr != nil && err == nil {
				err = fmt.Errorf("-json: %w", werr)
			}
		}()
	}

	bin := o.oncepush
	if bin == "" {
		bin = filepath.Join(dir, "oncepush")
		fmt.Fprintln(log, "bench: building oncepush…")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/oncepush/oncepush/cmd/oncepush").CombinedOutput(); err != nil {
			return rep, fmt.Errorf("go build ./cmd/oncepush: %v\n%s", err, out)
		}
	}

	fmt.Fprintln(log, "bench: ledger ceiling (pgbench)…")
	if rep.Ceiling, err = ceiling(ctx, td, o, dir, rep); err != nil {
		rep.CeilingError = err.Error()
		fmt.Fprintln(log, "bench: ceiling:", err)
	}
	if slices.Contains(o.drivers, "postgres") {
		fmt.Fprintln(log, "bench: insert floor…")
		if rep.Floor, err = floor(ctx, td, o, rep); err != nil {
			rep.FloorError = err.Error()
			fmt.Fprintln(log, "bench: insert floor:", err)
		}
	}
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}

	fakeDir := filepath.Join(dir, "fake")
	f, err := startFake(ctx, td, bin, fakeDir)
	if err != nil {
		return rep, err
	}
	rep.pids = append(rep.pids, f.proc.pid())
	runID := fmt.Sprintf("%d", time.Now().UnixNano())

	if o.gorush != "" {
		rep.Machine.Gorush = gorushVersion(ctx, o.gorush)
		col := &column{Name: "gorush", Errors: map[string]string{}}
		rep.Columns = append(rep.Columns, col)
		fmt.Fprintln(log, "bench: gorush…")
		g, err := startGorush(ctx, td, o.gorush, dir, f, o.gorushWorkers, 4*max(o.count, o.fanoutSends/o.fanoutTokens, o.rate*int(o.rateFor/time.Second)+o.rate))
		if err != nil {
			col.Errors["start"] = err.Error()
		} else {
			rep.pids = append(rep.pids, g.proc.pid())
			commonCases(ctx, o, g.system(o.devices, runID), f, col, log)
			g.proc.stop()
		}
	} else {
		rep.Columns = append(rep.Columns, &column{Name: "gorush", NotRun: notRunGorush})
	}

	for _, driver := range o.drivers {
		col := &column{Name: "oncepush " + driver, Errors: map[string]string{}}
		rep.Columns = append(rep.Columns, col)
		if err := benchOncepush(ctx, td, o, bin, dir, driver, f, runID, col, rep, log); err != nil {
			col.Errors["start"] = err.Error()
			fmt.Fprintf(log, "bench: %s: %v\n", col.Name, err)
		}
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	return rep, nil
}

// benchOncepush runs every case on one database.
func benchOncepush(ctx context.Context, td *teardown, o *options, bin, dir, driver string, f *fake, runID string, col *column, rep *report, log io.Writer) error {
	fmt.Fprintf(log, "bench: %s…\n", col.Name)
	var database string
	if driver == "postgres" {
		db, err := scratchDatabase(ctx, td, o.postgres, "oncepush_bench_")
		if err != nil {
			return err
		}
		database = db
		rep.databases = append(rep.databases, db)
	} else {
		database = filepath.Join(dir, "bench.db")
	}
	started := time.Now().Add(-time.Second) // the server's clock may read a little behind ours
	srv, err := newOncepush(ctx, td, bin, database, f)
	if err != nil {
		return err
	}
	if err := srv.start(ctx, true); err != nil {
		return err
	}
	defer srv.stop()
	rep.pids = append(rep.pids, srv.proc.pid())
	names, err := srv.register(ctx, o.devices)
	if err != nil {
		return err
	}
	s := srv.system(col.Name, names, runID+"-"+driver, started)
	commonCases(ctx, o, s, f, col, log)

	fmt.Fprintf(log, "bench: %s: saturation for %s…\n", col.Name, o.saturateFor)
	if sat, err := saturate(ctx, s, f, o.saturateFor, o.conns); err != nil {
		col.Errors["saturation"] = err.Error()
	} else {
		col.Saturation = sat
	}
	fmt.Fprintf(log, "bench: %s: workers alone, %d queued…\n", col.Name, o.drainCount)
	col.CPUDrain = &cpuUse{}
	if d, err := srv.drain(ctx, s, f, o.drainCount, o.conns, col.CPUDrain); err != nil {
		col.Errors["drain"] = err.Error()
	} else {
		col.Drain = d
	}
	rep.pids = append(rep.pids, srv.proc.pid())
	if o.history && driver == "postgres" {
		fmt.Fprintf(log, "bench: %s: filling the history (%d finished, %d future)…\n", col.Name, o.historyFinished, o.historyFuture)
		if err := fillHistory(ctx, database, o.historyFinished, o.historyFuture); err != nil {
			col.Errors["history"] = err.Error()
		} else {
			col.CPUHistory = &cpuUse{}
			col.History = repeat(ctx, o.runs, col, "history", func() (float64, error) {
				return closedLoop(ctx, s, f, o.count, 1, o.conns, 0, col.CPUHistory)
			})
		}
	}
	return nil
}

// commonCases are the cases gorush and oncepush share.
func commonCases(ctx context.Context, o *options, s *system, f *fake, col *column, log io.Writer) {
	// Not measured: connections, OAuth tokens, caches and the Go heap warm
	// up first, for every system alike.
	if _, err := closedLoop(ctx, s, f, min(o.count, 200), 1, o.conns, 0, nil); err != nil {
		col.Errors["warm-up"] = err.Error()
		return
	}
	fmt.Fprintf(log, "bench: %s: %d single-token notifications ×%d, fake at once…\n", col.Name, o.count, o.runs)
	col.CPUSingle = &cpuUse{}
	col.SingleAtOnce = repeat(ctx, o.runs, col, "single", func() (float64, error) {
		return closedLoop(ctx, s, f, o.count, 1, o.conns, 0, col.CPUSingle)
	})
	fmt.Fprintf(log, "bench: %s: the same, fake after %s…\n", col.Name, o.latency)
	col.SingleSlow = repeat(ctx, o.runs, col, "single-slow", func() (float64, error) {
		return closedLoop(ctx, s, f, o.count, 1, o.conns, o.latency, nil)
	})
	fmt.Fprintf(log, "bench: %s: fan-out, %d sends of %d devices…\n", col.Name, o.fanoutSends, o.fanoutTokens)
	col.CPUFanout = &cpuUse{}
	if err := resetPeakRSS(s.proc().pid()); err != nil {
		col.Errors["fanout"] = err.Error()
	} else if v, err := closedLoop(ctx, s, f, o.fanoutSends/o.fanoutTokens, o.fanoutTokens, o.fanoutConns, 0, col.CPUFanout); err != nil {
		col.Errors["fanout"] = err.Error()
	} else {
		col.Fanout = v
		if col.FanoutRSSMiB, err = peakRSS(s.proc().pid()); err != nil {
			col.Errors["fanout"] = err.Error()
		}
	}
	for _, c := range []struct {
		name    string
		latency time.Duration
		out     **latencies
	}{{"latency", 0, &col.LatencyAtOnce}, {"latency-slow", o.latency, &col.LatencySlow}} {
		fmt.Fprintf(log, "bench: %s: open loop at %d/s for %s, fake after %s…\n", col.Name, o.rate, o.rateFor, c.latency)
		l, err := openLoop(ctx, s, f, o.rate, o.rateFor, c.latency)
		if err != nil {
			col.Errors[c.name] = err.Error()
			continue
		}
		*c.out = l
	}
}

// repeat runs a throughput case n times; a failed run is recorded under
// name and ends the repetition.
func repeat(ctx context.Context, n int, col *column, name string, f func() (float64, error)) []float64 {
	var out []float64
	for range n {
		if ctx.Err() != nil {
			col.Errors[name] = ctx.Err().Error()
			break
		}
		v, err := f()
		if err != nil {
			col.Errors[name] = err.Error()
			break
		}
		out = append(out, v)
	}
	return out
}
