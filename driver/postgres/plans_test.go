package postgres

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush/internal/sqlfile"
	"github.com/oncepush/oncepush/internal/testdb"
)

// The tables that grow with traffic: no named query may read one of them
// whole. The others (API keys, locks, migrations) hold a handful of rows.
var ledgerTables = []string{
	"oncepush_message", "oncepush_delivery", "oncepush_device_attempt", "oncepush_device",
	"oncepush_idempotency", "oncepush_preference", "oncepush_revoked_session",
}

// planData fills a ledger large enough, and analyzed, for the planner to
// choose as it would in production: 10,000 messages × 4 deliveries, one
// recipient ("heavy") with a delivery in every message (a deep history),
// devices and their attempts, sessions, preferences, recorded requests.
const planData = `
INSERT INTO oncepush_message (type, title, body, ambiguity, scheduled_at, expires_at, created_at)
SELECT 'plan', 't', 'b', 'resend', now() - i * interval '1 minute', now() + interval '1 day', now() - i * interval '1 minute'
FROM generate_series(1, 10000) i;
INSERT INTO oncepush_delivery (message_id, recipient, notification_id, dedup_key, status, next_attempt_at, created_at, finished_at)
SELECT m.id, CASE WHEN j = 0 THEN 'heavy' ELSE 'r' || ((m.id * 4 + j) % 3000) END, md5(m.id || ':' || j), 'k' || m.id,
       CASE WHEN m.id % 10 = 0 THEN 'pending' ELSE 'sent' END, m.created_at, m.created_at,
       CASE WHEN m.id % 10 = 0 THEN NULL ELSE m.created_at END
FROM oncepush_message m, generate_series(0, 3) j;
INSERT INTO oncepush_device (recipient, transport, token, token_key, session, created_at, registered_at)
SELECT 'r' || (i % 3000), 'fcm', 'tok' || i, 'tok' || i, CASE WHEN i % 2 = 0 THEN 's' || i ELSE '' END, now(), now()
FROM generate_series(1, 6000) i;
INSERT INTO oncepush_device_attempt (delivery_id, device_id, transport, state, updated_at)
SELECT id, id % 6000 + 1, 'fcm', 'accepted', now() FROM oncepush_delivery;
INSERT INTO oncepush_revoked_session (session, revoked_at) SELECT 'x' || i, now() FROM generate_series(1, 3000) i;
INSERT INTO oncepush_preference (recipient, updated_at) SELECT 'r' || i, now() FROM generate_series(1, 3000) i;
INSERT INTO oncepush_idempotency (key, request_hash, message_id, queued, duplicates, created_at)
SELECT 'k' || id, '\x01', id, 4, 0, created_at FROM oncepush_message;
ANALYZE;
`

// planner is a migrated schema holding planData, and one connection to it.
type planner struct {
	t    *testing.T
	conn *pgx.Conn
}

func newPlanner(t *testing.T) *planner {
	t.Helper()
	pool := testdb.Pool(t, testdb.Schema(t), 2)
	if _, err := New(pool).Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	c, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Release)
	if _, err := c.Exec(t.Context(), planData); err != nil {
		t.Fatalf("plan data: %v", err)
	}
	return &planner{t: t, conn: c.Conn()}
}

// planNode is a node of EXPLAIN (FORMAT JSON).
type planNode struct {
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	Index     string     `json:"Index Name"`
	IndexCond string     `json:"Index Cond"`
	Filter    string     `json:"Filter"`
	Plans     []planNode `json:"Plans"`
}

func (n *planNode) walk(fn func(*planNode)) {
	fn(n)
	for i := range n.Plans {
		n.Plans[i].walk(fn)
	}
}

