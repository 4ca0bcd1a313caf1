package oncepush

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/enginetest"
)

// Client sends notifications and, once started, delivers them. TTx is the
// driver's transaction type: pgx.Tx for driver/postgres.
//
// A Client is safe for concurrent use. Send and the device methods work whether
// or not the client is started, so an API process can send while separate
// worker processes deliver.
type Client[TTx any] struct {
	clientCore
	driver driver.Driver[TTx]

	mu          sync.Mutex
	started     bool
	cancelClaim context.CancelFunc // stops claiming and starting sends
	cancelSend  context.CancelFunc // aborts sends in flight
	hooks       *enginetest.Hooks  // the test hooks of Start's context, for Stop
	wg          sync.WaitGroup

	// groups queues Send and SendToDevices for grouped commits (sendgroup.go).
	groups sendGroups

	// sweepAfter is where the orphan sweep of the next cleanup round starts:
	// the last message id it looked at (see Cleanup).
	sweepAfter atomic.Int64
}

// clientCore holds what does not depend on the transaction type.
type clientCore struct {
	cfg       *Config
	log       *slog.Logger
	obs       Observer // cfg.Observer, its panics contained
	providers map[Transport]Provider
	// window is the process's sends in flight per transport, shared by
	// every run of every worker: Config.ConcurrentSends bounds them all
	// together (D120).
	window *window

	transports *transportTable // cfg.Transports, checked

	throttleMu sync.Mutex
	throttle   map[Transport]time.Time // no sends to the transport before this (monotonic)

	logLimit logLimiter // the outcome log's warn lines

	wakeMu sync.Mutex
	wakers []chan struct{}

	// notify reaches other processes' workers (driver.Notify); one call is in
	// flight at a time, and calls meanwhile make it run once more.
	notify func(context.Context) error
	// exec runs statements outside any transaction (driver.Exec): the marks.
	exec func() driver.Executor
	// conflict says the database aborted a write that may succeed if run
	// again (driver.ConflictDetector); never, for a driver without one.
	conflict    func(error) bool
	notifying   atomic.Bool
	notifyAgain atomic.Bool

	// campaignWake makes the campaign loop look for work at once.
	campaignWake chan struct{}

	// ceilingShortUntil (Unix ns on the client's clock): a campaign
	// ceiling's window this client ran short on lasts until then, and its
	// claims leave the campaign lane alone meanwhile (ceiling.go).
	ceilingShortUntil atomic.Int64
}

