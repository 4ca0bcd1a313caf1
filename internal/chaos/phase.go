//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The engine settings every process of a run gets (engine.* in the
// configuration file). The lease is short so that work a kill strands is
// recovered within the run; the backoff is short so that retries end within
// it.
const (
	engineBatchSize       = 50
	engineWorkers         = 2 // runs per process
	engineConcurrentSends = 16
	engineRunBudget       = 2 * time.Second
	engineSendTimeout     = 2 * time.Second
	engineLease           = 6 * time.Second
	engineMaxAttempts     = 6
	engineBackoffMin      = 250 * time.Millisecond
	engineBackoffMax      = 2 * time.Second
	enginePollInterval    = 200 * time.Millisecond
	// pgPoolMaxConns keeps the processes polite on a shared server.
	pgPoolMaxConns = 6
)

// plan is what one driver's phase does.
type plan struct {
	driver     string
	scenario   string // "" for kills, stops and restarts; "clock" (clock.go), "disk" (disk.go), or a PostgreSQL scenario (scenario.go)
	skip       string // why the driver cannot run here; empty: it runs
	chaos      time.Duration
	maxChaos   time.Duration // … extended to reach the sends and kills below, at most this long
	minSends   int
	minKills   int
	killEvery  time.Duration
	stops      int
	apiKills   int
	pgRestarts int
	recipients int
	backlog    int // pairs posted and not yet received at most
	quiesce    time.Duration
	seed       uint64
	// measureOnly: the phase's violations are what it measures, not a
	// failure (an asynchronous failover, scenario.go).
	measureOnly bool
	clockEvery  time.Duration // the clock scenario: the mean time between steps
}

// plan divides the run between the drivers.
func (h *harness) plan(driver, scenario string, i int) plan {
	n := max(len(h.o.drivers), 1)
	p := plan{
		driver:    driver,
		chaos:     h.o.duration / time.Duration(n),
		minSends:  h.o.minSends / n,
		minKills:  h.o.minKills / n,
		killEvery: h.o.killEvery,
		stops:     1,
		apiKills:  1,
		seed:      h.o.seed + uint64(i)*1000003,
	}
	p.maxChaos = p.chaos
	if p.minSends > 0 || p.minKills > 0 {
		p.maxChaos = 2 * p.chaos
	}
	// The backlog: twice what the workers' runs hold at once (a batch of
	// deliveries of about two devices each), so that no run waits for work
	// and a delivery waits about two batches for its claim.
	p.backlog = 2 * h.o.workers * engineWorkers * engineBatchSize * 2
	if h.o.long {
		p.recipients, p.quiesce = 1500, 5*time.Minute
		p.apiKills = 3
	} else {
		p.recipients, p.quiesce = 200, 2*time.Minute
	}
	switch scenario {
	case "clock":
		p.clockPlan(h.o.long)
	case "disk":
		p.diskPlan(h.o.long)
	}
	if driver == "postgres" {
		if h.o.pgRestart && scenario == "" {
			p.pgRestarts = 1
		} else if os.Getenv("ONCEPUSH_TEST_POSTGRES") == "skip" && os.Getenv("ONCEPUSH_REQUIRE_POSTGRES") != "1" {
			p.skip = "ONCEPUSH_TEST_POSTGRES=skip (scripts/test found no PostgreSQL server)"
		}
	}
	return p
}

// phaseResult is one driver's run.
type phaseResult struct {
	plan      plan
	check     *Result
	faults    []Fault
	harness   []Violation // what the harness saw outside the ledger (a worker's exit code)
	received  int
	elapsed   time.Duration
	chaos     time.Duration
	quiesce   time.Duration
	leaseLost int
	stopFor   time.Duration
	pgDown    time.Duration
	targets   []string // the mode's targets this phase missed
	nWorkers  int
	// refusedStarts counts worker starts refused while PostgreSQL restarted.
	refusedStarts int
	stopStalled   bool
	net           *netState     // a connection-fault scenario's figures
	failoverIn    time.Duration // a failover scenario's time without a primary
	clocks        *clocks       // the clock scenario's steps
	disk          *disk         // the disk scenario's tmpfs
	// api503, api500 count the API's answers 503 and 500 over the phase;
	// pgPanics the PANIC lines of its PostgreSQL (the disk scenario).
	api503, api500 int64
	pgPanics       int
}

