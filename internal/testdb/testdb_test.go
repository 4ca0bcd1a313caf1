package testdb

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestTooManyClientsSaysWhatToDo: a server out of connections (as pgx
// reports it, wrapped) is named as such, with what to do; any other
// refusal adds nothing.
func TestTooManyClientsSaysWhatToDo(t *testing.T) {
	t.Parallel()
	full := fmt.Errorf("failed to connect to `user=postgres database=oncepush_test`: %w",
		&pgconn.PgError{Severity: "FATAL", Code: "53300", Message: "sorry, too many clients already"})
	msg := tooManyClients(full)
	for _, want := range []string{"SQLSTATE 53300", "max_connections", "go test -p 1", "ONCEPUSH_TEST_DATABASE_URL"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message does not say %q: %s", want, msg)
		}
	}
	for _, err := range []error{
		&pgconn.PgError{Code: "28P01", Message: "password authentication failed"},
		errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"),
	} {
		if msg := tooManyClients(err); msg != "" {
			t.Errorf("%v: %q", err, msg)
		}
	}
}
