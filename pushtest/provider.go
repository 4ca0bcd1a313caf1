package pushtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/oncepush/oncepush/internal/fakepush"
	"github.com/oncepush/oncepush/provider"
)

// AnswerFunc decides a fake provider's answer to one submission. It may block
// (to hold a send in flight); it should honour ctx.
type AnswerFunc func(ctx context.Context, s *provider.Submission) provider.Result

// Provider is an in-process fake provider.Provider for one transport. It
// records every submission and answers with its AnswerFunc (by default: accepted,
// with a provider id of "fake-N").
type Provider struct {
	transport provider.Transport
	seq       atomic.Int64

	mu     sync.Mutex
	subs   []provider.Submission
	answer AnswerFunc
	notify chan struct{}
}

// NewProvider returns a fake provider for the transport that accepts everything.
func NewProvider(t provider.Transport) *Provider {
	return &Provider{transport: t, notify: make(chan struct{})}
}

var _ provider.Provider = (*Provider)(nil)

// Transport implements provider.Provider.
func (p *Provider) Transport() provider.Transport { return p.transport }

// Send implements provider.Provider: it records the submission, then answers.
func (p *Provider) Send(ctx context.Context, s *provider.Submission) provider.Result {
	p.mu.Lock()
	p.subs = append(p.subs, *s)
	answer := p.answer
	close(p.notify)
	p.notify = make(chan struct{})
	p.mu.Unlock()
	if answer != nil {
		return answer(ctx, s)
	}
	return provider.Accepted(fmt.Sprintf("fake-%d", p.seq.Add(1)))
}

// Answer sets how the provider answers from now on; nil restores "accept".
func (p *Provider) Answer(fn AnswerFunc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answer = fn
}

// AnswerAll answers every submission with r.
func (p *Provider) AnswerAll(r provider.Result) {
	p.Answer(func(context.Context, *provider.Submission) provider.Result { return r })
}

// Submissions returns a copy of every submission received, in arrival order.
func (p *Provider) Submissions() []provider.Submission {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]provider.Submission, len(p.subs))
	copy(out, p.subs)
	return out
}

// Count returns how many submissions the provider received.
func (p *Provider) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.subs)
}

// WaitCount blocks until the provider has received at least n submissions or
// ctx ends, and reports whether it got there.
func (p *Provider) WaitCount(ctx context.Context, n int) bool {
	return fakepush.WaitCount(ctx, n, func() (int, <-chan struct{}) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.subs), p.notify
	})
}

// Reset forgets the recorded submissions.
func (p *Provider) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.subs = nil
}

// Hold makes every send block until release is called (or its context ends,
// in which case it answers maybe-sent, as a real provider client would after
// writing the request). After release, sends answer accepted. It returns
// release, which is safe to call more than once.
func (p *Provider) Hold() (release func()) {
	ch := make(chan struct{})
	var once sync.Once
	p.Answer(func(ctx context.Context, s *provider.Submission) provider.Result {
		select {
		case <-ch:
			return provider.Accepted("held-" + s.SubmissionID)
		case <-ctx.Done():
			return provider.Result{Outcome: provider.OutcomeMaybeSent, Text: "no answer after the request was written: " + ctx.Err().Error()}
		}
	})
	return func() { once.Do(func() { close(ch) }) }
}
