package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// report is one run's figures.
type report struct {
	Machine      machineInfo     `json:"machine"`
	Options      map[string]any  `json:"options"`
	Ceiling      map[int]float64 `json:"ceilingRowsPerS,omitempty"`
	CeilingError string          `json:"ceilingError,omitempty"`
	Floor        *insertFloor    `json:"insertFloor,omitempty"`
	FloorError   string          `json:"insertFloorError,omitempty"`
	Columns      []*column       `json:"columns"`
	TempDir      string          `json:"tempDir"`

	pids      []int    // every process started, for the test
	databases []string // every scratch database of oncepush, for the test
	ceilingDB string   // … and the ceiling's
}

// column is one system's figures; a case that failed has an entry in
// Errors instead.
type column struct {
	Name          string            `json:"name"`
	NotRun        string            `json:"notRun,omitempty"`
	SingleAtOnce  []float64         `json:"singleAtOnceSendsPerS,omitempty"`
	SingleSlow    []float64         `json:"singleSlowSendsPerS,omitempty"`
	Fanout        float64           `json:"fanoutSendsPerS,omitempty"`
	FanoutRSSMiB  float64           `json:"fanoutPeakRSSMiB,omitempty"`
	LatencyAtOnce *latencies        `json:"latencyAtOnce,omitempty"`
	LatencySlow   *latencies        `json:"latencySlow,omitempty"`
	Drain         float64           `json:"drainSendsPerS,omitempty"`
	Saturation    *saturation       `json:"saturation,omitempty"`
	History       []float64         `json:"historySendsPerS,omitempty"`
	CPUSingle     *cpuUse           `json:"cpuSingleAtOnce,omitempty"` // every run of the case together
	CPUFanout     *cpuUse           `json:"cpuFanout,omitempty"`
	CPUHistory    *cpuUse           `json:"cpuHistory,omitempty"`
	CPUDrain      *cpuUse           `json:"cpuDrain,omitempty"`
	Errors        map[string]string `json:"errors,omitempty"`
}

type machineInfo struct {
	CPUs     int    `json:"cpus"`
	CPU      string `json:"cpu"`
	LoadAvg  string `json:"loadAvgAtStart"`
	Go       string `json:"go"`
	Postgres string `json:"postgres"`
	Gorush   string `json:"gorush,omitempty"`
	Date     string `json:"date"`
}

func machine(ctx context.Context, o *options) machineInfo {
	m := machineInfo{CPUs: runtime.NumCPU(), Date: time.Now().UTC().Format(time.RFC3339)}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	m.Go = runtime.Version()
	if out, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output(); err == nil {
		m.Go = strings.TrimSpace(string(out))
	}
	if conn, err := pgx.Connect(ctx, o.postgres); err == nil {
		_ = conn.QueryRow(ctx, "SHOW server_version").Scan(&m.Postgres)
		conn.Close(ctx)
	}
	return m
}

