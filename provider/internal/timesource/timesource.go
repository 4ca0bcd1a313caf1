// Package timesource is the providers' one time source: the clock a
// provider's configuration gives, else the clock of the client it serves
// (provider.ClockUser), else the wall clock (package wallclock). It is the
// only place in provider code that reads the wall clock.
package timesource

import (
	"sync/atomic"
	"time"

	"github.com/oncepush/oncepush/internal/wallclock"
	"github.com/oncepush/oncepush/provider"
)

// Source tells a provider the time. It implements provider.Clock; the zero
// value reads the wall clock.
type Source struct {
	own    provider.Clock
	client atomic.Pointer[clockBox]
}

type clockBox struct{ c provider.Clock }

// New returns a source that reads own, when it is not nil, whatever clock a
// client hands over later.
func New(own provider.Clock) *Source { return &Source{own: own} }

// Now implements provider.Clock.
func (s *Source) Now() time.Time {
	if s.own != nil {
		return s.own.Now()
	}
	if b := s.client.Load(); b != nil {
		return b.c.Now()
	}
	return wallclock.Now()
}

// Use makes c the source's clock unless it was given one of its own: the
// provider's provider.ClockUser method. A nil c changes nothing. It is safe
// while the provider is in use.
func (s *Source) Use(c provider.Clock) {
	if c != nil {
		s.client.Store(&clockBox{c})
	}
}
