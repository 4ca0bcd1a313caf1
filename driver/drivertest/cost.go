package drivertest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
)

// countingDriver counts the transactions and engine statements a run (or a
// group of sends) makes.
type countingDriver[TTx any] struct {
	driver.Driver[TTx]
	n   atomic.Int64 // statements, BEGIN and COMMIT included
	txs atomic.Int64 // transactions begun
}

func (d *countingDriver[TTx]) InTx(ctx context.Context, fn func(context.Context, TTx, driver.Executor) error) error {
	d.txs.Add(1)
	d.n.Add(2) // BEGIN, COMMIT
	return d.Driver.InTx(ctx, func(ctx context.Context, tx TTx, ex driver.Executor) error {
		return fn(ctx, tx, &countingExec{Executor: ex, n: &d.n})
	})
}

func (d *countingDriver[TTx]) Exec() driver.Executor {
	return &countingExec{Executor: d.Driver.Exec(), n: &d.n}
}

// countingExec counts the statements of the delivery path and of sends; a
// method the engine calls that is not listed here passes through uncounted,
// so the list must follow claim.go, submit.go, record.go, client.go and
// sendgroup.go.
type countingExec struct {
	driver.Executor
	n *atomic.Int64
}

// countUnlessEmpty counts a statement of n rows; the drivers run none for no
// rows.
func (e *countingExec) countUnlessEmpty(n int) {
	if n > 0 {
		e.n.Add(1)
	}
}

func (e *countingExec) MessageInsert(ctx context.Context, p *driver.MessageInsertParams) (int64, int, error) {
	e.n.Add(1)
	return e.Executor.MessageInsert(ctx, p)
}

func (e *countingExec) MessageInsertMany(ctx context.Context, ps []*driver.MessageInsertParams) ([]driver.MessageInserted, error) {
	e.countUnlessEmpty(len(ps))
	return e.Executor.MessageInsertMany(ctx, ps)
}

func (e *countingExec) MessageDelete(ctx context.Context, id int64) error {
	e.n.Add(1)
	return e.Executor.MessageDelete(ctx, id)
}

func (e *countingExec) DeliveryClaim(ctx context.Context, p *driver.DeliveryClaimParams) (*driver.DeliveryClaimResult, error) {
	e.n.Add(1)
	return e.Executor.DeliveryClaim(ctx, p)
}

// ClaimRead counts its three statements, however many round trips they
// take.
func (e *countingExec) ClaimRead(ctx context.Context, p *driver.ClaimReadParams) (*driver.ClaimReadResult, error) {
	e.n.Add(3)
	return e.Executor.ClaimRead(ctx, p)
}

func (e *countingExec) MessageGetMany(ctx context.Context, ids []int64) ([]*driver.Message, error) {
	e.n.Add(1)
	return e.Executor.MessageGetMany(ctx, ids)
}

func (e *countingExec) DeviceListByRecipients(ctx context.Context, r []string) ([]*driver.Device, error) {
	e.n.Add(1)
	return e.Executor.DeviceListByRecipients(ctx, r)
}

func (e *countingExec) DeviceAttemptListByDeliveries(ctx context.Context, ids []int64) ([]*driver.DeviceAttempt, error) {
	e.n.Add(1)
	return e.Executor.DeviceAttemptListByDeliveries(ctx, ids)
}

func (e *countingExec) DeliveryUpdateMany(ctx context.Context, p *driver.DeliveryUpdateManyParams) ([]driver.UpdatedDelivery, error) {
	e.countUnlessEmpty(len(p.Updates))
	return e.Executor.DeliveryUpdateMany(ctx, p)
}

func (e *countingExec) DeviceAttemptUpsertMany(ctx context.Context, p *driver.DeviceAttemptUpsertManyParams) error {
	e.countUnlessEmpty(len(p.Rows))
	return e.Executor.DeviceAttemptUpsertMany(ctx, p)
}

func (e *countingExec) DeviceAttemptMarkSending(ctx context.Context, p *driver.DeviceAttemptMarkSendingParams) ([]driver.MarkedPair, error) {
	e.countUnlessEmpty(len(p.Pairs))
	return e.Executor.DeviceAttemptMarkSending(ctx, p)
}

