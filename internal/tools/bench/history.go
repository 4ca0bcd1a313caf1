package main

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// fillHistory writes a ledger's history into oncepush's PostgreSQL
// database by SQL: finished deliveries (sent, in the past) and
// future-scheduled ones (pending, due in 30 days), all of one message.
// The claim must not slow down with them (issue 11: ≥ 80 % of the empty
// figure).
func fillHistory(ctx context.Context, database string, finished, future int) error {
	conn, err := pgx.Connect(ctx, database)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, q := range []struct {
		what string
		sql  string
		args []any
	}{
		{"the history's message", `INSERT INTO oncepush_message (type, title, ambiguity, scheduled_at, expires_at, created_at)
VALUES ('bench-history', 'history', 'resend', now() - interval '30 days', now() + interval '60 days', now() - interval '30 days')`, nil},
		{"finished deliveries", `INSERT INTO oncepush_delivery (message_id, recipient, notification_id, status, attempts,
    next_attempt_at, created_at, finished_at)
SELECT (SELECT max(id) FROM oncepush_message WHERE type = 'bench-history'), 'history-' || (g % 100000), 'history-' || g, 'sent', 1,
       now() - interval '30 days' + g * interval '1 millisecond', now() - interval '30 days', now() - interval '29 days'
FROM generate_series(1, $1::bigint) g`, []any{finished}},
		{"future-scheduled deliveries", `INSERT INTO oncepush_delivery (message_id, recipient, notification_id, status,
    next_attempt_at, created_at)
SELECT (SELECT max(id) FROM oncepush_message WHERE type = 'bench-history'), 'future-' || (g % 100000), 'future-' || g, 'pending',
       now() + interval '30 days' + g * interval '1 millisecond', now()
FROM generate_series(1, $1::bigint) g`, []any{future}},
		{"analyze", "ANALYZE oncepush_delivery", nil},
	} {
		if _, err := conn.Exec(ctx, q.sql, q.args...); err != nil {
			return fmt.Errorf("history: %s: %w", q.what, err)
		}
	}
	return nil
}
