package drivertest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
)

// The campaign benchmark (docs/benchmarks.md, "Campaign to a million
// devices"): a campaign to every registered device, one FCM device per
// recipient, inserted with SQL before the clock starts, expanded and
// delivered by one started client into an in-process fake provider that
// accepts at once. The campaign runs in a child process (the test binary run
// again) so that the child's peak RSS (getrusage's maxrss, read by the
// parent from the child's rusage) is the engine's alone: not the parent's
// filling of the devices, nor the test framework's.
//
// The parent passes the child what it needs in the environment:
// CampaignChildEnv names the database (a connection string or a file), and
// the child writes its CampaignBenchResult as JSON to the file named by
// campaignOutEnv. ONCEPUSH_BENCH_CPUPROFILE=file profiles the child's run.

// CampaignChildEnv is the environment variable that makes
// CampaignChild run: the database the child opens.
const CampaignChildEnv = "ONCEPUSH_CAMPAIGN_CHILD_DB"

const (
	campaignOutEnv     = "ONCEPUSH_CAMPAIGN_CHILD_OUT"
	campaignDevicesEnv = "ONCEPUSH_CAMPAIGN_CHILD_DEVICES"
	campaignBatchEnv   = "ONCEPUSH_CAMPAIGN_CHILD_BATCH"
)

// CampaignBenchResult is what one campaign run measured.
type CampaignBenchResult struct {
	Devices int
	// BatchSize is the claim's batch (Config.BatchSize).
	BatchSize int
	// Written is the campaign's deliveries as its row counts them.
	Written int64
	// Expansion is the campaign's started_at → finished_at (the last
	// batch committed), while the workers deliver beside it.
	Expansion time.Duration
	// LastSend is StartCampaign's call → the last submission received by
	// the fake provider; Stopped → Client.Stop returned (the last records
	// written).
	LastSend, Stopped time.Duration
	// TotalsReads are the durations of Client.Campaign calls at the end;
	// RecountReads of counting the same totals from the rows (the three
	// recount statements the tally replaced, D95), the reference.
	TotalsReads, RecountReads []time.Duration
	Totals                    oncepush.CampaignTotals

	// Filled by the parent: the child's peak RSS (KiB; -1 when the
	// platform does not say), its CPU, and the machine's busy CPU over the
	// child's life (all processes, from /proc/stat; 0 when unknown).
	MaxRSSKiB                int64
	UserCPU, SysCPU, BusyCPU time.Duration
	ChildWall                time.Duration
	LoadBefore, LoadAfter    string
	// DatabaseCPU, StatementSamples: filled by a driver's sampler, when it
	// has one (PostgreSQL: the CPU of the child's backends, and what its
	// sessions were doing, sampled).
	DatabaseCPU               time.Duration
	StatementSamples          map[string]int `json:",omitempty"`
	StatementSamplesTotal     int            `json:",omitempty"`
	StatementSamplesNotActive int            `json:",omitempty"`
}

// ExpansionRate is deliveries written per second of expansion.
func (r *CampaignBenchResult) ExpansionRate() float64 {
	return float64(r.Written) / r.Expansion.Seconds()
}

// SendRate is end-to-end sends per second: start → last submission.
func (r *CampaignBenchResult) SendRate() float64 {
	return float64(r.Devices) / r.LastSend.Seconds()
}

// TotalsMedian is the median Client.Campaign read.
func (r *CampaignBenchResult) TotalsMedian() time.Duration { return median(r.TotalsReads) }

// RecountMedian is the median count of the same totals from the rows.
func (r *CampaignBenchResult) RecountMedian() time.Duration { return median(r.RecountReads) }

func median(ds []time.Duration) time.Duration {
	d := slices.Clone(ds)
	slices.Sort(d)
	if len(d) == 0 {
		return 0
	}
	return d[len(d)/2]
}

