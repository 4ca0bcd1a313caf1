// Package testdb gives each PostgreSQL test a schema of its own in a database
// of the test suite's own (oncepush_test), created on first use. Tests never
// touch data they did not create; a test's schema is dropped when it ends.
//
// A server that has no connection left (SQLSTATE 53300) fails the test
// saying so and what to do.
//
// ONCEPUSH_TEST_DATABASE_URL overrides the server to use (default
// postgres://postgres@127.0.0.1:5432/postgres), ONCEPUSH_TEST_DATABASE the
// database's name (default oncepush_test; a long benchmark run in a database
// of its own, which its runner drops after). ONCEPUSH_TEST_POSTGRES=skip skips
// the PostgreSQL suite, with a message saying so; otherwise an unreachable
// server fails the test, never skips it.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DatabaseName is the database the suites create and use.
const DatabaseName = "oncepush_test"

const defaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

var (
	once     sync.Once
	baseURL  string
	setupErr error
)

// serverURL returns the URL of the test database, creating the database once
// per process if needed.
func serverURL(t testing.TB) string {
	t.Helper()
	if os.Getenv("ONCEPUSH_TEST_POSTGRES") == "skip" {
		t.Skip("PostgreSQL suite skipped (ONCEPUSH_TEST_POSTGRES=skip)")
	}
	once.Do(func() { baseURL, setupErr = ensureDatabase() })
	if setupErr != nil {
		t.Fatalf("PostgreSQL is required for this test and is not usable: %v\n"+
			"Start it (see README: Testing), point ONCEPUSH_TEST_DATABASE_URL at a server, "+
			"or set ONCEPUSH_TEST_POSTGRES=skip to skip the PostgreSQL suite.", setupErr)
	}
	return baseURL
}

func ensureDatabase() (string, error) {
	admin := os.Getenv("ONCEPUSH_TEST_DATABASE_URL")
	if admin == "" {
		admin = defaultURL
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", fmt.Errorf("ONCEPUSH_TEST_DATABASE_URL: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w%s", u.Redacted(), err, tooManyClients(err))
	}
	defer conn.Close(ctx)
	name := DatabaseName
	if n := os.Getenv("ONCEPUSH_TEST_DATABASE"); n != "" {
		name = n
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	// Test packages run in parallel processes: another may have created it.
	if err != nil && !(errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505")) {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// Schema creates a fresh schema for the test and returns a connection string
// whose search_path selects it. The schema is dropped when the test ends.
func Schema(t testing.TB) string {
	t.Helper()
	base := serverURL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect: %v%s", err, tooManyClients(err))
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, _ := url.Parse(base)
	qv := u.Query()
	qv.Set("search_path", schema)
	u.RawQuery = qv.Encode()
	return u.String()
}

// sqlstateTooManyClients is too_many_connections: the server is at its
// max_connections.
const sqlstateTooManyClients = "53300"

// tooManyClients says, for an error of a server out of connections, why
// and what to do: the suite's packages run at once, each with pools of its
// own (README, "Tests"). Empty for any other error.
func tooManyClients(err error) string {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != sqlstateTooManyClients {
		return ""
	}
	return "\nThe PostgreSQL server has no connection left for the tests (SQLSTATE 53300, too many clients): " +
		"the suite runs test packages at once (go test -p, default the number of CPUs), each with pools of its own, " +
		"beside whatever else uses the server. Raise its max_connections (ALTER SYSTEM SET max_connections = 200; then restart it), " +
		"run fewer packages at once (GOFLAGS=-p=2 ./scripts/test, or go test -p 1 ./...), or point ONCEPUSH_TEST_DATABASE_URL at a server of its own (README, \"Tests\")."
}

// Pool opens a pool on the connection string with at most maxConns
// connections (0 = pgxpool's default) and closes it when the test ends.
func Pool(t testing.TB, connString string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		t.Fatalf("pool config: %v", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
