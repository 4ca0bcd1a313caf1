package oncepush

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/backoff"
	"github.com/oncepush/oncepush/internal/enginetest"
)

// Bounds of a grouped commit (see docs/architecture.md, "Grouped commits").
const (
	// groupMaxMembers keeps a group's savepoints (one per recorded request)
	// within PostgreSQL's per-backend cache of 64 subtransactions.
	groupMaxMembers = 64
	// groupMaxRecipients keeps a group's transaction short; the first
	// member always goes in, however many recipients it has.
	groupMaxRecipients = 2 * MaxRecipients
)

// SendGroupObserver is implemented by an Observer that also wants the size
// of each group of sends written in one commit (Send and SendToDevices
// calls that ran concurrently). It is optional, so that Observer stays as it
// was; SendGroup is called after the group's commit, with the quickness
// Observer's methods owe.
type SendGroupObserver interface {
	SendGroup(members int)
}

// sendGroups is the queue of the grouped commits: sends waiting for a
// group, and whether a leader is writing one (or is about to take the next).
type sendGroups struct {
	mu      sync.Mutex
	queue   []*groupMember
	writing int // leaders writing a group, or about to take one
	writers int // the most groups written at once (at least 1)
}

// groupMember is one Send or SendToDevices, validated, waiting for (or in)
// a group. Its fields after done are set by the leader, read after done.
type groupMember struct {
	ctx     context.Context
	p       *prepared
	msg     *Message
	opts    *SendOptions   // the caller's, with DeferWake: the leader wakes
	devices []directDevice // a direct send's, or nil

	lead chan struct{} // the member is to lead the next group
	done chan struct{} // closed once res and err are set

	// Under sendGroups.mu.
	taken   bool // a leader has taken it into a group
	leading bool // lead was signalled and not yet acted on

	res SendResult
	err error
}

// sendGrouped queues m's write, leads groups when its turn comes, and
// answers once m's group has committed: a recorded request by replay.
func (c *Client[TTx]) sendGrouped(ctx context.Context, m *groupMember, opts *SendOptions) (SendResult, error) {
	deferred := SendOptions{}
	if opts != nil {
		deferred = *opts
	}
	deferred.DeferWake = true
	m.ctx, m.opts = ctx, &deferred
	m.lead, m.done = make(chan struct{}, 1), make(chan struct{})

	res, err := c.queueAndWait(m)
	if errors.Is(err, driver.ErrRequestRecorded) {
		return c.replay(ctx, c.driver.Exec(), m.opts)
	}
	return res, err
}

func (c *Client[TTx]) queueAndWait(m *groupMember) (SendResult, error) {
	g := &c.groups
	g.mu.Lock()
	g.queue = append(g.queue, m)
	queued := len(g.queue)
	lead := g.writing < max(g.writers, 1)
	if lead {
		g.writing++
		m.leading = true // no other leader takes it
	}
	g.mu.Unlock()
	enginetest.From(m.ctx).SendQueued(queued)
	if lead {
		c.leadGroup(m)
	}
	for {
		select {
		case <-m.done:
			return m.res, m.err
		case <-m.lead:
			c.leadGroup(m)
		case <-m.ctx.Done():
			if g.leave(m) {
				return SendResult{}, m.ctx.Err()
			}
			// Taken: its rows are in a transaction being written.
			<-m.done
			return m.res, m.err
		}
	}
}

// leave takes m out of the queue unless a leader has taken it, handing on
// the lead m was given, and reports whether it did.
func (g *sendGroups) leave(m *groupMember) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.taken {
		return false
	}
	g.queue = slices.DeleteFunc(g.queue, func(o *groupMember) bool { return o == m })
	if m.leading {
		g.handOn()
	}
	return true
}

// handOn gives a leader's place to the first member queued that does not
// hold one already, or gives it up when there is none. Called with mu held,
// by a leader that is done (or a member handed the lead that leaves).
func (g *sendGroups) handOn() {
	for _, m := range g.queue {
		if !m.leading {
			m.leading = true
			m.lead <- struct{}{} // buffered; a member is handed the lead once
			return
		}
	}
	g.writing--
}

