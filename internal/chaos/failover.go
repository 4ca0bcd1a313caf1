//go:build unix

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// faultFailover: the primary stopped as a crash stops it, the standby
// promoted; the engine reaches it through its multi-host URL.
const faultFailover = "failover"

// replicationLag is the delay the harness puts on the replication stream
// (a lagProxy between the standby and the primary): on one host the stream
// is a few milliseconds behind, too little to show what an asynchronous
// standby can lack when the primary dies.
const replicationLag = 200 * time.Millisecond

// replicated is a private primary with a streaming standby.
type replicated struct {
	primary, standby *cluster
	lag              *lagProxy
	sync             bool
}

// newReplicated initdbs a primary, creates database name on it, and makes a
// standby with pg_basebackup, streaming through a lagProxy; with sync, the
// primary's commits wait for the standby's flush (synchronous_standby_names
// naming it, synchronous_commit on).
func newReplicated(ctx context.Context, ps *procs, parent, top, name string, sync bool) (*replicated, error) {
	primary, err := newCluster(ctx, ps, parent, top)
	if err != nil {
		return nil, err
	}
	r := &replicated{primary: primary, sync: sync}
	if _, err := createDatabase(ctx, primary.url("postgres"), name); err != nil {
		return r, err
	}
	if r.lag, err = startLagProxy(fmt.Sprintf("127.0.0.1:%d", primary.port), replicationLag); err != nil {
		return r, err
	}
	sb, err := newClusterDirs(ps, primary.bin, parent, top, primary.as)
	if err != nil {
		return r, err
	}
	_, lagPort, _ := net.SplitHostPort(r.lag.addr())
	// -R writes standby.signal and primary_conninfo (through the lag).
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%s user=postgres application_name=standby sslmode=disable", lagPort)
	if err := sb.run(ctx, "pg_basebackup", "-D", sb.dir, "-d", conninfo, "-X", "stream", "-R", "--no-sync", "-c", "fast"); err != nil {
		return r, err
	}
	if sb.as != nil { // pg_basebackup made the directory 0700 as postgres; so is data
		_ = os.Chmod(sb.dir, 0o700)
	}
	if err := sb.start(ctx); err != nil {
		return r, err
	}
	r.standby = sb
	if err := r.awaitStreaming(ctx); err != nil {
		return r, err
	}
	if sync {
		if err := r.exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = 'standby'", "ALTER SYSTEM SET synchronous_commit = 'on'", "SELECT pg_reload_conf()"); err != nil {
			return r, err
		}
		if err := r.awaitSyncState(ctx, "sync"); err != nil {
			return r, err
		}
	}
	return r, nil
}

// url is the multi-host URL of database name: the primary first, then the
// standby, read-write sessions only.
func (r *replicated) url(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write",
		r.primary.port, r.standby.port, name)
}

func (r *replicated) exec(ctx context.Context, stmts ...string) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, r.primary.url("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, s := range stmts {
		if _, err := conn.Exec(cctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// awaitStreaming waits until the primary sees the standby streaming.
func (r *replicated) awaitStreaming(ctx context.Context) error {
	return r.awaitSyncState(ctx, "")
}

// awaitSyncState waits until the primary lists the standby streaming, with
// sync_state want (any when empty).
func (r *replicated) awaitSyncState(ctx context.Context, want string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := pgx.Connect(cctx, r.primary.url("postgres"))
		var state string
		if err == nil {
			err = conn.QueryRow(cctx, "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby' AND state = 'streaming'").Scan(&state)
			_ = conn.Close(cctx)
		}
		cancel()
		if err == nil && (want == "" || state == want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the standby is not streaming (sync state %q, want %q) after 60 s: %v; logs: %s, %s", state, want, err, r.primary.proc.logPath, r.standby.proc.logPath)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// failover stops the primary as a crash does and promotes the standby; it
// returns how long no primary took writes.
func (r *replicated) failover(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if err := r.primary.crash(ctx); err != nil {
		return 0, err
	}
	if err := r.standby.run(ctx, "pg_ctl", "promote", "-D", r.standby.dir, "-w", "-t", "60"); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func (r *replicated) stop() {
	if r.standby != nil {
		r.standby.stop()
	}
	r.primary.stop()
	if r.lag != nil {
		r.lag.close()
	}
}

// newClusterDirs makes the directories of a cluster that is not initdb'd
// (a standby, which pg_basebackup fills), owned by as when not nil, and
// picks its port.
func newClusterDirs(ps *procs, bin, parent, top string, as *syscall.Credential) (*cluster, error) {
	c := &cluster{ps: ps, bin: bin, as: as}
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
	if as != nil {
		for d := parent; ; d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o711); err != nil {
				return nil, err
			}
			if d == top || d == filepath.Dir(d) {
				break
			}
		}
		for _, d := range []string{root, c.dir, c.sockets} {
			if err := os.Chown(d, int(as.Uid), int(as.Gid)); err != nil {
				return nil, err
			}
		}
	}
	if c.port, err = freePort(); err != nil {
		return nil, err
	}
	return c, nil
}

// lagProxy forwards bytes both ways, each chunk lag after it was read, in
// order and without holding the next chunk back: a link with a constant
// delay, unlike pgProxy's latency, which delays one message after another.
type lagProxy struct {
	l      net.Listener
	target string
	lag    time.Duration
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn
}

func startLagProxy(target string, lag time.Duration) (*lagProxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &lagProxy{l: l, target: target, lag: lag}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.DialTimeout("tcp", target, 10*time.Second)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			p.wg.Add(2)
			go p.pipe(c, s)
			go p.pipe(s, c)
		}
	}()
	return p, nil
}

func (p *lagProxy) addr() string { return p.l.Addr().String() }

type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst, each chunk lag after it was read.
func (p *lagProxy) pipe(src, dst net.Conn) {
	defer p.wg.Done()
	ch := make(chan chunk, 1024)
	go func() {
		defer close(ch)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				ch <- chunk{b[:n], time.Now()}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range ch {
		time.Sleep(time.Until(c.at.Add(p.lag)))
		if _, err := dst.Write(c.b); err != nil {
			break
		}
	}
	_ = dst.Close()
	_ = src.Close()
	for range ch { // let the reader end
	}
}

func (p *lagProxy) close() {
	_ = p.l.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
