package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/internal/upgradetest"
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
// choose as it would in production: 20,000 messages × 3 deliveries to 5,000
// recipients (ids in send order, as real sends assign them), one recipient
// ("heavy") with a delivery in every hundredth message (a deep history that
// is still a small share of the table, as a busy recipient's is), one
// message (id 1) with 200 more (a long list), devices and some of their
// attempts, a week of revoked sessions, preferences, recorded requests.
const planData = `
INSERT INTO oncepush_message (type, title, body, ambiguity, scheduled_at, expires_at, created_at)
SELECT 'plan', 't', 'b', 'resend', now() - i * interval '1 minute', now() + interval '1 day', now() - i * interval '1 minute'
FROM generate_series(1, 20000) i;
INSERT INTO oncepush_delivery (message_id, recipient, notification_id, dedup_key, status, next_attempt_at, created_at, finished_at)
SELECT m.id, CASE WHEN j = 0 THEN 'heavy' ELSE 'r' || ((m.id * 3 + j) % 5000) END, md5(m.id || ':' || j), 'k' || m.id,
       CASE WHEN m.id % 10 = 0 THEN 'pending' ELSE 'sent' END, m.created_at, m.created_at,
       CASE WHEN m.id % 10 = 0 THEN NULL ELSE m.created_at END
FROM oncepush_message m, generate_series(0, 3) j
WHERE j > 0 OR m.id % 100 = 0
ORDER BY m.id, j;
INSERT INTO oncepush_delivery (message_id, recipient, notification_id, status, next_attempt_at, created_at)
SELECT 1, 'b' || i, md5('b' || i), 'pending', now(), now() FROM generate_series(1, 200) i;
INSERT INTO oncepush_device (recipient, transport, token, token_key, session, created_at, registered_at)
SELECT 'r' || (i % 5000), 'fcm', 'tok' || i, 'tok' || i, CASE WHEN i % 2 = 0 THEN 's' || i ELSE '' END, now(), now()
FROM generate_series(1, 10000) i;
INSERT INTO oncepush_device_attempt (delivery_id, device_id, transport, token_key, state, updated_at)
SELECT id, id % 10000 + 1, 'fcm', 'tok' || (id % 10000 + 1), 'accepted', now() FROM oncepush_delivery WHERE id % 10 = 0;
INSERT INTO oncepush_revoked_session (session, revoked_at) SELECT 'x' || i, now() FROM generate_series(1, 30000) i;
INSERT INTO oncepush_preference (recipient, updated_at) SELECT 'r' || i, now() FROM generate_series(1, 5000) i;
INSERT INTO oncepush_idempotency (key, request_hash, message_id, queued, duplicates, created_at)
SELECT 'k' || id, '\x01', id, 3, 0, created_at FROM oncepush_message;
ANALYZE;
`

// planner is a migrated schema holding planData, and one connection to it.
type planner struct {
	conn *pgx.Conn
}

func newPlanner(t *testing.T) *planner {
	t.Helper()
	pool := testdb.Pool(t, testdb.Schema(t), 2)
	upgradetest.MigrateAll(t, New(pool))
	c, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Release)
	if _, err := c.Exec(t.Context(), planData); err != nil {
		t.Fatalf("plan data: %v", err)
	}
	return &planner{conn: c.Conn()}
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
func (p *planner) plan(t *testing.T, name, mode string, args []string) *planNode {
	t.Helper()
	ctx := t.Context()
	text, _ := sqlfile.Positional(queryText(name))
	if _, err := p.conn.Exec(ctx, "PREPARE plan_probe AS "+text); err != nil {
		t.Fatalf("%s: prepare: %v", name, err)
	}
	defer func() {
		if _, err := p.conn.Exec(ctx, "DEALLOCATE plan_probe"); err != nil {
			t.Fatal(err)
		}
	}()
	if args == nil {
		var n int
		if err := p.conn.QueryRow(ctx, "SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = 'plan_probe'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		args = slices.Repeat([]string{"NULL"}, n)
	}
	if _, err := p.conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
		t.Fatal(err)
	}
	// The settings the driver plans this statement under, as it applies
	// them: for the transaction, around the statement.
	for _, setting := range plannerOff[name] {
		if _, err := p.conn.Exec(ctx, "SELECT set_config($1, 'off', false)", setting); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if _, err := p.conn.Exec(context.WithoutCancel(ctx), "SELECT set_config($1, 'on', false)", setting); err != nil {
				t.Fatal(err)
			}
		}()
	}
	execute := "EXECUTE plan_probe"
	if len(args) > 0 {
		execute += "(" + strings.Join(args, ", ") + ")"
	}
	var out []byte
	if err := p.conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+execute).Scan(&out); err != nil {
		t.Fatalf("%s (%s): explain: %v", name, mode, err)
	}
	var doc []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(out, &doc); err != nil || len(doc) != 1 {
		t.Fatalf("%s: EXPLAIN output %s: %v", name, out, err)
	}
	return &doc[0].Plan
}

