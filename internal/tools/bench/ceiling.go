package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// The ledger ceiling (D78): the engine's claim and record, as
// driver/postgres/queries_claim.sql and queries_record.sql write them
// (DeliveryClaim, DeliveryUpdateMany), on a table with oncepush_delivery's
// columns and due index, each its own transaction, with nothing else: no
// message or device reads, no sends.
const (
	ceilingTable = `
CREATE TABLE bench_delivery (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id      bigint      NOT NULL,
    recipient       text        NOT NULL,
    notification_id text        NOT NULL,
    status          text        NOT NULL DEFAULT 'pending',
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    lease_id        bigint,
    last_error      text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL,
    finished_at     timestamptz
);
CREATE INDEX bench_delivery_due ON bench_delivery (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX bench_delivery_finished ON bench_delivery (finished_at) WHERE status <> 'pending';`

	ceilingFill = `
INSERT INTO bench_delivery (message_id, recipient, notification_id, next_attempt_at, created_at)
SELECT g, 'r' || g, 'n' || g, now() - interval '1 hour' + g * interval '1 microsecond', now()
FROM generate_series(1, $1::bigint) g`

	// One script run is one batch: the claim (pick due rows in due order,
	// skipping those another client locked, and lease them), then the
	// record of every row as sent, guarded by the lease.
	ceilingScript = `\set lease random(1, 1000000000000)
WITH due AS MATERIALIZED (
    SELECT d.id FROM bench_delivery d
    WHERE d.status = 'pending' AND d.next_attempt_at <= now()
    ORDER BY d.next_attempt_at, d.id
    LIMIT :batch
    FOR UPDATE OF d SKIP LOCKED
), claimed AS (
    UPDATE bench_delivery d
    SET lease_id = :lease, next_attempt_at = now() + interval '60 seconds'
    FROM due WHERE d.id = due.id
    RETURNING d.id
)
SELECT coalesce(array_agg(id), '{}')::text AS ids FROM claimed
\gset
UPDATE bench_delivery d
SET status = 'sent', attempts = d.attempts + 1, lease_id = NULL, finished_at = now()
WHERE d.id = ANY (:ids::bigint[]) AND d.lease_id = :lease;
`
)

// findPgbench is the pgbench to run: the one given, else on PATH, else
// the newest of Debian's /usr/lib/postgresql/*/bin.
func findPgbench(given string) (string, error) {
	if given != "" {
		return given, nil
	}
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	if len(found) == 0 {
		return "", errors.New("pgbench is not on PATH nor in /usr/lib/postgresql/*/bin: install it (Debian: the postgresql-NN server package ships it) or pass -pgbench PATH")
	}
	slices.Sort(found)
	return found[len(found)-1], nil
}

var pgbenchTPS = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

// ceiling runs the claim + record loop at each batch size on a scratch
// database (its URL goes into rep) and returns rows/s by batch size.
func ceiling(ctx context.Context, td *teardown, o *options, dir string, rep *report) (map[int]float64, error) {
	bin, err := findPgbench(o.pgbench)
	if err != nil {
		return nil, err
	}
	db, err := scratchDatabase(ctx, td, o.postgres, "oncepush_bench_ceiling_")
	if err != nil {
		return nil, err
	}
	rep.ceilingDB = db
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, ceilingTable); err != nil {
		return nil, fmt.Errorf("ceiling table: %w", err)
	}
	script := filepath.Join(dir, "claim-record.sql")
	if err := os.WriteFile(script, []byte(ceilingScript), 0o600); err != nil {
		return nil, err
	}
	out := map[int]float64{}
	for _, batch := range o.ceilingBatches {
		// Exactly the rows the run claims, so that no claim finds the queue
		// empty (a cheap claim would flatter the ceiling).
		tx := max(1, o.ceilingRows/(batch*o.pgbenchClients))
		rows := tx * batch * o.pgbenchClients
		if _, err := conn.Exec(ctx, "TRUNCATE bench_delivery"); err != nil {
			return nil, err
		}
		if _, err := conn.Exec(ctx, ceilingFill, rows); err != nil {
			return nil, fmt.Errorf("fill the ceiling table: %w", err)
		}
		if _, err := conn.Exec(ctx, "VACUUM ANALYZE bench_delivery"); err != nil {
			return nil, err
		}
		clients := strconv.Itoa(o.pgbenchClients)
		res, err := commandOutput(ctx, bin, "-n", "-M", "prepared", "-f", script, "-D", "batch="+strconv.Itoa(batch),
			"-c", clients, "-j", clients, "-t", strconv.Itoa(tx), db)
		if err != nil {
			return nil, fmt.Errorf("pgbench at batch %d: %w", batch, err)
		}
		m := pgbenchTPS.FindStringSubmatch(res)
		if m == nil {
			return nil, fmt.Errorf("pgbench at batch %d printed no tps:\n%s", batch, res)
		}
		tps, _ := strconv.ParseFloat(m[1], 64)
		var left int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM bench_delivery WHERE status = 'pending'").Scan(&left); err != nil {
			return nil, err
		}
		if left != 0 {
			return nil, fmt.Errorf("pgbench at batch %d left %d of %d rows pending: the loop did not do its work:\n%s", batch, left, rows, res)
		}
		out[batch] = tps * float64(batch)
	}
	return out, nil
}

// commandOutput runs a command to its end and returns its output (stdout
// and stderr); a failure carries the output.
func commandOutput(ctx context.Context, bin string, args ...string) (string, error) {
	b, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return string(b), fmt.Errorf("%s: %w\n%s", filepath.Base(bin), err, b)
	}
	return string(b), nil
}
