package drivertest

import (
	"context"
	"fmt"

	"github.com/oncepush/oncepush/driver"
)

// TestExecutor is what the suite reads beside driver.Executor: statements
// the engine never runs, with which a test checks the engine's own answers
// the slow way. They are kept out of driver.Executor so that the engine's
// contract holds only what the engine calls; a driver's executors (those of
// Exec, InTx and UnwrapExecutor) implement this too, and the suite finds it
// by a type assertion.
type TestExecutor interface {
	// DeviceAttemptCountByState counts a message's device attempts by
	// state.
	DeviceAttemptCountByState(ctx context.Context, messageID int64) (map[string]int, error)
}

// testExecutor returns ex as a TestExecutor, or an error naming the
// executor's type when the driver does not implement it.
func testExecutor(ex driver.Executor) (TestExecutor, error) {
	tx, ok := ex.(TestExecutor)
	if !ok {
		return nil, fmt.Errorf("drivertest: the driver's executor (%T) does not implement drivertest.TestExecutor", ex)
	}
	return tx, nil
}