// queryText is the named query of the engine's set or the server's.
func queryText(name string) string {
	if text, ok := q[name]; ok {
		return text
	}
	return sq.Get(name)
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

// TestQueryPlans explains the named queries on one analyzed ledger.
func TestQueryPlans(t *testing.T) {
	t.Parallel()
	p := newPlanner(t)
	t.Run("EveryQueryReadsThroughIndexes", func(t *testing.T) { everyQueryReadsThroughIndexes(t, p) })
	t.Run("CleanupReadsThroughIndexes", func(t *testing.T) { cleanupReadsThroughIndexes(t, p) })
	t.Run("ListsSeekTheirCursor", func(t *testing.T) { listsSeekTheirCursor(t, p) })
	t.Run("MessageListSeeksItsCursor", func(t *testing.T) { messageListSeeksItsCursor(t, p) })
	t.Run("MarkFindsItsDeliveriesByID", func(t *testing.T) { markFindsItsDeliveriesByID(t, p) })
}

// markFindsItsDeliveriesByID: the statement that marks a wave sending finds
// the wave's deliveries by id on the primary key, in custom and generic
// plans — never through the due index. Its conditions (pending, enough lease
// left) match that partial index's predicate and column, and the planner,
// which estimates the leased range as nearly empty, took it; but on a busy
// queue that range holds an entry for every claim since the last vacuum,
// and a mark read tens of thousands of them: 52 ms a wave, a drain at a
// third of its speed.
func markFindsItsDeliveriesByID(t *testing.T, p *planner) {
	// A queue filled after the statistics were taken on a nearly empty
	// table (autovacuum analyzes a new table early), then drained: most
	// pending deliveries due, a few thousand leased (due again at their
	// lease's end). Rolled back.
	ctx := t.Context()
	for _, stmt := range []string{
		"BEGIN",
		"DELETE FROM oncepush_device_attempt",
		"DELETE FROM oncepush_delivery WHERE id > 10",
		"ANALYZE oncepush_delivery",
		"INSERT INTO oncepush_delivery (message_id, recipient, notification_id, status, next_attempt_at, created_at, lease_id) " +
			"SELECT 1, 'q' || i, md5('q' || i), 'pending', now() + CASE WHEN i % 20 = 0 THEN interval '100 s' ELSE interval '0' END, now(), " +
			"CASE WHEN i % 20 = 0 THEN 7 END FROM generate_series(1, 100000) i",
	} {
		if _, err := p.conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	defer func() {
		if _, err := p.conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
	}()
	args := []string{"NULL", "'{10,20,30}'", "7", "52500000000", "'{1,2,3}'", "'{fcm,fcm,fcm}'", "'{a,b,c}'", "'{0,5,5}'"}
	for _, mode := range planModes {
		plan := p.plan(t, "DeviceAttemptMarkSending", mode, args)
		plan.walk(func(n *planNode) {
			if n.Index == "oncepush_delivery_due" || n.NodeType == "Seq Scan" && n.Relation == "oncepush_delivery" {
				t.Errorf("mark (%s) reads the deliveries by %s %s, not by id on the primary key:\n%s", mode, n.NodeType, n.Index, plan)
			}
		})
	}
}

// everyQueryReadsThroughIndexes: no named query reads a ledger table whole in
// its generic plan (the one whose choice does not depend on the values, so
// NULL stands for each), as TestQueriesReadThroughIndexes checks for SQLite:
// the engine's queries and the server's.
func everyQueryReadsThroughIndexes(t *testing.T, p *planner) {
	names := slices.Concat(slices.Collect(maps.Keys(q)), slices.Collect(maps.Keys(sq)))
	slices.Sort(names)
	for _, name := range names {
		if strings.HasPrefix(name, "Migration") || strings.HasPrefix(name, "ServerMigration") || name == "Wake" {
			continue
		}
		plan := p.plan(t, name, "force_generic_plan", nil)
		if scans := seqScans(plan); len(scans) > 0 {
			t.Errorf("%s (generic plan) reads %v whole:\n%s", name, scans, plan)
		}
	}
}

// cleanupReadsThroughIndexes: every statement of a cleanup round reads the
// ledger through indexes, never a whole table, in custom and generic plans,
// so that a batch costs the same however many messages and deliveries are
// retained.
func cleanupReadsThroughIndexes(t *testing.T, p *planner) {
	cases := map[string][]string{
		"DeliveryDeleteFinished":    {"now()", "604800000000", "1000"},
		"MessageLockMany":           {"'{1,2,3}'"},
		"MessageDeleteOrphans":      {"'{1,2,3}'"},
		"MessageSweepOrphans":       {"5000", "1000"},
		"IdempotencyLockMany":       {"'{k1,k2,k3}'"},
		"IdempotencyDeleteFreed":    {"'{k1,k2,k3}'"},
		"DeliveryOverdue":           {"now()", "160000000"},
		"DeliveryDeleteByRecipient": {"'heavy'"},
	}
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		for _, mode := range planModes {
			plan := p.plan(t, name, mode, cases[name])
			if scans := seqScans(plan); len(scans) > 0 {
				t.Errorf("%s (%s) reads %v whole:\n%s", name, mode, scans, plan)
			}
		}
	}
}

// listsSeekTheirCursor: a page of a list, first or deep, reads its rows
// through the index with the cursor in the index condition, in index order,
// stopping at the page's end: it never reads (and filters out) the rows
// before the cursor. A condition such as "@before_id = 0 OR id < @before_id"
// is folded away in a custom plan but is a filter in a generic one, which
// PostgreSQL may choose for a prepared statement after five executions: the
// 1,000th page of a history would read 50,000 rows to return 50.
func listsSeekTheirCursor(t *testing.T, p *planner) {
	var heavyMid, messageMid int64
	if err := p.conn.QueryRow(t.Context(), `SELECT
		(SELECT id FROM oncepush_delivery WHERE recipient = 'heavy' ORDER BY id OFFSET 100 LIMIT 1),
		(SELECT id FROM oncepush_delivery WHERE message_id = 1 ORDER BY id OFFSET 100 LIMIT 1)`).Scan(&heavyMid, &messageMid); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, page string
		args       []string
		table      string // the listed table
		cond       string // in the index condition: the cursor's, for a paged list
		paged      bool   // read in index order, stopping at the limit
	}{
		// The engine asks for the first page as "before the largest id".
		{"DeliveryListByRecipient", "first", []string{"'heavy'", fmt.Sprint(int64(math.MaxInt64)), "50"}, "oncepush_delivery", "id <", true},
		{"DeliveryListByRecipient", "deep", []string{"'heavy'", fmt.Sprint(heavyMid), "50"}, "oncepush_delivery", "id <", true},
		{"DeliveryListByMessage", "first", []string{"1", "0", "50"}, "oncepush_delivery", "id >", true},
		{"DeliveryListByMessage", "deep", []string{"1", fmt.Sprint(messageMid), "50"}, "oncepush_delivery", "id >", true},
		// A recipient's devices are one page: at most 10 are kept.
		{"DeviceListByRecipient", "only", []string{"'r1'"}, "oncepush_device", "recipient =", false},
	}
	for _, tc := range cases {
		for _, mode := range planModes {
			plan := p.plan(t, tc.name, mode, tc.args)
			var scans []*planNode
			plan.walk(func(n *planNode) {
				if n.Relation == tc.table {
					scans = append(scans, n)
				}
			})
			ok := len(scans) == 1 && scans[0].Filter == ""
			if ok {
				scan := scans[0]
				cond := scan.IndexCond
				if scan.NodeType == "Bitmap Heap Scan" && len(scan.Plans) == 1 {
					cond = scan.Plans[0].IndexCond
				}
				ordered := scan.NodeType == "Index Scan" || scan.NodeType == "Index Only Scan"
				ok = strings.Contains(cond, tc.cond) && (ordered || !tc.paged)
			}
			if !ok {
				t.Errorf("%s, %s page (%s): want one index scan of %s with %q in its index condition and no filter:\n%s",
					tc.name, tc.page, mode, tc.table, tc.cond, plan)
			}
		}
	}
}