// Report logs the result and reports its figures as benchmark metrics.
func (r *CampaignBenchResult) Report(tb testing.TB) {
	tb.Logf("%d devices, batch %d: expansion %.0f deliveries/s (%s), %.0f sends/s end to end, last send at %s, stopped at %s, "+
		"peak RSS %.1f MiB, totals read median %s (%v), recounted from the rows %s (%v); child CPU user %s sys %s over %s wall, machine busy %s; load %s → %s",
		r.Devices, r.BatchSize, r.ExpansionRate(), r.Expansion.Round(time.Millisecond), r.SendRate(),
		r.LastSend.Round(time.Millisecond), r.Stopped.Round(time.Millisecond), float64(r.MaxRSSKiB)/1024,
		r.TotalsMedian().Round(time.Microsecond), r.TotalsReads, r.RecountMedian().Round(time.Microsecond), r.RecountReads, r.UserCPU.Round(time.Millisecond), r.SysCPU.Round(time.Millisecond),
		r.ChildWall.Round(time.Millisecond), r.BusyCPU.Round(time.Millisecond), r.LoadBefore, r.LoadAfter)
	if r.StatementSamplesTotal > 0 {
		type kv struct {
			k string
			n int
		}
		var top []kv
		for k, n := range r.StatementSamples {
			top = append(top, kv{k, n})
		}
		slices.SortFunc(top, func(a, b kv) int { return cmp.Compare(b.n, a.n) })
		tb.Logf("database backends' CPU %s; sessions sampled %d times, %d idle or idle in transaction; by share of samples:",
			r.DatabaseCPU.Round(time.Millisecond), r.StatementSamplesTotal, r.StatementSamplesNotActive)
		for _, e := range top[:min(len(top), 12)] {
			tb.Logf("  %5.1f %%  %s", 100*float64(e.n)/float64(r.StatementSamplesTotal), e.k)
		}
	}
	if b, ok := tb.(*testing.B); ok {
		b.ReportMetric(r.ExpansionRate(), "deliveries/s-expansion")
		b.ReportMetric(r.SendRate(), "sends/s")
		b.ReportMetric(r.LastSend.Seconds(), "s-to-last-send")
		b.ReportMetric(float64(r.MaxRSSKiB)/1024, "MiB-peak-RSS")
		b.ReportMetric(float64(r.TotalsMedian().Microseconds())/1000, "ms-totals-read")
		b.ReportMetric(float64(r.RecountMedian().Microseconds())/1000, "ms-recount-read")
	}
}

// RunCampaignChild runs the campaign in a child process, the test binary
// run again with only the test named child (which calls CampaignChild),
// on the database db (already holding its devices), and checks its totals.
// sample, when not nil, runs while the child does and may fill the
// result's statement samples.
func RunCampaignChild(tb testing.TB, child, db string, devices, batchSize int, sample func(ctx context.Context, r *CampaignBenchResult)) *CampaignBenchResult {
	tb.Helper()
	out := tb.TempDir() + "/result.json"
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.count=1", "-test.timeout=30m")
	cmd.Env = append(os.Environ(), CampaignChildEnv+"="+db, campaignOutEnv+"="+out,
		campaignDevicesEnv+"="+strconv.Itoa(devices), campaignBatchEnv+"="+strconv.Itoa(batchSize))
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	r := &CampaignBenchResult{LoadBefore: loadAverage()}
	busy0 := busyCPU()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if sample != nil {
		wg.Go(func() { sample(ctx, r) })
	}
	err := cmd.Wait()
	cancel()
	wg.Wait()
	wall := time.Since(start)
	busy1 := busyCPU()
	if err != nil {
		tb.Fatalf("campaign child: %v\n%s", err, stderr.String())
	}
	doc, err := os.ReadFile(out)
	if err != nil {
		tb.Fatalf("campaign child wrote no result: %v\n%s", err, stderr.String())
	}
	parent := *r
	if err := json.Unmarshal(doc, r); err != nil {
		tb.Fatal(err)
	}
	r.StatementSamples, r.StatementSamplesTotal, r.StatementSamplesNotActive = parent.StatementSamples, parent.StatementSamplesTotal, parent.StatementSamplesNotActive
	r.DatabaseCPU = parent.DatabaseCPU
	r.LoadBefore, r.LoadAfter = parent.LoadBefore, loadAverage()
	r.ChildWall = wall
	r.MaxRSSKiB = maxRSSKiB(cmd.ProcessState)
	r.UserCPU, r.SysCPU = cmd.ProcessState.UserTime(), cmd.ProcessState.SystemTime()
	if busy0 > 0 && busy1 > busy0 {
		r.BusyCPU = busy1 - busy0
	}
	t := r.Totals
	if r.Written != int64(devices) || t.Sent != devices || t.Accepted != devices || t.Queued != 0 {
		tb.Fatalf("campaign to %d devices: written %d, totals %+v", devices, r.Written, t)
	}
	return r
}