func (n *planNode) String() string {
	var b strings.Builder
	var write func(n *planNode, depth int)
	write = func(n *planNode, depth int) {
		fmt.Fprintf(&b, "%s%s", strings.Repeat("  ", depth), n.NodeType)
		if n.Relation != "" {
			fmt.Fprintf(&b, " on %s", n.Relation)
		}
		if n.Index != "" {
			fmt.Fprintf(&b, " using %s", n.Index)
		}
		if n.IndexCond != "" {
			fmt.Fprintf(&b, " [index cond: %s]", n.IndexCond)
		}
		if n.Filter != "" {
			fmt.Fprintf(&b, " [filter: %s]", n.Filter)
		}
		b.WriteByte('\n')
		for i := range n.Plans {
			write(&n.Plans[i], depth+1)
		}
	}
	write(n, 0)
	return b.String()
}

// plan prepares the named query as the driver's statements are prepared
// (PostgreSQL infers the parameter types, as it does for pgx's prepared
// statements) and explains its execution with args under plan_cache_mode
// mode: force_custom_plan is what the first executions of a statement get,
// force_generic_plan what PostgreSQL may switch to after five. Args are SQL
// literals; nil means NULL for every parameter (a generic plan ignores the
// values).
func (p *planner) plan(name, mode string, args []string) *planNode {
	p.t.Helper()
	ctx := p.t.Context()
	text, _ := sqlfile.Positional(q.Get(name))
	if _, err := p.conn.Exec(ctx, "PREPARE plan_probe AS "+text); err != nil {
		p.t.Fatalf("%s: prepare: %v", name, err)
	}
	defer func() {
		if _, err := p.conn.Exec(ctx, "DEALLOCATE plan_probe"); err != nil {
			p.t.Fatal(err)
		}
	}()
	if args == nil {
		var n int
		if err := p.conn.QueryRow(ctx, "SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = 'plan_probe'").Scan(&n); err != nil {
			p.t.Fatal(err)
		}
		args = slices.Repeat([]string{"NULL"}, n)
	}
	if _, err := p.conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
		p.t.Fatal(err)
	}
	execute := "EXECUTE plan_probe"
	if len(args) > 0 {
		execute += "(" + strings.Join(args, ", ") + ")"
	}
	var out []byte
	if err := p.conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+execute).Scan(&out); err != nil {
		p.t.Fatalf("%s (%s): explain: %v", name, mode, err)
	}
	var doc []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(out, &doc); err != nil || len(doc) != 1 {
		p.t.Fatalf("%s: EXPLAIN output %s: %v", name, out, err)
	}
	return &doc[0].Plan
}

// seqScans names the ledger tables the plan reads whole.
func seqScans(plan *planNode) []string {
	var out []string
	plan.walk(func(n *planNode) {
		if n.NodeType == "Seq Scan" && slices.Contains(ledgerTables, n.Relation) {
			out = append(out, n.Relation)
		}
	})
	return out
}

var planModes = []string{"force_custom_plan", "force_generic_plan"}

// TestCleanupReadsThroughIndexes: every statement of a cleanup round reads
// the ledger through indexes, never a whole table, so that a batch costs the
// same however many messages and deliveries are retained.
func TestCleanupReadsThroughIndexes(t *testing.T) {
	t.Parallel()
	p := newPlanner(t)
	cases := map[string][]string{
		"DeliveryDeleteFinished":    {"now()", "604800000000", "1000"},
		"MessageLockMany":           {"'{1,2,3}'"},
		"MessageDeleteOrphans":      {"'{1,2,3}'"},
		"MessageSweepOrphans":       {"5000", "1000"},
		"IdempotencyLockMany":       {"'{k1,k2,k3}'"},
		"IdempotencyDeleteFreed":    {"'{k1,k2,k3}'"},
		"SessionDeleteRevoked":      {"now()", "604800000000", "1000"},
		"DeliveryOverdue":           {"now()", "160000000"},
		"DeliveryDeleteByRecipient": {"'heavy'"},
	}
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		for _, mode := range planModes {
			plan := p.plan(name, mode, cases[name])
			if scans := seqScans(plan); len(scans) > 0 {
				t.Errorf("%s (%s) reads %v whole:\n%s", name, mode, scans, plan)
			}
		}
	}
}