func (o *options) summary() map[string]any {
	return map[string]any{
		"count": o.count, "conns": o.conns, "runs": o.runs, "latencyMs": o.latency.Milliseconds(),
		"fanoutTokens": o.fanoutTokens, "fanoutSends": o.fanoutSends, "fanoutConns": o.fanoutConns,
		"rate": o.rate, "rateForS": o.rateFor.Seconds(), "saturateForS": o.saturateFor.Seconds(),
		"drain": o.drainCount, "devices": o.devices, "ceilingRows": o.ceilingRows,
		"ceilingBatches": o.ceilingBatches, "pgbenchClients": o.pgbenchClients, "gorushWorkers": o.gorushWorkers,
		"history": o.history, "quick": o.quick, "drivers": o.drivers,
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// failed says whether a case of a system that ran did not give a figure.
func (r *report) failed() bool {
	if r.CeilingError != "" || r.FloorError != "" {
		return true
	}
	for _, c := range r.Columns {
		if len(c.Errors) > 0 {
			return true
		}
	}
	return false
}

func (r *report) column(name string) *column {
	for _, c := range r.Columns {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// thousands formats a rate: 12,345.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// print writes the table, the targets and the machine, in Markdown.
func (r *report) print(w io.Writer) {
	m := r.Machine
	fmt.Fprintf(w, "\nMachine: %d CPUs (%s), load average at start %s; %s; PostgreSQL %s", m.CPUs, m.CPU, m.LoadAvg, m.Go, m.Postgres)
	if m.Gorush != "" {
		fmt.Fprintf(w, "; gorush %s", m.Gorush)
	}
	fmt.Fprintf(w, "; %s\n\n", m.Date)
	if r.CeilingError != "" {
		fmt.Fprintf(w, "Ledger ceiling: FAILED: %s\n\n", r.CeilingError)
	} else if len(r.Ceiling) > 0 {
		var parts []string
		for _, b := range sortedKeys(r.Ceiling) {
			parts = append(parts, fmt.Sprintf("batch %d: %s rows/s", b, thousands(r.Ceiling[b])))
		}
		fmt.Fprintf(w, "Ledger ceiling (pgbench claim + record, %v clients): %s\n\n", r.Options["pgbenchClients"], strings.Join(parts, "; "))
	}
	if r.FloorError != "" {
		fmt.Fprintf(w, "Insert floor: FAILED: %s\n\n", r.FloorError)
	} else if f := r.Floor; f != nil {
		fmt.Fprintf(w, "Insert floor (the API's writes alone, %d sends a commit, a recorded request each, %v clients): %s sends/s, the database %s µs of CPU a send",
			floorGroup, r.Options["pgbenchClients"], thousands(f.SendsPerS), micros(f.CPU.perSend(f.CPU.Database)))
		if top := r.Ceiling[100]; top > 0 {
			fmt.Fprintf(w, "; with the claim + record at batch 100, the ledger alone allows at most %s sends/s on this machine", thousands(r.ledgerFloor()))
		}
		fmt.Fprint(w, "\n\n")
	}
	g := r.column("gorush")
	r.tableHeader(w, "case")
	o := r.Options
	rows := []struct {
		title string
		cell  func(c *column) (string, float64) // text, and a figure to divide by gorush's (0: none)
		errs  []string
	}{
		{fmt.Sprintf("%v single-token notifications, %v connections, fake at once: sends/s (median of %v)", o["count"], o["conns"], o["runs"]),
			func(c *column) (string, float64) { return rate(median(c.SingleAtOnce)) }, []string{"single"}},
		{fmt.Sprintf("the same, fake after %v ms: sends/s", o["latencyMs"]),
			func(c *column) (string, float64) { return rate(median(c.SingleSlow)) }, []string{"single-slow"}},
		{fmt.Sprintf("%v-token fan-out, %v sends: sends/s", o["fanoutTokens"], o["fanoutSends"]),
			func(c *column) (string, float64) { return rate(c.Fanout) }, []string{"fanout"}},
		{"peak RSS, fan-out case",
			func(c *column) (string, float64) { return mib(c.FanoutRSSMiB), 0 }, []string{"fanout"}},
		{fmt.Sprintf("POST → provider p50 / p99 at %v/s open loop, fake at once", o["rate"]),
			func(c *column) (string, float64) { return lat(c.LatencyAtOnce), 0 }, []string{"latency"}},
		{"same, fake after " + fmt.Sprint(o["latencyMs"]) + " ms",
			func(c *column) (string, float64) { return lat(c.LatencySlow), 0 }, []string{"latency-slow"}},
		{fmt.Sprintf("workers alone, %v queued: drain sends/s (of the ceiling at batch 100)", o["drain"]),
			func(c *column) (string, float64) { return r.drainCell(c), 0 }, []string{"drain"}},
		{"at saturation: accepted POST/s / delivered/s; backlog at half → end",
			func(c *column) (string, float64) { return satCell(c.Saturation), 0 }, []string{"saturation"}},
		{"with history: sends/s (vs the empty ledger)",
			func(c *column) (string, float64) { return historyCell(c), 0 }, []string{"history"}},
	}
	for _, row := range rows {
		fmt.Fprintf(w, "| %s |", row.title)
		for _, c := range r.Columns {
			text, v := row.cell(c)
			switch {
			case c.NotRun != "":
				text = c.NotRun
			case errorOf(c, row.errs...) != "":
				text = "failed (below)"
			case text == "":
				text = "—"
			case v > 0 && g != c && g != nil:
				if _, gv := row.cell(g); gv > 0 && g.NotRun == "" {
					text += fmt.Sprintf(" (%.2f×)", v/gv)
				}
			}
			fmt.Fprintf(w, " %s |", text)
		}
		fmt.Fprintln(w)
	}
	r.printCPU(w)
	fmt.Fprintln(w, "\nTargets (issue 11):")
	for _, t := range r.targets() {
		fmt.Fprintf(w, "- %s: %s\n", t.what, t.verdict)
	}
	var failures []string
	for _, c := range r.Columns {
		for _, k := range sortedKeys(c.Errors) {
			failures = append(failures, fmt.Sprintf("- %s, %s: %s", c.Name, k, c.Errors[k]))
		}
	}
	if len(failures) > 0 {
		fmt.Fprintf(w, "\nFailed cases:\n%s\n", strings.Join(failures, "\n"))
	}
}

func sortedKeys[K int | string, V any](m map[K]V) []K {
	var ks []K
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

func errorOf(c *column, names ...string) string {
	for _, n := range names {
		if e := c.Errors[n]; e != "" {
			return e
		}
	}
	return c.Errors["start"]
}

func rate(v float64) (string, float64) {
	if v == 0 {
		return "", 0
	}
	return thousands(v), v
}

func mib(v float64) string {
	if v == 0 {
		return ""
	}
	return fmt.Sprintf("%.0f MiB", v)
}

func lat(l *latencies) string {
	if l == nil {
		return ""
	}
	s := fmt.Sprintf("%.1f / %.1f ms", l.P50ms, l.P99ms)
	if l.Missing > 0 {
		s += fmt.Sprintf(" (%d unmatched)", l.Missing)
	}
	return s
}

func (r *report) drainCell(c *column) string {
	if c.Drain == 0 {
		return ""
	}
	s := thousands(c.Drain)
	if top := r.Ceiling[100]; top > 0 && c.Name == "oncepush postgres" {
		s += fmt.Sprintf(" (%.0f %% of %s)", 100*c.Drain/top, thousands(top))
	}
	return s
}

func satCell(s *saturation) string {
	if s == nil {
		return ""
	}
	verdict := "steady"
	if s.Grows {
		verdict = "grows"
	}
	out := fmt.Sprintf("%s / %s; %d → %d, %s", thousands(s.AcceptedPerS), thousands(s.DeliveredPerS), s.BacklogHalf, s.BacklogEnd, verdict)
	if s.Refused429 > 0 {
		out += fmt.Sprintf("; %d answered 429", s.Refused429)
	}
	return out
}

func historyCell(c *column) string {
	if len(c.History) == 0 {
		return ""
	}
	h, e := median(c.History), median(c.SingleAtOnce)
	if e == 0 {
		return thousands(h)
	}
	return fmt.Sprintf("%s (%.0f %%)", thousands(h), 100*h/e)
}

type target struct{ what, verdict string }

// targets judges the targets on this run's figures.
func (r *report) targets() []target {
	g, pg, lite := r.column("gorush"), r.column("oncepush postgres"), r.column("oncepush sqlite")
	ratio := func(c *column, v func(*column) float64, want float64) string {
		if c == nil || g == nil || g.NotRun != "" || v(g) == 0 || v(c) == 0 {
			return "not run"
		}
		return verdict(v(c)/v(g) >= want, fmt.Sprintf("%.2f×", v(c)/v(g)))
	}
	single := func(c *column) float64 { return median(c.SingleAtOnce) }
	slow := func(c *column) float64 { return median(c.SingleSlow) }
	fan := func(c *column) float64 { return c.Fanout }
	var out []target
	out = append(out,
		target{"single-token, fake at once: PostgreSQL ≥ 1.5× gorush", ratio(pg, single, 1.5)},
		target{"single-token, fake at once: SQLite ≥ 1.0× gorush", ratio(lite, single, 1.0)},
		target{"fake after 50 ms: PostgreSQL ≥ 1.5× gorush", ratio(pg, slow, 1.5)},
		target{"fake after 50 ms: SQLite ≥ 1.5× gorush", ratio(lite, slow, 1.5)},
		target{"fan-out: PostgreSQL ≥ 2× gorush", ratio(pg, fan, 2)},
		target{"fan-out: SQLite ≥ 2× gorush", ratio(lite, fan, 2)},
	)
	for _, c := range []*column{pg, lite} {
		if c == nil {
			continue
		}
		out = append(out, target{"fan-out peak RSS ≤ 64 MiB, " + c.Name, judge(c.FanoutRSSMiB > 0, c.FanoutRSSMiB <= 64, fmt.Sprintf("%.0f MiB", c.FanoutRSSMiB))})
		fast, slow, s := c.LatencyAtOnce, c.LatencySlow, c.Saturation
		out = append(out,
			target{"POST → provider p99 ≤ 25 ms, fake at once, " + c.Name, judge(fast != nil, fast != nil && fast.P99ms <= 25 && fast.Missing == 0, latText(fast))},
			target{"POST → provider p99 ≤ 80 ms, fake after 50 ms, " + c.Name, judge(slow != nil, slow != nil && slow.P99ms <= 80 && slow.Missing == 0, latText(slow))},
			target{"at saturation the backlog does not grow (or the API answers 429), " + c.Name,
				judge(s != nil, s != nil && (!s.Grows || s.Refused429 > 0), satCell(s))})
	}
	if pg != nil {
		top := r.Ceiling[100]
		out = append(out, target{"workers alone drain ≥ 60 % of the ledger ceiling (batch 100), PostgreSQL",
			judge(pg.Drain > 0 && top > 0, top > 0 && pg.Drain >= 0.6*top, fmt.Sprintf("%.0f %%", 100*pg.Drain/max(top, 1)))})
		h, e := median(pg.History), median(pg.SingleAtOnce)
		out = append(out, target{"with 5,000,000 finished and 1,000,000 future rows ≥ 80 % of the empty figure, PostgreSQL",
			judge(h > 0 && e > 0, e > 0 && h >= 0.8*e, fmt.Sprintf("%.0f %%", 100*h/max(e, 1)))})
	}
	return out
}

func latText(l *latencies) string {
	if l == nil {
		return ""
	}
	return fmt.Sprintf("p99 %.1f ms", l.P99ms)
}

func judge(ran, ok bool, figure string) string {
	if !ran {
		return "not run"
	}
	return verdict(ok, figure)
}

func verdict(ok bool, figure string) string {
	if ok {
		return "met (" + figure + ")"
	}
	return "UNMET (" + figure + ")"
}

// printCPU is the CPU each part of the machine used per send (D97), for
// the cases that measured it, and the rate the machine's CPUs would allow
// at that cost.
func (r *report) printCPU(w io.Writer) {
	cases := []struct {
		title string
		use   func(c *column) *cpuUse
	}{
		{"single-token, fake at once", func(c *column) *cpuUse { return c.CPUSingle }},
		{"fan-out", func(c *column) *cpuUse { return c.CPUFanout }},
		{"single-token with history", func(c *column) *cpuUse { return c.CPUHistory }},
		{"workers alone (drain)", func(c *column) *cpuUse { return c.CPUDrain }},
	}
	parts := []struct {
		name string
		cell func(u *cpuUse) string
	}{
		{"the system (serve, gorush)", func(u *cpuUse) string { return micros(u.perSend(u.System)) }},
		{"the database (its own backends)", func(u *cpuUse) string { return micros(u.perSend(u.Database)) }},
		{"the fake provider", func(u *cpuUse) string { return micros(u.perSend(u.Fake)) }},
		{"the load generator", func(u *cpuUse) string { return micros(u.perSend(u.Load)) }},
		{"the rest of the machine", func(u *cpuUse) string { return micros(u.perSend(u.Other)) }},
		{"all of it", func(u *cpuUse) string { return micros(u.busy()) }},
		{"idle, of every CPU's time", func(u *cpuUse) string {
			return fmt.Sprintf("%.0f %%", 100*u.Idle/(u.WallS*float64(r.Machine.CPUs)))
		}},
		{"sends/s the CPUs allow at this cost", func(u *cpuUse) string {
			return thousands(float64(r.Machine.CPUs) * 1e6 / u.busy())
		}},
	}
	header := false
	for _, cs := range cases {
		if !slices.ContainsFunc(r.Columns, func(c *column) bool { u := cs.use(c); return u != nil && u.Sends > 0 }) {
			continue
		}
		if !header {
			fmt.Fprintf(w, "\nCPU per send, µs of user + system time (%d CPUs: %s µs of CPU a second):\n\n", r.Machine.CPUs, thousands(float64(r.Machine.CPUs)*1e6))
			r.tableHeader(w, "case", "part")
			header = true
		}
		for _, p := range parts {
			fmt.Fprintf(w, "| %s | %s |", cs.title, p.name)
			for _, c := range r.Columns {
				text := "—"
				if u := cs.use(c); u != nil && u.Sends > 0 {
					text = p.cell(u)
				}
				fmt.Fprintf(w, " %s |", text)
			}
			fmt.Fprintln(w)
		}
	}
}

func micros(v float64) string { return fmt.Sprintf("%.0f", v) }

// ledgerFloor is the most sends a second the ledger's own writes allow on
// this machine, each measured with the machine to itself: a send is
// written once (the insert floor) and claimed and recorded once (the
// ceiling at batch 100), so its time is the sum of the two. Everything
// else a send needs (the server, the mark, the reads, the provider) only
// lowers it (D98).
func (r *report) ledgerFloor() float64 {
	top := r.Ceiling[100]
	if r.Floor == nil || r.Floor.SendsPerS <= 0 || top <= 0 {
		return 0
	}
	return 1 / (1/r.Floor.SendsPerS + 1/top)
}

// tableHeader prints a Markdown table's header: the leading columns, then
// one per system.
func (r *report) tableHeader(w io.Writer, lead ...string) {
	names := slices.Clone(lead)
	for _, c := range r.Columns {
		names = append(names, c.Name)
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(names, " | "), strings.Repeat("---|", len(names)))
}