// CampaignChild is the child's body: it does nothing unless the
// environment names its database (CampaignChildEnv). open opens the
// driver on it.
func CampaignChild[TTx any](t *testing.T, open func(t *testing.T, db string) driver.Driver[TTx]) {
	db := os.Getenv(CampaignChildEnv)
	if db == "" {
		return // only a child of RunCampaignChild has work here
	}
	devices, err := strconv.Atoi(os.Getenv(campaignDevicesEnv))
	if err != nil {
		t.Fatal(err)
	}
	batch, _ := strconv.Atoi(os.Getenv(campaignBatchEnv))
	if path := os.Getenv("ONCEPUSH_BENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	r, err := runCampaign(context.Background(), open(t, db), devices, batch)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(os.Getenv(campaignOutEnv), doc, 0o600); err != nil {
		t.Fatal(err)
	}
}

// countingProvider is the in-process fake the campaign sends into: it
// accepts at once, as pushtest.Provider does, but counts submissions
// instead of keeping each one (pushtest.Provider's record of a million
// submissions would be the benchmark's memory, not the engine's), and
// notes when the last expected one arrived.
type countingProvider struct {
	n    atomic.Int64
	want int64
	last chan time.Time
}

func (p *countingProvider) Transport() oncepush.Transport { return oncepush.TransportFCM }

func (p *countingProvider) Send(_ context.Context, _ *oncepush.Submission) oncepush.Result {
	n := p.n.Add(1)
	if n == p.want {
		p.last <- time.Now()
	}
	return oncepush.Accepted("fake-" + strconv.FormatInt(n, 10))
}

func runCampaign[TTx any](ctx context.Context, drv driver.Driver[TTx], devices, batch int) (*CampaignBenchResult, error) {
	fake := &countingProvider{want: int64(devices), last: make(chan time.Time, 1)}
	c, err := oncepush.NewClient(drv, &oncepush.Config{
		Providers: []oncepush.Provider{fake}, BatchSize: batch, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	cp, err := c.CreateCampaign(ctx, oncepush.CampaignSpec{
		Name: "bench", Message: oncepush.Message{Title: "bench", Body: "a campaign to every device"},
		Audience: oncepush.AudienceDevices,
	})
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	if _, err := c.StartCampaign(ctx, cp.ID); err != nil {
		return nil, err
	}
	var last time.Time
	select {
	case last = <-fake.last:
	case <-time.After(20 * time.Minute):
		return nil, fmt.Errorf("after 20 minutes, %d of %d sends", fake.n.Load(), devices)
	}
	if err := c.Stop(ctx); err != nil {
		return nil, err
	}
	r := &CampaignBenchResult{Devices: devices, BatchSize: cmp.Or(batch, oncepush.BatchSizeDefault),
		LastSend: last.Sub(start), Stopped: time.Since(start)}
	for range 5 {
		t0 := time.Now()
		got, err := c.Campaign(ctx, cp.ID)
		if err != nil {
			return nil, err
		}
		r.TotalsReads = append(r.TotalsReads, time.Since(t0))
		if got.Status != oncepush.CampaignCompleted {
			return nil, fmt.Errorf("campaign is %s after its last send", got.Status)
		}
		r.Written, r.Totals, r.Expansion = got.Written, *got.Totals, got.FinishedAt.Sub(got.StartedAt)
		t0 = time.Now()
		ex := drv.Exec()
		if _, err := ex.DeliveryCountByStatus(ctx, got.MessageID); err != nil {
			return nil, err
		}
		tex, err := testExecutor(ex)
		if err != nil {
			return nil, err
		}
		if _, err := tex.DeviceAttemptCountByState(ctx, got.MessageID); err != nil {
			return nil, err
		}
		if _, err := ex.DeviceAttemptAmbiguousCount(ctx, got.MessageID); err != nil {
			return nil, err
		}
		r.RecountReads = append(r.RecountReads, time.Since(t0))
	}
	if n := fake.n.Load(); n != int64(devices) {
		return nil, fmt.Errorf("%d submissions for %d devices", n, devices)
	}
	return r, nil
}

// CampaignSizes are the audience sizes of BenchmarkCampaign: small unless
// ONCEPUSH_BENCH_CAMPAIGN lists them (comma-separated device counts), so
// that -bench . stays quick and the full sizes run only when asked for.
func CampaignSizes(tb testing.TB, small int) []int {
	v := os.Getenv("ONCEPUSH_BENCH_CAMPAIGN")
	if v == "" {
		return []int{small}
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			tb.Fatalf("ONCEPUSH_BENCH_CAMPAIGN=%q: want device counts, comma-separated", v)
		}
		out = append(out, n)
	}
	return out
}