// messageListSeeksItsCursor: a page of the notification list, filtered by
// category or not, is an ordered scan of its index starting at the cursor
// (no sort of everything before it), in custom and generic plans; the status
// filter, when asked for, is the only filter.
func messageListSeeksItsCursor(t *testing.T, p *planner) {
	var midAt string
	var midID int64
	if err := p.conn.QueryRow(t.Context(), `SELECT created_at::text, id FROM oncepush_message
		ORDER BY created_at DESC, id DESC OFFSET 10000 LIMIT 1`).Scan(&midAt, &midID); err != nil {
		t.Fatal(err)
	}
	cursor := []string{"'" + midAt + "'", fmt.Sprint(midID)}
	cases := []struct {
		name, index string
		args        []string
	}{
		{"MessageList", "oncepush_message_created", slices.Concat(cursor, []string{"NULL", "NULL", "''", "50"})},
		{"MessageList", "oncepush_message_created", slices.Concat(cursor, []string{"NULL", "NULL", "'pending'", "50"})},
		// Every message of the plan data is in category "": the planner may
		// as well read the creation index and check the category.
		{"MessageListByCategory", "oncepush_message_", slices.Concat([]string{"''"}, cursor, []string{"NULL", "NULL", "''", "50"})},
	}
	for _, tc := range cases {
		for _, mode := range planModes {
			plan := p.plan(t, tc.name, mode, tc.args)
			sorted, seek := false, false
			plan.walk(func(n *planNode) {
				sorted = sorted || n.NodeType == "Sort"
				if n.Relation == "oncepush_message" && strings.HasPrefix(n.Index, tc.index) && n.NodeType == "Index Scan" &&
					strings.Contains(n.IndexCond, "ROW(created_at, id) <") {
					seek = true
				}
			})
			if sorted || !seek {
				t.Errorf("%s %v (%s): want an ordered scan of %s from the cursor, no sort:\n%s", tc.name, tc.args, mode, tc.index, plan)
			}
		}
	}
}