// take removes the next group of leader from the queue: leader first,
// then the others in queue order, within the bounds, but for those handed
// a leader's place of their own.
func (g *sendGroups) take(leader *groupMember) []*groupMember {
	g.mu.Lock()
	defer g.mu.Unlock()
	if leader.taken { // cannot happen: no leader takes another
		return nil
	}
	group := []*groupMember{leader}
	recipients := len(leader.p.recipients)
	for _, m := range g.queue {
		r := len(m.p.recipients)
		if len(group) == groupMaxMembers || recipients+r > groupMaxRecipients {
			break
		}
		if m != leader && !m.leading {
			group = append(group, m)
			recipients += r
		}
	}
	for _, m := range group {
		m.taken, m.leading = true, false
	}
	g.queue = slices.DeleteFunc(g.queue, func(m *groupMember) bool { return m.taken })
	return group
}

// leadGroup writes leader's group, answers its members and hands the
// leader's place on.
func (c *Client[TTx]) leadGroup(leader *groupMember) {
	ctx := leader.ctx
	enginetest.From(ctx).GroupTaking()
	group := c.groups.take(leader)
	defer func() {
		// Even when the write panicked (net/http recovers a handler's
		// panic): no member may wait forever, nor the queue stay led.
		r := recover()
		for _, m := range group {
			if r != nil {
				m.res, m.err = SendResult{}, fmt.Errorf("oncepush: grouped write panicked: %v", r)
			}
			close(m.done)
		}
		c.groups.mu.Lock()
		c.groups.handOn()
		c.groups.mu.Unlock()
		if r != nil {
			panic(r)
		}
	}()
	if len(group) > 0 {
		c.writeGroup(ctx, group)
	}
}

// writeGroup writes the members and sets each one's answer, then wakes the
// workers once for all of them. A group of one takes the path of a send on
// its own: no transaction round trips around its statement. A write the
// database aborted to break a deadlock, or for a serialization failure, is
// written again, up to conflictTries times: it wrote nothing, and its
// members would each have succeeded alone.
func (c *Client[TTx]) writeGroup(ctx context.Context, group []*groupMember) {
	hooks := enginetest.From(ctx)
	for try := 1; ; try++ {
		var err error
		if len(group) == 1 {
			m := group[0]
			m.res, m.err = c.writeAlone(m)
			err = m.err
		} else if err = c.writeTogether(ctx, group); err != nil {
			for _, m := range group {
				m.res, m.err = SendResult{}, err
			}
		}
		if err == nil || !c.conflict(err) || try == conflictTries {
			break
		}
		hooks.SendRetrying(try, err)
		// A member alone is written on its own context; a group of several
		// on none, its members waiting for its outcome whatever theirs say.
		wait := context.Background()
		if len(group) == 1 {
			wait = group[0].ctx
		}
		if !pause(wait, conflictPause(try)) {
			group[0].res, group[0].err = SendResult{}, wait.Err()
			break
		}
	}
	wake := false
	for _, m := range group {
		if m.err == nil {
			c.queued(ctx, m.p, m.res)
		}
		wake = wake || (m.err == nil && m.res.Queued > 0 && m.opts.ScheduledAt.IsZero())
	}
	if wake {
		c.Wake()
	}
	if o, ok := c.obs.(SendGroupObserver); ok {
		o.SendGroup(len(group))
	}
}

// conflictTries bounds the writes of a group (or of a send alone) that the
// database aborted for a deadlock or a serialization failure. With every
// send's locks taken in one order (docs/architecture.md, "Lock order") a group meets such an abort only with writers that lock in
// another order (a caller's own transaction); one try more then normally
// succeeds, since the database let the other writer go on.
const conflictTries = 10

// conflictPause is the pause before try+1 of an aborted write: short, with
// jitter, so that the writers the abort separated do not meet again in
// step.
func conflictPause(try int) time.Duration {
	return backoff.Delay(try, 5*time.Millisecond, 200*time.Millisecond, nil)
}

