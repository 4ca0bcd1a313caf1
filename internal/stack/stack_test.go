package stack

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncepush/oncepush/internal/config"
	"github.com/oncepush/oncepush/internal/testdb"
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

// TestDatabaseErrorsSayWhy: a database that does not exist, a login the
// server refuses and a server not reached are three different fixes, and
// the error says which, naming the setting and never the password.
func TestDatabaseErrorsSayWhy(t *testing.T) {
	t.Parallel()
	const pw = "CANARY-db-password-3e2d1c"
	base, err := url.Parse(testdb.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	noDatabase, noRole := *base, *base
	noDatabase.Path = "/oncepush_no_such_database"
	noDatabase.User = url.UserPassword(base.User.Username(), pw)
	noRole.User = url.UserPassword("oncepush_no_such_role", pw)
	for _, c := range []struct{ name, dsn, want string }{
		{"no database", noDatabase.String(), `database "oncepush_no_such_database" does not exist`},
		{"no role", noRole.String(), `refused the login of user "oncepush_no_such_role": authentication failed`},
		{"nobody listening", "postgres://push:" + pw + "@127.0.0.1:1/db", "cannot reach PostgreSQL at push@127.0.0.1:1/db"},
	} {
		st := &config.Settings{File: config.File{Database: c.dsn}}
		db, err := Open(t.Context(), st)
		if err == nil {
			db.Close()
			t.Errorf("%s: opened", c.name)
			continue
		}
		var se *config.Error
		if !errors.As(err, &se) || se.Setting != "--database" || !strings.Contains(se.Problem, c.want) || strings.Contains(err.Error(), pw) {
			t.Errorf("%s: %v; want a --database error saying %q, without the password", c.name, err, c.want)
		}
	}
	// A wrong password (SQLSTATE 28P01) needs a server that asks for one.
	got := pingProblem("push@db:5432/push", "push", "push", &pgconn.ConnectError{Config: &pgconn.Config{}})
	if !strings.HasPrefix(got, "cannot reach") {
		t.Errorf("a connection error: %s", got)
	}
	got = pingProblem("push@db:5432/push", "push", "push", fmt.Errorf("wrapped: %w",
		&pgconn.PgError{Severity: "FATAL", Code: "28P01", Message: `password authentication failed for user "push"`}))
	if !strings.Contains(got, `refused the login of user "push": authentication failed`) {
		t.Errorf("a wrong password: %s", got)
	}
}

// TestMultiHostURLReachesTheWritableHost: a URL naming several hosts with
// target_session_attrs=read-write (a primary and its standby, in either
// order) reaches pgx whole: with the first host gone, Open connects to the
// second, and an error names both.
func TestMultiHostURLReachesTheWritableHost(t *testing.T) {
	t.Parallel()
	base, err := url.Parse(testdb.Schema(t))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := l.Addr().String()
	_ = l.Close() // nothing listens there now
	q := base.Query()
	q.Set("target_session_attrs", "read-write")
	dsn := fmt.Sprintf("postgres://%s@%s,%s%s?%s", base.User.String(), gone, base.Host, base.Path, q.Encode())
	db, err := Open(t.Context(), &config.Settings{File: config.File{Database: dsn}})
	if err != nil {
		t.Fatalf("%s: %v", dsn, err)
	}
	db.Close()

	dsn = fmt.Sprintf("postgres://%s@%s,%s%s?%s", base.User.String(), gone, gone, base.Path, q.Encode())
	if _, err := Open(t.Context(), &config.Settings{File: config.File{Database: dsn}}); err == nil || !strings.Contains(err.Error(), gone) {
		t.Errorf("no host reachable: %v, want an error naming %s", err, gone)
	}
}

// TestDatabaseSchemes: a URL of a scheme Open does not take is refused as
// such, naming the schemes it takes (and the one meant, for a slip), never
// opened as a SQLite file named "postgress:"; paths and file: and sqlite:
// URLs open the file they name.
func TestDatabaseSchemes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const pw = "CANARY-db-password-91f0"
	for _, tc := range []struct{ dsn, want string }{
		{"postgress://push:" + pw + "@127.0.0.1/db", `unknown scheme "postgress"`},
		{"postgress://push:" + pw + "@127.0.0.1/db", `postgres, postgresql, sqlite, file, or a SQLite file path (did you mean postgres://?)`},
		{"Postgres://127.0.0.1/db", `(did you mean postgres://?)`},
		{"sqlite3://" + dir + "/a.db", `(did you mean sqlite://?)`},
		{"mysql://push@127.0.0.1/db", `unknown scheme "mysql"`},
		{"file://db.example.com/var/oncepush.db", `names host "db.example.com"`},
		{"file:" + dir + "/a.db?mode=ro", "oncepush sets SQLite's options itself"},
	} {
		st := &config.Settings{File: config.File{Database: tc.dsn}}
		db, err := Open(t.Context(), st)
		if err == nil {
			db.Close()
			t.Errorf("%q opened", tc.dsn)
			continue
		}
		var se *config.Error
		if !errors.As(err, &se) || se.Setting != "--database" || !strings.Contains(se.Problem, tc.want) || strings.Contains(err.Error(), pw) {
			t.Errorf("%q: %v; want a --database error saying %q, without the password", tc.dsn, err, tc.want)
		}
	}
	if entries, _ := filepath.Glob("*"); len(entries) > 0 {
		for _, e := range entries {
			if strings.Contains(e, ":") {
				t.Errorf("a file was created for a URL: %s", e)
				_ = os.RemoveAll(e)
			}
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files were created for refused URLs: %v", entries)
	}

	for _, tc := range []struct{ dsn, file string }{
		{dir + "/plain.db", "plain.db"},
		{"sqlite:" + dir + "/prefixed.db", "prefixed.db"},
		{"sqlite://" + dir + "/sqlite-url.db", "sqlite-url.db"},
		{"file:" + dir + "/file-opaque.db", "file-opaque.db"},
		{"file://" + dir + "/file-url.db", "file-url.db"},
		{"file://localhost" + dir + "/file-localhost.db", "file-localhost.db"},
		{"file://" + dir + "/with%20space.db", "with space.db"},
		{dir + "/with:colon.db", "with:colon.db"},
	} {
		st := &config.Settings{File: config.File{Database: tc.dsn}}
		db, err := Open(t.Context(), st)
		if err != nil {
			t.Errorf("%q: %v", tc.dsn, err)
			continue
		}
		db.Close()
		if _, err := os.Stat(filepath.Join(dir, tc.file)); err != nil {
			t.Errorf("%q: %v", tc.dsn, err)
		}
	}
}
