package oncepush

import (
	"errors"
	"fmt"

	"github.com/oncepush/oncepush/driver"
)

// ValidationError reports input that oncepush refuses before writing anything.
// Field names the offending input the way the HTTP API spells it ("title",
// "recipients[3]", "data", "token").
type ValidationError struct {
	Field   string
	Message string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("oncepush: invalid %s: %s", e.Field, e.Message)
}

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// asValidation returns err as a *ValidationError: itself if it is one,
// else one naming field with err's text (a rule written outside this
// package refused the input).
func asValidation(field string, err error) error {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return err
	}
	return &ValidationError{Field: field, Message: err.Error()}
}

// Errors callers may test for with errors.Is.
var (
	// ErrSessionRevoked: a device was registered under a revoked session.
	ErrSessionRevoked = driver.ErrSessionRevoked
	// ErrNotFound: the delivery (or other row) asked for does not exist.
	ErrNotFound = driver.ErrNotFound
	// ErrSchemaTooNew: the database was migrated by a newer oncepush.
	ErrSchemaTooNew = driver.ErrSchemaTooNew
	// ErrSchemaNotCurrent: the database needs Migrate before a client can use it.
	ErrSchemaNotCurrent = driver.ErrSchemaNotCurrent
	// ErrDedupConflict: a recorded request's dedup key was used before with a
	// different RequestHash (SendOptions.RequestHash).
	ErrDedupConflict = errors.New("oncepush: dedup key already used for a different request")
	// ErrAlreadyStarted: Start was called on a running client.
	ErrAlreadyStarted = errors.New("oncepush: client already started")
)