// againOnConflict runs write, a statement or a transaction of the engine's
// own, again when the database aborted it to break a deadlock or for a
// serialization failure (it wrote nothing), up to conflictTries times; the
// caller sees the abort only after the last. Never for a write inside a
// caller's transaction, which the abort ended: that one is the caller's to
// run again.
func (c *clientCore) againOnConflict(ctx context.Context, op string, write func() error) error {
	for try := 1; ; try++ {
		err := write()
		if err == nil || !c.conflict(err) || try == conflictTries {
			return err
		}
		enginetest.From(ctx).WriteRetrying(op, try, err)
		if !pause(ctx, conflictPause(try)) {
			return err
		}
	}
}

// pause waits d, or until ctx ends, and reports whether it waited d.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// writeAlone writes one member as a send on its own would, on its own
// context.
func (c *Client[TTx]) writeAlone(m *groupMember) (SendResult, error) {
	if m.devices == nil {
		return c.write(m.ctx, c.driver.Exec(), m.p, m.msg, m.opts)
	}
	var res SendResult
	err := c.driver.InTx(m.ctx, func(ctx context.Context, _ TTx, ex driver.Executor) error {
		var err error
		res, err = c.writeDirect(ctx, ex, m.devices, m.p, m.msg, m.opts)
		return err
	})
	return res, err
}

// writeTogether writes the members in one transaction: the plain sends in
// one MessageInsertMany, each direct send in a savepoint, each kind in lock
// order (sendLockOrder). It sets the answer of each member that failed on
// its own (a recorded request, a refused token) or succeeded, and returns
// an error that fails them all. The members' own contexts no longer count:
// they are in this transaction.
func (c *Client[TTx]) writeTogether(ctx context.Context, group []*groupMember) error {
	ctx = context.WithoutCancel(ctx)
	hooks := enginetest.From(ctx)
	var plain, direct []*groupMember
	for _, m := range group {
		m.res, m.err = SendResult{}, nil // what an aborted try set
		if m.devices == nil {
			plain = append(plain, m)
		} else {
			direct = append(direct, m)
		}
	}
	plain, direct = sendLockOrder(plain), sendLockOrder(direct)
	return c.driver.InTx(ctx, func(ctx context.Context, _ TTx, ex driver.Executor) error {
		if len(plain) > 0 {
			params := make([]*driver.MessageInsertParams, len(plain))
			for i, m := range plain {
				params[i] = c.insertParams(m.p, m.msg, m.opts)
			}
			out, err := ex.MessageInsertMany(ctx, params)
			if err != nil {
				return fmt.Errorf("oncepush: write messages: %w", err)
			}
			for i, m := range plain {
				if m.err = out[i].Err; m.err != nil {
					continue
				}
				if m.res, m.err = c.written(ctx, ex, m.p, m.opts, out[i].ID, out[i].Inserted); m.err != nil {
					return m.err
				}
			}
		}
		for _, m := range direct {
			m.err = ex.WithSavepoint(ctx, func() error {
				var err error
				m.res, err = c.writeDirect(ctx, ex, m.devices, m.p, m.msg, m.opts)
				return err
			})
			if m.err != nil && !errors.Is(m.err, driver.ErrRequestRecorded) && !errors.Is(m.err, ErrTokenRegistered) {
				return m.err
			}
		}
		hooks.GroupCommitting(len(group))
		return nil
	})
}

// sendLockOrder returns the members in the order a group writes them, which
// is the order of the first lock each takes: a direct send by its first
// device in (transport, token key) order, the devices it registers first; a
// plain send by its dedup key, then its first recipient in byte order, the
// (recipient, dedup key) of its deliveries. Two groups that hold sends to
// the same recipients and keys then take their locks in one order, and one
// waits for the other instead of deadlocking with it, in whatever order
// their callers came.
func sendLockOrder(ms []*groupMember) []*groupMember {
	type keyed struct {
		m         *groupMember
		key, from string
	}
	ks := make([]keyed, len(ms))
	for i, m := range ms {
		if m.devices != nil {
			d := slices.MinFunc(m.devices, compareDevices)
			ks[i] = keyed{m, string(d.transport), d.key}
		} else {
			ks[i] = keyed{m, m.opts.DedupKey, slices.Min(m.p.recipients)}
		}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int {
		return cmp.Or(strings.Compare(a.key, b.key), strings.Compare(a.from, b.from))
	})
	for i, k := range ks {
		ms[i] = k.m
	}
	return ms
}
