// Package listen keeps a driver's wake-up listener running. How a driver
// hears other processes' commits is its own (PostgreSQL's LISTEN, SQLite's
// poll of data_version); what to do when that connection fails is the same
// for both, and lives here.
package listen

import (
	"context"
	"time"
)

// Pauses between attempts: the first, and the most it doubles to.
const (
	pauseFirst = 100 * time.Millisecond
	pauseMax   = 5 * time.Second
)

// Reconnecting runs once until ctx ends, and returns nil then. once listens
// on a connection of its own and calls wake for what it hears; when it
// returns before ctx ends (its connection failed, or could not be made),
// Reconnecting calls wake, since anything may have been missed meanwhile,
// and runs it again after a pause that doubles from 100 ms to at most 5 s.
// once's errors are dropped: the engine polls meanwhile, so a dead listener
// only delays wake-ups.
func Reconnecting(ctx context.Context, wake func(), once func(ctx context.Context) error) error {
	pause := pauseFirst
	for ctx.Err() == nil {
		_ = once(ctx)
		if ctx.Err() != nil {
			break
		}
		wake()
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, pauseMax)
	}
	return nil
}