func (r *phaseResult) failed() bool {
	if r.plan.measureOnly {
		return len(r.harness) > 0 || len(r.targets) > 0
	}
	return r.check.Failed() || len(r.harness) > 0 || len(r.targets) > 0
}

// runPhase runs one driver's phase from a fresh database to its check.
func (h *harness) runPhase(ctx context.Context, p plan) (*phaseResult, error) {
	start := time.Now()
	res := &phaseResult{plan: p, nWorkers: h.o.workers}
	dir := h.phaseDir(p)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	fmt.Printf("chaos: %s: starting (faults for %s, kill every %s, %d SIGSTOP, %d API kills, %d PostgreSQL restarts)\n",
		p.label(), p.chaos, p.killEvery, p.stops, p.apiKills, p.pgRestarts)
	if p.scenario == "clock" {
		c, err := newClocks(filepath.Join(dir, "clocks"))
		if err != nil {
			return nil, err
		}
		res.clocks = c
		h.ps.setEnv(res.clocks.env())
		defer h.ps.setEnv(nil)
	}
	if p.scenario == "disk" {
		d, err := mountDisk(ctx, dir)
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := d.unmount(); err != nil {
				fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
			}
		}()
		res.disk = d
	}

	// The fake providers: a fresh process per phase, so its record is this
	// phase's alone.
	f, err := startFake(ctx, h.ps, h.bin, filepath.Join(dir, "fake"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.proc.Kill() }()

	// The database.
	var database string
	var pg *cluster
	sc := &scenarioState{}
	switch {
	case p.driver == "sqlite" && res.disk != nil:
		database = filepath.Join(res.disk.dir, "oncepush.db")
	case pgScenario(p.scenario):
		var stop func()
		database, stop, err = h.scenarioDatabase(ctx, sc, p, dir)
		defer stop()
		if err != nil {
			return nil, err
		}
	case p.driver == "sqlite":
		database = filepath.Join(dir, "oncepush.db")
	case p.pgRestarts > 0 || (p.driver == "postgres" && res.disk != nil):
		parent := dir
		if res.disk != nil {
			parent = res.disk.dir // the cluster on the tmpfs the harness fills
		}
		if pg, err = newCluster(ctx, h.ps, parent, h.tmp); err != nil {
			return nil, err
		}
		defer pg.stop()
		if _, err := createDatabase(ctx, pg.url("postgres"), "chaos"); err != nil {
			return nil, err
		}
		database = pg.url("chaos")
	default:
		admin := sharedPostgres()
		name := fmt.Sprintf("oncepush_chaos_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
		if database, err = createDatabase(ctx, admin, name); err != nil {
			return nil, err
		}
		defer func() {
			if h.o.keep {
				fmt.Printf("chaos: kept database %s on %s\n", name, redacted(admin))
				return
			}
			if err := dropDatabase(admin, name); err != nil {
				fmt.Fprintf(os.Stderr, "chaos: drop database %s: %v\n", name, err)
			}
		}()
	}
	if strings.HasPrefix(database, "postgres://") {
		sep := "?"
		if strings.Contains(database, "?") {
			sep = "&"
		}
		database += fmt.Sprintf("%spool_max_conns=%d", sep, pgPoolMaxConns)
		if sc.workerDB != "" {
			sc.workerDB += fmt.Sprintf("%spool_max_conns=%d", sep, pgPoolMaxConns)
		}
	}

	cfg, err := writeConfig(dir, f)
	if err != nil {
		return nil, err
	}
	a, err := startAPI(ctx, h.ps, h.bin, database, cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if p := a.proc.Load(); p != nil {
			_ = p.Kill()
		}
	}()

	rng := rand.New(rand.NewPCG(p.seed, 0xc4a05))
	w, err := setUpWorkload(ctx, a, f, p, rng)
	if err != nil {
		return nil, err
	}
	fmt.Printf("chaos: %s: %d recipients, %d devices (%d with a dead token)\n", p.label(), len(w.recipients), len(w.tokens), w.dead)

	inj := &injector{h: h, p: p, fake: f, api: a, pg: pg, database: database, cfg: cfg, owners: w.owners, scenarioState: sc,
		rng: rand.New(rand.NewPCG(p.seed, 0xfa17)), clocks: res.clocks, disk: res.disk}
	for i := range h.o.workers {
		if err := inj.startWorker(ctx, i); err != nil {
			return nil, err
		}
	}
	defer inj.killWorkers()

	// Faults and load, until the chaos ends.
	chaosStart := time.Now()
	loadCtx, stopLoad := context.WithCancel(ctx)
	var loadWG sync.WaitGroup
	loadWG.Add(1)
	go func() {
		defer loadWG.Done()
		w.run(loadCtx, a, f)
	}()
	err = inj.run(ctx, w)
	res.chaos = time.Since(chaosStart)
	stopLoad()
	if err != nil {
		// POSTs retry until drained (postCtx); after a failed fault, such
		// as an API that did not start again, nothing would drain them.
		w.cancel()
	}
	loadWG.Wait()
	if err != nil {
		return nil, err
	}
	// Posts still retrying (their answer lost to an API kill) finish now.
	if err := w.drain(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	if err := inj.allWorking(ctx); err != nil {
		return nil, err
	}
	st, _ := f.stats(ctx)
	fmt.Printf("chaos: %s: faults over after %s: %d kills, %d SIGSTOP, %d API kills, %d PostgreSQL restarts; %d notifications, %d requests received so far\n",
		p.label(), res.chaos.Round(time.Second), inj.count(faultKill), inj.count(faultStop), inj.count(faultAPIKill),
		inj.count(faultPGRestart), len(w.notifications), st.Received)

	// Quiescence: every delivery final, read through the API.
	qStart := time.Now()
	deliveries, err := w.waitFinal(ctx, a, p.quiesce)
	res.quiesce = time.Since(qStart)
	if err != nil {
		return nil, err
	}
	inj.scenarioEnd()
	res.net, res.failoverIn = inj.net, inj.failoverIn

	// The providers' own record, read once nothing can be sent any more.
	receipts, err := f.received(ctx)
	if err != nil {
		return nil, err
	}
	res.received = len(receipts)

	// A worker that is told to stop finishes and exits 0.
	res.harness = append(res.harness, inj.stopWorkers()...)
	res.api503, res.api500 = a.answered503.Load(), a.answered500.Load()
	if res.disk != nil && pg != nil {
		res.pgPanics = inj.pgPanics()
	}
	if res.disk != nil && res.api500 > 0 {
		res.harness = append(res.harness, Violation{Kind: "API answered 500", Detail: fmt.Sprintf("%d times while the disk filled and emptied; its log: %s", res.api500, a.proc.Load().logPath)})
	}
	res.leaseLost = inj.countLogLines(`"msg":"lease lost`)
	res.faults = inj.faultList()
	res.stopFor, res.stopStalled, res.pgDown, res.refusedStarts = inj.stopFor, inj.stopStalled, inj.pgDown, inj.refusedStarts

	in := Input{
		Notifications: w.notificationList(),
		Receipts:      receipts,
		Faults:        res.faults,
		Limits: Limits{
			InFlight:    engineConcurrentSends, // the process's window, all its runs together
			AllInFlight: h.o.workers * engineConcurrentSends,
			SendTimeout: engineSendTimeout,
			Lease:       engineLease,
			Workers:     h.o.workers,
			Chaos:       res.chaos,
			ClockSkew:   res.clocks.ledgerSkew(p.driver),
		},
	}
	var pairDevice []int64          // in.Pairs[i]'s device id
	unsettled := map[string][]int{} // recipient → its pairs left pending or sending by a final delivery
	for _, d := range deliveries {
		in.Deliveries = append(in.Deliveries, Delivery{ID: d.ID, MessageID: d.NotificationID, Recipient: d.Recipient,
			OncepushID: d.OncepushID, DedupeKey: d.DedupeKey, Status: d.Status})
		for _, at := range d.Devices {
			tok, ok := w.tokens[at.DeviceID]
			if !ok {
				return nil, fmt.Errorf("delivery %d names device %d, which the harness never registered", d.ID, at.DeviceID)
			}
			pairDevice = append(pairDevice, at.DeviceID)
			pr := Pair{DeliveryID: d.ID, Transport: at.Transport, Token: tok, State: at.State,
				Submissions: at.Submissions, Ambiguous: at.Ambiguous, UpdatedAt: at.UpdatedAt}
			if at.FirstSentAt != nil {
				pr.FirstSentAt = *at.FirstSentAt
			}
			if at.LastSentAt != nil {
				pr.LastSentAt = *at.LastSentAt
			}
			if d.Status != "pending" && (at.State == "pending" || at.State == "sending") {
				unsettled[d.Recipient] = append(unsettled[d.Recipient], len(in.Pairs))
			}
			in.Pairs = append(in.Pairs, pr)
		}
	}
	// Is the device of such a pair still registered? (Read now: at the end.)
	for recipient, pairs := range unsettled {
		live, err := a.deviceIDs(ctx, recipient)
		if err != nil {
			return nil, err
		}
		for _, i := range pairs {
			in.Pairs[i].DeviceGone = !live[pairDevice[i]]
		}
	}
	res.check = Check(in)
	res.elapsed = time.Since(start)
	if p.minSends > 0 && res.received < p.minSends {
		res.targets = append(res.targets, fmt.Sprintf("%d requests received, the mode asks for %d", res.received, p.minSends))
	}
	if k := inj.count(faultKill); p.minKills > 0 && k < p.minKills {
		res.targets = append(res.targets, fmt.Sprintf("%d kills, the mode asks for %d", k, p.minKills))
	}
	if inj.count(faultStop) < p.stops || inj.count(faultAPIKill) < p.apiKills || inj.count(faultPGRestart) < p.pgRestarts {
		res.targets = append(res.targets, fmt.Sprintf("%d SIGSTOP, %d API kills, %d PostgreSQL restarts injected; the plan was %d, %d, %d",
			inj.count(faultStop), inj.count(faultAPIKill), inj.count(faultPGRestart), p.stops, p.apiKills, p.pgRestarts))
	}
	fmt.Printf("chaos: %s: done in %s (quiescence %s)\n", p.label(), res.elapsed.Round(time.Second), res.quiesce.Round(100*time.Millisecond))
	return res, nil
}

// writeConfig writes the configuration every process of the phase reads:
// the fake's providers and the engine settings above.
func writeConfig(dir string, f *fake) (string, error) {
	c := map[string]any{}
	for k, v := range f.config {
		c[k] = v
	}
	c["engine"] = map[string]any{
		"batchSize":       engineBatchSize,
		"workers":         engineWorkers,
		"concurrentSends": engineConcurrentSends,
		"runBudget":       engineRunBudget.String(),
		"sendTimeout":     engineSendTimeout.String(),
		"lease":           engineLease.String(),
		"maxAttempts":     engineMaxAttempts,
		"backoffMin":      engineBackoffMin.String(),
		"backoffMax":      engineBackoffMax.String(),
		"pollInterval":    enginePollInterval.String(),
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "oncepush.json")
	return path, os.WriteFile(path, b, 0o600)
}
