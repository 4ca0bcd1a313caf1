// Command pgcheck says whether the PostgreSQL server the test suite uses is
// reachable: exit 0 if a connection and a query succeed, 1 with the reason
// otherwise. scripts/test runs it before the suite.
package main

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

func main() {
	dsn := cmp.Or(os.Getenv("ONCEPUSH_TEST_DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	shown := dsn
	if u, err := url.Parse(dsn); err == nil {
		shown = u.Redacted()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", shown, err)
		os.Exit(1)
	}
	defer conn.Close(ctx)
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", shown, err)
		os.Exit(1)
	}
	fmt.Printf("PostgreSQL %s at %s\n", version, shown)
}