// NewClient returns a client on the driver. It does not touch the database; call
// Migrate once per database (or run `oncepush migrate`) before use.
func NewClient[TTx any](d driver.Driver[TTx], cfg *Config) (*Client[TTx], error) {
	if d == nil {
		return nil, errors.New("oncepush: NewClient needs a driver")
	}
	if cfg == nil {
		cfg = &Config{}
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cl := &Client[TTx]{driver: d}
	cl.cfg = c
	cl.notify = d.Notify
	cl.exec = d.Exec
	cl.conflict = func(error) bool { return false }
	if cd, ok := d.(driver.ConflictDetector); ok {
		cl.conflict = cd.Conflict
	}
	cl.log = c.Logger.With(slog.String("component", "oncepush"), slog.String("client_id", c.ID))
	cl.obs = guardedObserver{o: c.Observer, log: cl.log}
	cl.transports, _ = newTransportTable(c.Transports) // checked by withDefaults
	cl.groups.writers = c.SendGroups
	if cl.groups.writers == 0 {
		cl.groups.writers = SendGroupsDefault
		if _, one := d.(driver.SingleWriter); one {
			cl.groups.writers = 1
		}
	}
	cl.providers = make(map[Transport]Provider, len(c.Providers))
	cl.window = newWindow(c.ConcurrentSends)
	cl.throttle = map[Transport]time.Time{}
	cl.campaignWake = make(chan struct{}, 1)
	for _, p := range c.Providers {
		cl.providers[p.Transport()] = p
		// One clock: the providers tell the engine's time (ClockUser).
		if u, ok := p.(ClockUser); ok && c.Clock != nil {
			u.UseClock(c.Clock)
		}
	}
	return cl, nil
}

// Config returns the client's configuration with defaults applied.
func (c *Client[TTx]) Config() Config { return *c.cfg }

// Driver returns the client's driver.
func (c *Client[TTx]) Driver() driver.Driver[TTx] { return c.driver }

// Migrate applies the engine's pending migrations. It is safe to run from
// several processes at once, and refuses a database migrated by a newer
// oncepush (ErrSchemaTooNew). The server's own tables have migrations of
// their own (package driver/serverstore), which the library never needs.
func (c *Client[TTx]) Migrate(ctx context.Context) (*driver.MigrateResult, error) {
	return c.driver.Migrate(ctx)
}

// CheckSchema returns nil when the database is migrated to exactly this build's
// version, ErrSchemaNotCurrent when migrations are pending, ErrSchemaTooNew when
// a newer build migrated it.
func (c *Client[TTx]) CheckSchema(ctx context.Context) error {
	cur, latest, err := c.driver.SchemaVersion(ctx)
	switch {
	case err != nil:
		return err
	case cur > latest:
		return fmt.Errorf("%w: database at version %d, this build knows %d", ErrSchemaTooNew, cur, latest)
	case cur < latest:
		return fmt.Errorf("%w: database at version %d, this build needs %d", ErrSchemaNotCurrent, cur, latest)
	}
	return nil
}

// now is the clock to pass to statements: nil means the database's.
func (c *clientCore) now() *time.Time {
	if c.cfg.Clock == nil {
		return nil
	}
	t := c.cfg.Clock.Now()
	return &t
}

// clockNow is the engine's clock for budgets and lease bounds: the injected
// clock when there is one (so tests move time instead of waiting for it),
// otherwise the process's monotonic clock, which keeps running while the
// process is stopped.
func (c *clientCore) clockNow() time.Time {
	if c.cfg.Clock != nil {
		return c.cfg.Clock.Now()
	}
	return time.Now()
}

// Send queues msg for the recipients in a transaction of its own and wakes the
// workers after it commits. See SendTx. Concurrent calls share one
// transaction and one commit (see docs/architecture.md, "Grouped commits"),
// each answered only once its rows are committed; a call whose context ends
// while it waits for its turn writes nothing and returns ctx.Err().
func (c *Client[TTx]) Send(ctx context.Context, recipients []string, msg Message, opts *SendOptions) (SendResult, error) {
	p, err := c.prepareCaller(recipients, &msg, opts)
	if err != nil {
		return SendResult{}, err
	}
	opts = p.recorded(opts)
	return c.sendGrouped(ctx, &groupMember{p: p, msg: &msg}, opts)
}

// SendTx queues msg for the recipients inside the caller's transaction: if it
// rolls back, nothing is sent; if it commits, every recipient's delivery exists.
// With a dedup key, a recipient who already has a pending (or retained) delivery
// with that key gets no second one — the unique index decides, not a prior read.
//
// Everything is validated before anything is written; a *ValidationError names
// the offending field. The message is one statement, all deliveries another.
func (c *Client[TTx]) SendTx(ctx context.Context, tx TTx, recipients []string, msg Message, opts *SendOptions) (SendResult, error) {
	p, err := c.prepareCaller(recipients, &msg, opts)
	if err != nil {
		return SendResult{}, err
	}
	opts = p.recorded(opts)
	ex := c.driver.UnwrapExecutor(tx)
	if opts == nil || opts.RequestHash == nil {
		res, err := c.write(ctx, ex, p, &msg, opts)
		if err == nil {
			c.queued(ctx, p, res)
		}
		return res, err
	}
	return c.writeInSavepoint(ctx, ex, p, opts, func() (SendResult, error) { return c.write(ctx, ex, p, &msg, opts) })
}

// writeInSavepoint runs write (of p) in a savepoint of the caller's
// transaction, so that its failure — a request recorded before, answered
// here with the first send's result — leaves the transaction as it was and
// usable.
func (c *clientCore) writeInSavepoint(ctx context.Context, ex driver.Executor, p *prepared, opts *SendOptions, write func() (SendResult, error)) (SendResult, error) {
	var res SendResult
	err := ex.WithSavepoint(ctx, func() error {
		var err error
		res, err = write()
		return err
	})
	if errors.Is(err, driver.ErrRequestRecorded) {
		return c.replay(ctx, ex, opts)
	}
	if err == nil {
		c.queued(ctx, p, res)
	}
	return res, err
}

// replay answers a recorded request: the first send's result, or
// ErrDedupConflict when the key came with a different request.
func (c *clientCore) replay(ctx context.Context, ex driver.Executor, opts *SendOptions) (SendResult, error) {
	rec, err := ex.IdempotencyGet(ctx, opts.DedupKey)
	if err != nil {
		return SendResult{}, fmt.Errorf("oncepush: read recorded request: %w", err)
	}
	if !bytes.Equal(rec.RequestHash, opts.RequestHash) {
		return SendResult{}, ErrDedupConflict
	}
	c.obs.Queued(0, rec.Queued+rec.Duplicates)
	return SendResult{MessageID: rec.MessageID, Queued: rec.Queued, Duplicates: rec.Duplicates, Replayed: true}, nil
}

func (c *clientCore) write(ctx context.Context, ex driver.Executor, p *prepared, msg *Message, opts *SendOptions) (SendResult, error) {
	if opts == nil {
		opts = &SendOptions{}
	}
	id, n, err := ex.MessageInsert(ctx, c.insertParams(p, msg, opts))
	if errors.Is(err, driver.ErrRequestRecorded) {
		return SendResult{}, err
	}
	if err != nil {
		return SendResult{}, fmt.Errorf("oncepush: write message: %w", err)
	}
	return c.written(ctx, ex, p, opts, id, n)
}

// insertParams is the driver's view of a prepared send. The recipients go
// in byte order, the order in which every send takes the locks of its
// deliveries' (recipient, dedup key) (docs/architecture.md, "Lock order"); p keeps the caller's order, which the request's hash is over.
func (c *clientCore) insertParams(p *prepared, msg *Message, opts *SendOptions) *driver.MessageInsertParams {
	var scheduled *time.Time
	if !opts.ScheduledAt.IsZero() {
		scheduled = &opts.ScheduledAt
	}
	recipients := slices.Clone(p.recipients)
	slices.Sort(recipients)
	nids := make([]string, len(recipients))
	for i, r := range recipients {
		nids[i] = notificationIDFor(msg.Type, r, opts.DedupKey)
	}
	return &driver.MessageInsertParams{
		Now: c.now(), Type: msg.Type, Title: msg.Title, Body: msg.Body, Data: p.data, Link: msg.Link,
		Image: p.image, Category: opts.Category, Ambiguity: string(p.policy),
		ScheduledAt: scheduled, Lifetime: p.lifetime,
		Recipients: recipients, NotificationIDs: nids, DedupKey: opts.DedupKey,
		RequestHash: opts.RequestHash, Duplicates: p.dupes,
	}
}

// written finishes a send whose message id and insert count MessageInsert
// returned: a message without deliveries is deleted again, the workers are
// woken unless the wake-up is deferred.
func (c *clientCore) written(ctx context.Context, ex driver.Executor, p *prepared, opts *SendOptions, id int64, n int) (SendResult, error) {
	res := SendResult{MessageID: id, Queued: n, Duplicates: len(p.recipients) - n + p.dupes}
	if n == 0 {
		// Every recipient was a duplicate: keep no message without deliveries.
		if err := ex.MessageDelete(ctx, id); err != nil {
			return SendResult{}, fmt.Errorf("oncepush: delete duplicate message: %w", err)
		}
		res.MessageID = 0
		return res, nil
	}
	if opts.ScheduledAt.IsZero() && !opts.DeferWake {
		if err := ex.Wake(ctx); err != nil {
			return SendResult{}, fmt.Errorf("oncepush: wake workers: %w", err)
		}
	}
	return res, nil
}

// queued tells the observer what a written send queued, and logs what it
// dropped: once per send, when its rows are written for good (committed, or
// in the caller's transaction), so that a group written again after the
// database aborted it is not counted twice.
func (c *clientCore) queued(ctx context.Context, p *prepared, res SendResult) {
	c.obs.Queued(res.Queued, res.Duplicates)
	if p.dropped != "" && res.Queued > 0 {
		c.log.WarnContext(ctx, "image dropped: providers show only https images",
			slog.Int64("message_id", res.MessageID), slog.String("image", p.dropped))
	}
}

// RegisterDevice registers (or renews) a device for d.Recipient. A token owned by
// another recipient moves to this one under a new device id (a phone changing
// hands); the recipient keeps its MaxDevicesPerRecipient most recently registered
// devices. A device bound to a revoked session is refused with ErrSessionRevoked.
// The returned Device holds the token in canonical form.
func (c *Client[TTx]) RegisterDevice(ctx context.Context, d Device) (*Device, error) {
	var dev *Device
	err := c.againOnConflict(ctx, "register device", func() (err error) {
		dev, err = c.registerDevice(ctx, c.driver.Exec(), d)
		return err
	})
	return dev, err
}

// RegisterDeviceTx is RegisterDevice inside the caller's transaction.
func (c *Client[TTx]) RegisterDeviceTx(ctx context.Context, tx TTx, d Device) (*Device, error) {
	return c.registerDevice(ctx, c.driver.UnwrapExecutor(tx), d)
}

func (c *clientCore) registerDevice(ctx context.Context, ex driver.Executor, d Device) (*Device, error) {
	token, key, err := c.transports.normalizeDevice(&d)
	if err != nil {
		return nil, err
	}
	if err := c.providerAccepts(d.Transport, token); err != nil {
		return nil, err
	}
	return c.storeDevice(ctx, ex, &driver.DeviceRegisterParams{
		Recipient: d.Recipient, Transport: string(d.Transport), Token: token, TokenKey: key,
		Platform: d.Platform, Session: d.Session, Locale: d.Locale, TimeZone: d.TimeZone, Tags: d.Tags,
	})
}

// providerAccepts asks the transport's provider, if it checks tokens
// (TokenValidator), whether it takes the canonical token.
func (c *clientCore) providerAccepts(t Transport, token string) error {
	if v, ok := c.providers[t].(TokenValidator); ok {
		if err := v.ValidateToken(Token(token)); err != nil {
			return asValidation("token", err)
		}
	}
	return nil
}

// storeDevice writes a checked registration: p with the token in canonical
// form and its key.
func (c *clientCore) storeDevice(ctx context.Context, ex driver.Executor, p *driver.DeviceRegisterParams) (*Device, error) {
	p.Now, p.MaxPerRecipient = c.now(), c.cfg.MaxDevicesPerRecipient
	row, err := ex.DeviceRegister(ctx, p)
	if err != nil {
		if errors.Is(err, driver.ErrSessionRevoked) || errors.Is(err, driver.ErrTokenRegistered) {
			return nil, err
		}
		return nil, fmt.Errorf("oncepush: register device: %w", err)
	}
	dev := deviceFromRow(row)
	return &dev, nil
}

func deviceFromRow(r *driver.Device) Device {
	return Device{
		ID: r.ID, Recipient: r.Recipient, Transport: Transport(r.Transport), Token: Token(r.Token),
		Platform: r.Platform, Session: r.Session, Locale: r.Locale, TimeZone: r.TimeZone,
		Tags: r.Tags, CreatedAt: r.CreatedAt, RegisteredAt: r.RegisteredAt,
	}
}

// UnregisterDevice removes the (transport, token) registration. With a
// recipient, only that recipient's registration is removed. It answers the same
// — nil — whether the token was the recipient's, someone else's or absent, so the
// answer tells a caller nothing about other people's devices.
func (c *Client[TTx]) UnregisterDevice(ctx context.Context, recipient string, transport Transport, token Token) error {
	if recipient != "" {
		if err := validateRecipient("recipient", recipient); err != nil {
			return err
		}
	}
	_, key, err := c.transports.normalizeToken(transport, string(token))
	if err != nil {
		return err
	}
	_, err = c.driver.Exec().DeviceUnregister(ctx, &driver.DeviceUnregisterParams{
		Transport: string(transport), TokenKey: key, Recipient: recipient,
	})
	if err != nil {
		return fmt.Errorf("oncepush: unregister device: %w", err)
	}
	return nil
}

// Devices lists a recipient's devices, most recently registered first.
func (c *Client[TTx]) Devices(ctx context.Context, recipient string) ([]Device, error) {
	if err := validateRecipient("recipient", recipient); err != nil {
		return nil, err
	}
	rows, err := c.driver.Exec().DeviceListByRecipient(ctx, recipient)
	if err != nil {
		return nil, fmt.Errorf("oncepush: list devices: %w", err)
	}
	out := make([]Device, len(rows))
	for i, r := range rows {
		out[i] = deviceFromRow(r)
	}
	return out, nil
}

// DeviceByToken returns the registration of a (transport, token), in any
// spelling of the token, or ErrNotFound. The error for a malformed token is
// a *ValidationError naming "transport" or "token".
func (c *Client[TTx]) DeviceByToken(ctx context.Context, transport Transport, token Token) (*Device, error) {
	_, key, err := c.transports.normalizeToken(transport, string(token))
	if err != nil {
		return nil, err
	}
	row, err := c.driver.Exec().DeviceGetByToken(ctx, string(transport), key)
	if errors.Is(err, driver.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("oncepush: look up a device: %w", err)
	}
	d := deviceFromRow(row)
	return &d, nil
}

// RevokeSession stops every device bound to the session at once, even one whose
// app never unregistered: its registrations are deleted, and a registration that
// races in afterwards under the same session is refused (ErrSessionRevoked) for
// the retention period.
func (c *Client[TTx]) RevokeSession(ctx context.Context, session string) error {
	if err := validateSession(session); err != nil {
		return err
	}
	if _, err := c.driver.Exec().SessionRevoke(ctx, session, c.now()); err != nil {
		return fmt.Errorf("oncepush: revoke session: %w", err)
	}
	return nil
}

// DeleteRecipient removes the recipient's devices and deliveries (with their
// ledger), and with them the messages and the recorded requests that no other
// delivery holds; then, in the same transaction, each of
// Config.RecipientDeleters deletes what its owner keeps about the recipient
// (the server's preferences, say). It is one operation: if any part fails,
// nothing is deleted. A run holding one of its deliveries records nothing for
// it.
func (c *Client[TTx]) DeleteRecipient(ctx context.Context, recipient string) error {
	if err := validateRecipient("recipient", recipient); err != nil {
		return err
	}
	err := c.againOnConflict(ctx, "delete recipient", func() error {
		return c.driver.InTx(ctx, func(ctx context.Context, tx TTx, ex driver.Executor) error {
			res, err := ex.RecipientDelete(ctx, recipient)
			if err != nil {
				return err
			}
			if _, _, err := freeHeld(ctx, ex, &res.Deliveries); err != nil {
				return err
			}
			// After the engine's rows, so that the engine's own locks (messages
			// before records) are always taken in the same order.
			hctx := context.WithValue(ctx, recipientDeleteTxKey{}, tx)
			for i, del := range c.cfg.RecipientDeleters {
				if err := del(hctx, recipient); err != nil {
					return fmt.Errorf("Config.RecipientDeleters[%d]: %w", i, err)
				}
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("oncepush: delete recipient: %w", err)
	}
	return nil
}

// RecipientDeleter deletes what its owner keeps about a recipient, as part
// of Client.DeleteRecipient: it runs inside the transaction in which the
// engine has just deleted the recipient's devices and deliveries
// (RecipientDeleteTx returns it), so its writes commit with them or not at
// all. An error rolls the whole deletion back; deleting a recipient it holds
// nothing about is not an error.
type RecipientDeleter func(ctx context.Context, recipient string) error

type recipientDeleteTxKey struct{}

// RecipientDeleteTx returns the deletion's transaction inside a
// RecipientDeleter call: pgx.Tx with driver/postgres, *sql.Tx with
// driver/sqlite. Write on it, never on a transaction of your own: on SQLite
// another write would wait for this one's lock.
func RecipientDeleteTx[TTx any](ctx context.Context) (TTx, bool) {
	tx, ok := ctx.Value(recipientDeleteTxKey{}).(TTx)
	return tx, ok
}
