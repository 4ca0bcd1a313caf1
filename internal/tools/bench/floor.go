package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/postgres"
)

// floorGroup is how many sends the insert floor writes per commit: about
// what the server's grouped commits held per group at 32 connections and
// 1,300 POST/s (benchmarks §13).
const floorGroup = 10

// insertFloor is the other half of the ledger's floor on PostgreSQL (D98):
// what writing the sends alone costs, with nothing else running.
type insertFloor struct {
	Sends     int     `json:"sends"`
	SendsPerS float64 `json:"sendsPerS"`
	CPU       *cpuUse `json:"cpu"`
}

// floor writes o.count×2 single-recipient sends with a dedup key each, as
// the API writes a POST of the benchmark (a recorded request, a savepoint
// each), floorGroup per transaction through the driver's MessageInsertMany,
// from o.pgbenchClients connections, on a scratch database of its own. No
// server, no workers, no provider: the database's CPU per send is the least
// any send through the API costs it.
func floor(ctx context.Context, td *teardown, o *options, rep *report) (*insertFloor, error) {
	url, err := scratchDatabase(ctx, td, o.postgres, "oncepush_bench_floor_")
	if err != nil {
		return nil, err
	}
	rep.databases = append(rep.databases, url)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	d := postgres.New(pool)
	if _, err := d.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	n := 2 * o.count
	groups := (n + floorGroup - 1) / floorGroup
	var next atomic.Int64
	var fail firstError
	parts := cpuParts{database: url}
	before, err := parts.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	for c := range o.pgbenchClients {
		wg.Go(func() {
			for g := next.Add(1) - 1; g < int64(groups) && ctx.Err() == nil; g = next.Add(1) - 1 {
				ps := make([]*driver.MessageInsertParams, min(floorGroup, n-int(g)*floorGroup))
				for i := range ps {
					key := fmt.Sprintf("floor-%d-%d-%d", c, g, i)
					recipient := fmt.Sprintf("bench-%07d", (int(g)*floorGroup+i)%o.devices)
					hash := sha256.Sum256([]byte(key))
					ps[i] = &driver.MessageInsertParams{
						Type: "bench", Title: "bench", Body: "notification " + key, Ambiguity: "resend",
						Lifetime: 24 * time.Hour, Recipients: []string{recipient},
						NotificationIDs: []string{key}, DedupKey: key, RequestHash: hash[:],
					}
				}
				err := d.InTx(ctx, func(ctx context.Context, _ pgx.Tx, ex driver.Executor) error {
					got, err := ex.MessageInsertMany(ctx, ps)
					for _, r := range got {
						if err == nil && (r.Err != nil || r.Inserted != 1) {
							err = fmt.Errorf("a send was not written: %+v", r)
						}
					}
					return err
				})
				fail.set(err)
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if fail.err != nil {
		return nil, fail.err
	}
	after, err := parts.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	var written int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM oncepush_delivery").Scan(&written); err != nil {
		return nil, err
	}
	if written != n {
		return nil, fmt.Errorf("%d deliveries written, want %d", written, n)
	}
	u := after.since(before, n)
	return &insertFloor{Sends: n, SendsPerS: float64(n) / u.WallS, CPU: u}, nil
}
