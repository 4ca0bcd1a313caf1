package oncepush

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/oncepush/oncepush/driver"
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
// its own: no transaction round trips around its statement.
func (c *Client[TTx]) writeGroup(ctx context.Context, group []*groupMember) {
	if len(group) == 1 {
		m := group[0]
		m.res, m.err = c.writeAlone(m)
	} else if err := c.writeTogether(ctx, group); err != nil {
		for _, m := range group {
			m.res, m.err = SendResult{}, err
		}
	}
	wake := false
	for _, m := range group {
		wake = wake || (m.err == nil && m.res.Queued > 0 && m.opts.ScheduledAt.IsZero())
	}
	if wake {
		c.Wake()
	}
	if o, ok := c.obs.(SendGroupObserver); ok {
		o.SendGroup(len(group))
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
// one MessageInsertMany, each direct send in a savepoint. It sets the
// answer of each member that failed on its own (a recorded request, a
// refused token) or succeeded, and returns an error that fails them all.
// The members' own contexts no longer count: they are in this transaction.
func (c *Client[TTx]) writeTogether(ctx context.Context, group []*groupMember) error {
	ctx = context.WithoutCancel(ctx)
	hooks := enginetest.From(ctx)
	return c.driver.InTx(ctx, func(ctx context.Context, _ TTx, ex driver.Executor) error {
		var plain []*groupMember
		var params []*driver.MessageInsertParams
		for _, m := range group {
			if m.devices == nil {
				plain = append(plain, m)
				params = append(params, c.insertParams(m.p, m.msg, m.opts))
			}
		}
		if len(params) > 0 {
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
		for _, m := range group {
			if m.devices == nil {
				continue
			}
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
