package stack

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncepush/oncepush/internal/config"
)

// TestDatabaseErrorsHideThePassword: a PostgreSQL URL that does not parse,
// or a server that cannot be reached, is named without its password; a
// libpq key=value string is refused rather than taken as a SQLite file
// named after the password.
func TestDatabaseErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	const pw = "CANARY-db-password-7a6b5c"
	for _, dsn := range []string{
		"postgres://push:" + pw + "@127.0.0.1:notaport/db",
		"postgres://push:" + pw + "@127.0.0.1:1/db?sslmode=bogus",
		"postgres://push:" + pw + "@127.0.0.1:1/db?connect_timeout=1",
		"host=127.0.0.1 user=push password=" + pw + " dbname=db",
		"password=" + pw,
	} {
		st := &config.Settings{File: config.File{Database: dsn}}
		db, err := Open(t.Context(), st)
		if err == nil {
			db.Close()
			t.Errorf("%q opened", dsn)
			continue
		}
		var se *config.Error
		if !errors.As(err, &se) || se.Setting != "--database" || strings.Contains(err.Error(), pw) {
			t.Errorf("%q: %v; want a --database error without the password", dsn, err)
		}
	}
	if entries, _ := filepath.Glob("*" + pw + "*"); len(entries) != 0 {
		t.Errorf("SQLite files named after the password were created: %v", entries)
		for _, e := range entries {
			_ = os.Remove(e)
		}
	}
}