func (e *countingExec) DeviceDeleteMany(ctx context.Context, keys []driver.DeviceKey) (int, error) {
	e.countUnlessEmpty(len(keys))
	return e.Executor.DeviceDeleteMany(ctx, keys)
}

func (e *countingExec) WithSavepoint(ctx context.Context, fn func() error) error {
	e.n.Add(2) // SAVEPOINT, RELEASE (or ROLLBACK TO)
	return e.Executor.WithSavepoint(ctx, fn)
}

func (e *countingExec) DeliveryLeaseGetMany(ctx context.Context, ids []int64) (map[int64]int64, error) {
	e.n.Add(1)
	return e.Executor.DeliveryLeaseGetMany(ctx, ids)
}

// testBatchCostIsFixed: a batch costs a fixed handful of statements whatever
// its size — marking pairs sending in waves must not become a statement per
// pair. 10 and 200 deliveries of two devices each, one batch each: 11
// statements (BEGIN, claim, messages, devices and ledger — the three of
// ClaimRead —, COMMIT; the mark; BEGIN, deliveries, ledger, COMMIT).
func testBatchCostIsFixed[TTx any](t *testing.T, h Harness[TTx]) {
	cost := func(n int) int64 {
		b := setup(t, h, nil)
		counted := &countingDriver[TTx]{Driver: b.db.Driver(t, 0)}
		client := b.newClient(counted, func(c *oncepush.Config) {
			c.Providers = []oncepush.Provider{b.fcm, b.apns}
			c.BatchSize = n
		})
		var names []string
		for i := range n {
			names = append(names, fmt.Sprintf("r%03d", i))
			b.register(names[i], oncepush.TransportFCM, oncepush.TransportAPNs)
		}
		b.send(names, msg("cost"), nil)
		st, err := client.RunOnce(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Batches != 1 || st.Submitted != 2*n {
			t.Fatalf("stats %+v, want one batch of %d submissions", st, 2*n)
		}
		// The run ends with an empty claim; count only the batch.
		return counted.n.Load() - 3
	}
	small, large := cost(10), cost(200)
	t.Logf("statements per batch: %d at 10 deliveries, %d at 200", small, large)
	if large != small || large > 11 {
		t.Fatalf("a batch costs %d statements at 10 deliveries and %d at 200; want the same handful (≤ 11)", small, large)
	}
}

// testEligibilityCostIsFixed: with an eligibility rule, a claim costs the
// same statements however many messages its batch holds — the rule is asked
// once per batch, in one savepoint, and reads for all of it with one query —
// not a savepoint, a query and a release per message. 10 and 100
// single-recipient messages, one batch each.
func testEligibilityCostIsFixed[TTx any](t *testing.T, h Harness[TTx]) {
	cost := func(n int) (statements int64, calls int) {
		b := setup(t, h, nil)
		counted := &countingDriver[TTx]{Driver: b.db.Driver(t, 0)}
		var asked []int
		client := b.newClient(counted, func(c *oncepush.Config) {
			c.Providers = []oncepush.Provider{b.fcm}
			c.BatchSize = n
			c.Eligibility = func(ctx context.Context, asks []oncepush.Ask) ([]oncepush.Answer, error) {
				asked = append(asked, len(asks))
				tx, _ := oncepush.ClaimTx[TTx](ctx)
				counted.n.Add(1)
				return nil, b.db.Exec(ctx, tx, "SELECT count(*) FROM oncepush_device")
			}
		})
		for i := range n {
			name := fmt.Sprintf("r%03d", i)
			b.register(name, oncepush.TransportFCM)
			b.send([]string{name}, msg(name), nil)
		}
		st, err := client.RunOnce(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Batches != 1 || st.Submitted != n {
			t.Fatalf("stats %+v, want one batch of %d submissions", st, n)
		}
		if len(asked) != 1 || asked[0] != n {
			t.Fatalf("eligibility asked %v (asks per call); want one call about all %d messages", asked, n)
		}
		return counted.n.Load() - 3, len(asked)
	}
	small, _ := cost(10)
	large, _ := cost(100)
	t.Logf("statements per batch with eligibility: %d at 10 messages, %d at 100", small, large)
	if large != small || large > 14 {
		t.Fatalf("a batch with eligibility costs %d statements at 10 messages and %d at 100; want the same handful (≤ 14)", small, large)
	}
}