// hotStatements are the statements of a run's claim, mark and record (and
// the server's eligibility read, which runs in the claim), with arguments
// for a batch of 100 deliveries, by parameter name.
var hotStatements = []struct {
	name string
	args map[string]string
}{
	{"DeliveryClaim", map[string]string{"now": "NULL", "max": "100", "lease_id": "7", "lease_us": "60000000", "no_campaign": "false"}},
	{"MessageGetMany", map[string]string{"ids": idList(19000, 100)}},
	{"DeviceListByRecipients", map[string]string{"recipients": arrayOf(1, 100, "r%d")}},
	{"DeviceAttemptListByDeliveries", map[string]string{"delivery_ids": idList(19000, 100)}},
	{"PreferenceGetMany", map[string]string{"recipients": arrayOf(1, 100, "r%d")}},
	{"DeviceAttemptMarkSending", map[string]string{"now": "NULL", "delivery_ids": idList(19000, 100), "lease_id": "7",
		"min_left_us": "1000000", "device_ids": idList(19000, 100), "transports": arrayOf(0, 100, "fcm"),
		"token_keys": arrayOf(19000, 100, "tok%d"), "campaign_messages": arrayOf(0, 100, "5")}},
	{"DeliveryUpdateMany", map[string]string{"now": "NULL", "lease_id": "7", "ids": idList(19000, 100),
		"statuses": arrayOf(0, 100, "sent"), "attempts": arrayOf(0, 100, "0"),
		"next_ats": arrayOf(0, 100, "NULL"), "delays_us": arrayOf(0, 100, "0"),
		"last_errors": arrayOf(0, 100, "NULL")}},
}

// idList is an array literal of n ids from first (EXECUTE takes no
// subquery).
func idList(first, n int) string {
	return arrayOf(first, n, "%d")
}

// arrayOf is an array literal of n texts, each format applied to an
// index from first.
func arrayOf(first, n int, format string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = format
		if strings.Contains(format, "%") {
			items[i] = fmt.Sprintf(format, first+i)
		}
	}
	return "'{" + strings.Join(items, ",") + "}'"
}

// positionalArgs orders named arguments as the query's positional form
// numbers them.
func positionalArgs(t *testing.T, name string, named map[string]string) []string {
	t.Helper()
	_, names := sqlfile.Positional(queryText(name))
	args := make([]string, len(names))
	for i, n := range names {
		v, ok := named[n]
		if !ok {
			t.Fatalf("%s: no argument for @%s", name, n)
		}
		args[i] = v
	}
	return args
}

