package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestQuickRun runs the command in its tiny mode on PostgreSQL and SQLite
// (no gorush): every case gives a figure, the table says gorush was not
// run, and nothing it started outlives it.
func TestQuickRun(t *testing.T) {
	pg := cmp.Or(os.Getenv("ONCEPUSH_TEST_DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	var stderr bytes.Buffer
	o, err := parseFlags([]string{"-quick", "-postgres", pg, "-json", jsonPath}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := run(t.Context(), o, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	var table bytes.Buffer
	rep.print(&table)
	t.Log(table.String())

	if rep.CeilingError != "" || len(rep.Ceiling) != 2 || rep.Ceiling[100] <= 0 || rep.Ceiling[500] <= 0 {
		t.Errorf("ledger ceiling: %v %q", rep.Ceiling, rep.CeilingError)
	}
	if f := rep.Floor; rep.FloorError != "" || f == nil || f.Sends != 400 || f.SendsPerS <= 0 || f.CPU.Database <= 0 ||
		rep.ledgerFloor() <= 0 || !strings.Contains(table.String(), "the ledger alone allows at most") {
		t.Errorf("insert floor: %+v %q", f, rep.FloorError)
	}
	if g := rep.column("gorush"); g == nil || g.NotRun == "" || !strings.Contains(table.String(), "not run") {
		t.Errorf("the gorush column does not say it was not run")
	}
	for _, name := range []string{"oncepush postgres", "oncepush sqlite"} {
		c := rep.column(name)
		if c == nil {
			t.Fatalf("no column %q", name)
		}
		if len(c.Errors) > 0 {
			t.Errorf("%s: failed cases: %v", name, c.Errors)
			continue
		}
		if len(c.SingleAtOnce) != 1 || len(c.SingleSlow) != 1 || c.Fanout <= 0 || c.FanoutRSSMiB <= 0 ||
			c.LatencyAtOnce == nil || c.LatencySlow == nil || c.Drain <= 0 || c.Saturation == nil {
			t.Errorf("%s: a case gave no figure: %+v", name, c)
		}
		// CPU per send (D97): every part that ran is counted; the database
		// only on PostgreSQL, where it is a process of its own.
		for _, u := range []*cpuUse{c.CPUSingle, c.CPUFanout, c.CPUDrain} {
			if u == nil || u.Sends == 0 || u.WallS <= 0 || u.System <= 0 || u.Fake <= 0 || u.Load <= 0 ||
				(u.Database > 0) != (name == "oncepush postgres") {
				t.Errorf("%s: CPU use %+v: want the sends, the wall time and every part's share", name, u)
			}
		}
		for _, l := range []*latencies{c.LatencyAtOnce, c.LatencySlow} {
			if l != nil && (l.Missing != 0 || l.Sent != 200 || l.P50ms <= 0) {
				t.Errorf("%s: latency %+v: want 200 sends, all matched with the fake's receipts", name, l)
			}
		}
	}
	if !strings.Contains(table.String(), "| single-token, fake at once | all of it | — |") {
		t.Errorf("no CPU table, or gorush has a figure in it:\n%s", table.String())
	}
	if !strings.Contains(table.String(), "| case | gorush | oncepush postgres | oncepush sqlite |") {
		t.Errorf("no table header in:\n%s", table.String())
	}

	// The -json file has the same figures.
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var back report
	if err := json.Unmarshal(b, &back); err != nil || len(back.Columns) != 3 {
		t.Errorf("-json: %v, %d columns", err, len(back.Columns))
	}

	// Nothing outlives the run: processes, the temp dir, scratch databases.
	if _, err := os.Stat(rep.TempDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temp dir %s is still there (%v)", rep.TempDir, err)
	}
	if len(rep.pids) < 3 {
		t.Errorf("pids %v: want the fake and a server per database", rep.pids)
	}
	for _, pid := range rep.pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d is still there (%v)", pid, err)
		}
	}
	conn, err := pgx.Connect(context.Background(), pg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, db := range append(rep.databases, rep.ceilingDB) {
		name := db[strings.LastIndex(db, "/")+1:]
		var n int
		if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil || n != 0 {
			t.Errorf("scratch database %s: %d left (%v)", name, n, err)
		}
	}
}

// Bad flags are refused with exit code 2, naming the flag.
func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-drivers", "mysql"},
		{"-fanout-sends", "750"},
		{"-count", "0"},
		{"-ceiling-batches", "100,x"},
		{"stray"},
	} {
		var stderr bytes.Buffer
		if code := runMain(t.Context(), args, &bytes.Buffer{}, &stderr); code != 2 {
			t.Errorf("%v: exit code %d, want 2", args, code)
		}
		if flagName := strings.TrimPrefix(args[0], "-"); args[0][0] == '-' && !strings.Contains(stderr.String(), flagName) {
			t.Errorf("%v: %q does not name the flag", args, stderr.String())
		}
	}
}

// statCPU reads utime and stime after the command, which may hold spaces
// and parentheses of its own.
func TestStatCPU(t *testing.T) {
	line := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 99 1000 10 18446744073709551615\n"
	got, err := statCPU(line)
	if err != nil || got != 3.25 {
		t.Errorf("statCPU = %v, %v; want 3.25 s (325 ticks)", got, err)
	}
	if _, err := statCPU("4242 (x) S 1 2"); err == nil {
		t.Error("a short line was read")
	}
}

// The database's share counts a backend that started between the
// snapshots whole, and one that ended not at all (never below zero).
func TestDatabaseSince(t *testing.T) {
	before := map[int]float64{10: 1.0, 11: 2.0, 12: 5.0}
	now := map[int]float64{10: 1.5, 11: 2.25, 20: 0.5} // 12 ended, 20 began
	if got := databaseSince(now, before); got != 1.25 {
		t.Errorf("databaseSince = %v, want 1.25", got)
	}
}

// The database's share of the CPU is its own backends' (issue: every
// postgres process on the server was counted, another database's included):
// a backend of another database on the same server burns CPU between two
// snapshots, and none of it is counted, while the database's own busy
// backend is.
func TestDatabaseCPUCountsOnlyItsOwnBackends(t *testing.T) {
	ctx := t.Context()
	admin := cmp.Or(os.Getenv("ONCEPUSH_TEST_DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	var td teardown
	t.Cleanup(td.run)
	own, err := scratchDatabase(ctx, &td, admin, "oncepush_bench_own_")
	if err != nil {
		t.Fatal(err)
	}
	other, err := scratchDatabase(ctx, &td, admin, "oncepush_bench_other_")
	if err != nil {
		t.Fatal(err)
	}
	connect := func(url string) (*pgx.Conn, int) {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.WithoutCancel(ctx)) })
		var pid int
		if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return c, pid
	}
	// burn runs queries on c until its backend has used at least 0.15 s of
	// CPU more than at the start: a measure of work, not of time.
	burn := func(c *pgx.Conn, pid int) float64 {
		start, err := procCPU(pid)
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := c.Exec(ctx, "SELECT count(*) FROM generate_series(1, 500000)"); err != nil {
				t.Fatal(err)
			}
			now, err := procCPU(pid)
			if err != nil {
				t.Fatal(err)
			}
			if now-start >= 0.15 {
				return now - start
			}
		}
	}
	ownConn, ownPID := connect(own)
	otherConn, otherPID := connect(other)
	parts := cpuParts{database: own}

	before, err := parts.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	burned := burn(otherConn, otherPID)
	after, err := parts.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.since(before, 1).Database; got >= burned/2 {
		t.Errorf("another database's backend burned %.2f s and the database was charged %.2f s: only its own backends count", burned, got)
	}

	before, err = parts.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	burned = burn(ownConn, ownPID)
	after, err = parts.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.since(before, 1).Database; got < burned {
		t.Errorf("the database's own backend burned %.2f s and it was charged %.2f s", burned, got)
	}
}
