package oncepush

import (
	"errors"
	"fmt"

	"github.com/oncepush/oncepush/driver"
)

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
	// ErrTokenRegistered: a direct send (SendToDevices) named a token that is
	// registered to a recipient; it was refused whole and the token left with
	// its owner. The error is a *TokenRegisteredError naming the device.
	ErrTokenRegistered = driver.ErrTokenRegistered
	// ErrAlreadyStarted: Start was called on a running client.
	ErrAlreadyStarted = errors.New("oncepush: client already started")
)

// TokenRegisteredError refuses a direct send one of whose devices is
// registered to a recipient (ErrTokenRegistered): sending would move the
// token away from its owner. Field names the device as the HTTP API spells
// it ("devices[3].token"); the owner is not named.
type TokenRegisteredError struct {
	Field string
}

func (e *TokenRegisteredError) Error() string {
	return fmt.Sprintf("oncepush: %s is registered to a recipient; send to the recipient, or unregister the token first", e.Field)
}

// Is reports ErrTokenRegistered.
func (e *TokenRegisteredError) Is(target error) bool { return target == ErrTokenRegistered }