// unanalyzedData is a queue as a fresh database holds it a few seconds
// into a drain, with no statistics taken yet (autovacuum has not analyzed
// the tables, or analyzed them while they were nearly empty): 20,000
// single-recipient notifications queued, the oldest 1,000 claimed and
// leased, their device attempts written, a device per recipient, some
// preferences. Nothing is analyzed.
const unanalyzedData = `
INSERT INTO oncepush_message (type, title, body, ambiguity, scheduled_at, expires_at, created_at)
SELECT 'drain', 't', 'b', 'resend', now() - interval '1 minute', now() + interval '1 day', now() - interval '1 minute'
FROM generate_series(1, 20000) i;
INSERT INTO oncepush_delivery (message_id, recipient, notification_id, dedup_key, status, next_attempt_at, created_at, lease_id)
SELECT i, 'r' || (i % 2000), md5(i::text), 'k' || i, 'pending',
       CASE WHEN i <= 1000 THEN now() + interval '100 s' ELSE now() - interval '1 minute' + i * interval '1 ms' END,
       now(), CASE WHEN i <= 1000 THEN 7 END
FROM generate_series(1, 20000) i;
INSERT INTO oncepush_device (recipient, transport, token, token_key, created_at, registered_at)
SELECT 'r' || i, 'fcm', 'tok' || i, 'tok' || i, now(), now() FROM generate_series(0, 1999) i;
INSERT INTO oncepush_device_attempt (delivery_id, device_id, transport, token_key, state, updated_at)
SELECT id, id % 2000 + 1, 'fcm', 'tok' || id, 'accepted', now() FROM oncepush_delivery WHERE id <= 1000;
INSERT INTO oncepush_preference (recipient, updated_at) SELECT 'r' || i, now() FROM generate_series(0, 1999, 4) i;
`

// TestQueryPlansWithoutStatistics: the statements a run executes for every
// batch read through indexes on tables that were never analyzed, whether
// planned while the tables were empty (a generic plan made then is kept:
// nothing invalidates it until an ANALYZE) or once they hold a queue; and
// the claim walks the due index in order from its start to now, stopping
// at the batch's end, never reading (and sorting) the whole due queue.
// Without statistics the planner takes an equality on status, and each
// element of an id list, to match 0.5 % of the rows: it took the due
// queue for a dozen rows and sorted all 20,000 for every claim, and read
// the device attempts whole for each batch.
func TestQueryPlansWithoutStatistics(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testdb.Pool(t, testdb.Schema(t), 2)
	upgradetest.MigrateAll(t, New(pool))
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Release)
	p := &planner{conn: c.Conn()}
	check := func(t *testing.T, state string) {
		for _, st := range hotStatements {
			for _, mode := range planModes {
				plan := p.plan(t, st.name, mode, positionalArgs(t, st.name, st.args))
				if scans := seqScans(plan); len(scans) > 0 {
					t.Errorf("%s (%s, %s) reads %v whole:\n%s", st.name, state, mode, scans, plan)
				}
				if st.name != "DeliveryClaim" {
					continue
				}
				var walks, sorts int
				plan.walk(func(n *planNode) {
					if n.NodeType == "Sort" {
						sorts++
					}
					if n.NodeType == "Index Scan" && strings.HasPrefix(n.Index, "oncepush_delivery_due") &&
						strings.Contains(n.IndexCond, "next_attempt_at <=") {
						walks++
					}
				})
				if walks != 2 || sorts != 0 {
					t.Errorf("claim (%s, %s): want each lane's due index walked in order up to now, no sort:\n%s", state, mode, plan)
				}
			}
		}
	}
	t.Run("Empty", func(t *testing.T) { check(t, "empty, never analyzed") })
	if _, err := p.conn.Exec(ctx, unanalyzedData); err != nil {
		t.Fatal(err)
	}
	t.Run("Queued", func(t *testing.T) { check(t, "20,000 queued, never analyzed") })
}

// TestPlannerSettingsAreGivenBack: the settings a statement is planned
// under (plannerOff) hold for that statement only; the rest of the
// transaction — an eligibility rule's queries run in the claim's — keeps
// the settings it had, the caller's own included.
func TestPlannerSettingsAreGivenBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	drv := New(testdb.Pool(t, testdb.Schema(t), 2))
	upgradetest.MigrateAll(t, drv)
	err := drv.InTx(ctx, func(ctx context.Context, tx pgx.Tx, ex driver.Executor) error {
		if _, err := tx.Exec(ctx, "SET LOCAL enable_sort = off"); err != nil {
			return err
		}
		if _, err := ex.DeliveryClaim(ctx, &driver.DeliveryClaimParams{Max: 10, LeaseID: 7, Lease: time.Minute}); err != nil {
			return err
		}
		if _, err := ex.DeviceAttemptListByDeliveries(ctx, []int64{1, 2}); err != nil {
			return err
		}
		var seq, sort string
		if err := tx.QueryRow(ctx, "SELECT current_setting('enable_seqscan'), current_setting('enable_sort')").Scan(&seq, &sort); err != nil {
			return err
		}
		if seq != "on" || sort != "off" {
			t.Errorf("after the claim's statements: enable_seqscan %s, enable_sort %s; want on (the default) and off (the caller's)", seq, sort)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
