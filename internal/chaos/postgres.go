//go:build unix

package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// sharedPostgres is the URL of the PostgreSQL server the test suite uses
// (scripts/test): the harness creates a database of its own on it, and drops
// it at the end.
func sharedPostgres() string {
	return cmp.Or(os.Getenv("ONCEPUSH_TEST_DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
}

// createDatabase creates database name on the server at admin (a URL) and
// returns the new database's URL.
func createDatabase(ctx context.Context, admin, name string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, admin)
	if err != nil {
		return "", fmt.Errorf("PostgreSQL at %s: %w", redacted(admin), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(cctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// dropDatabase drops a database createDatabase made.
func dropDatabase(admin, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

func redacted(dsn string) string {
	if u, err := url.Parse(dsn); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}

// cluster is a private PostgreSQL cluster in a temporary directory, on a
// free loopback port with its socket in that directory: the harness crashes
// and restarts it, which it must never do to the shared server.
type cluster struct {
	ps      *procs
	bin     string // the directory of initdb, postgres, pg_ctl
	dir     string // data directory
	sockets string
	port    int
	as      *syscall.Credential // PostgreSQL refuses to run as root
	proc    *proc
}

// newCluster initdbs a cluster in a new directory under parent (within the
// harness's directory top) and starts it.
func newCluster(ctx context.Context, ps *procs, parent, top string) (*cluster, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		if p, err := exec.LookPath("initdb"); err == nil {
			matches = []string{p}
		}
	}
	if len(matches) == 0 {
		return nil, errors.New("no initdb found (/usr/lib/postgresql/*/bin/initdb, or on PATH): a PostgreSQL restart needs a private cluster")
	}
	c := &cluster{ps: ps, bin: filepath.Dir(matches[len(matches)-1])}
	root, err := os.MkdirTemp(parent, "postgres-")
	if err != nil {
		return nil, err
	}
	c.dir, c.sockets = filepath.Join(root, "data"), filepath.Join(root, "sockets")
	for _, d := range []string{c.dir, c.sockets} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, and there is no postgres user to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.as = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		// PostgreSQL must reach its directory through the harness's own.
		for d := parent; ; d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o711); err != nil {
				return nil, err
			}
			if d == top || d == filepath.Dir(d) {
				break
			}
		}
		for _, d := range []string{root, c.dir, c.sockets} {
			if err := os.Chown(d, uid, gid); err != nil {
				return nil, err
			}
		}
	}
	if c.port, err = freePort(); err != nil {
		return nil, err
	}
	// fsync off: the restarts are crashes of PostgreSQL's processes, not of
	// the machine, so what was written survives them in the page cache.
	if err := c.run(ctx, "initdb", "-D", c.dir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return nil, err
	}
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// url is the URL of database name on the cluster.
func (c *cluster) url(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, name)
}

// run runs one of PostgreSQL's programs to its end.
func (c *cluster) run(ctx context.Context, prog string, args ...string) error {
	p, err := c.ps.start("pg-"+prog, filepath.Join(c.bin, prog), args, c.as)
	if err != nil {
		return err
	}
	select {
	case <-p.Done():
	case <-time.After(2 * time.Minute):
		_ = p.Kill()
		return fmt.Errorf("%s did not end in 2 minutes; its log: %s", prog, p.logPath)
	case <-ctx.Done():
		_ = p.Kill()
		return ctx.Err()
	}
	if p.exitCode() != 0 {
		return fmt.Errorf("%s exited %d; its log: %s", prog, p.exitCode(), p.logPath)
	}
	return nil
}

// start runs the postmaster as a child of the harness (so that it dies with
// it) and waits until it takes connections.
func (c *cluster) start(ctx context.Context) error {
	p, err := c.ps.start("postgres", filepath.Join(c.bin, "postgres"), []string{
		"-D", c.dir, "-p", strconv.Itoa(c.port), "-k", c.sockets, "-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "max_connections=200", "-c", "shared_buffers=64MB",
	}, c.as)
	if err != nil {
		return err
	}
	c.proc = p
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, c.url("postgres"))
		cancel()
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		if p.Exited() {
			return fmt.Errorf("postgres exited (%v); its log: %s", p.Err(), p.logPath)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres takes no connection after 60 s: %w; its log: %s", err, p.logPath)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// crash stops the cluster as a crash does ('pg_ctl stop -m immediate': every
// backend quits at once, nothing is checkpointed); start then recovers it
// from the WAL.
func (c *cluster) crash(ctx context.Context) error {
	if err := c.run(ctx, "pg_ctl", "stop", "-D", c.dir, "-m", "immediate", "-w", "-t", "60"); err != nil {
		return err
	}
	return c.proc.Wait(30 * time.Second)
}

// stop ends the cluster (fast shutdown). Its directory goes with the
// harness's, or is kept with it.
func (c *cluster) stop() {
	if c.proc != nil && !c.proc.Exited() {
		_ = c.proc.Signal(syscall.SIGINT) // PostgreSQL's fast shutdown
		if err := c.proc.Wait(30 * time.Second); err != nil {
			_ = c.proc.Kill()
		}
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
