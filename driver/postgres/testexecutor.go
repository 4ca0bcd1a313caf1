package postgres

import "context"

// What the conformance suite reads beside the engine's contract
// (drivertest.TestExecutor): counts the engine never asks for, by which
// the suite checks the answers the engine does ask for. Production code
// never calls them; export_test.go checks that the executor implements it.

// DeviceAttemptCountByState counts a message's device attempts by state.
func (e *executor) DeviceAttemptCountByState(ctx context.Context, messageID int64) (map[string]int, error) {
	return queryMap[string, int](ctx, e.db, q.Get("DeviceAttemptCountByState"), named{"message_id": messageID})
}
