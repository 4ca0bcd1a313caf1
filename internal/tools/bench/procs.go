package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// teardown is everything the run started, undone in reverse order by run:
// at the end, on an error and on SIGINT/SIGTERM alike.
type teardown struct {
	mu  sync.Mutex
	fns []func()
}

func (t *teardown) add(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.fns = append(t.fns, f)
}

func (t *teardown) run() {
	t.mu.Lock()
	fns := t.fns
	t.fns = nil
	t.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// proc is a process the tool started, in a process group of its own so
// that stopping it stops whatever it started too.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{} // closed when it has exited
	err  error         // its exit, once done
}

// startProc starts a process whose output (stdout and stderr) is kept in
// memory, and registers its stop with td.
func startProc(td *teardown, name string, env []string, path string, args ...string) (*proc, error) {
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	out := &tailBuffer{max: 1 << 20}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	td.add(func() { p.stop() })
	return p, nil
}

// stop ends the process group: SIGTERM, then SIGKILL after 15 s. It is
// idempotent.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// failure describes why the process is of no use, with its last output.
func (p *proc) failure(what string) error {
	state := "still running"
	select {
	case <-p.done:
		state = fmt.Sprintf("exited: %v", p.err)
	default:
	}
	return fmt.Errorf("%s: %s (%s); its last output:\n%s", p.name, what, state, p.out.tail(4000))
}

// waitOutput waits until the process's output satisfies ok, it exits, or
// ctx ends.
func (p *proc) waitOutput(ctx context.Context, what string, ok func(string) bool) (string, error) {
	for {
		out, changed := p.out.snapshot()
		if ok(out) {
			return out, nil
		}
		select {
		case <-changed:
		case <-p.done:
			if out, _ := p.out.snapshot(); ok(out) {
				return out, nil
			}
			return "", p.failure("exited before " + what)
		case <-ctx.Done():
			return "", p.failure(what + ": " + ctx.Err().Error())
		}
	}
}

// waitHTTP waits until GET url answers 200, polling: a server in another
// process has no other way to say it is ready.
func (p *proc) waitHTTP(ctx context.Context, hc *http.Client, url string) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return p.failure("exited before " + url + " answered")
		case <-ctx.Done():
			return p.failure(url + " never answered 200: " + ctx.Err().Error())
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// peakRSS is the process's peak resident set (VmHWM) in MiB.
func peakRSS(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb float64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%f kB", &kb); err != nil {
				return 0, fmt.Errorf("VmHWM %q: %w", v, err)
			}
			return kb / 1024, nil
		}
	}
	return 0, errors.New("no VmHWM in /proc/PID/status")
}

// resetPeakRSS starts the process's VmHWM again from its current RSS, so a
// case's peak is its own (Linux: "5" to /proc/PID/clear_refs).
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// freePort returns a loopback address that was free a moment ago, for a
// program (gorush, serve) that must be given its port.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// tailBuffer keeps up to max bytes of output (the first ones, then the
// last ones) and tells waiters when it grows.
type tailBuffer struct {
	mu      sync.Mutex
	max     int
	buf     bytes.Buffer
	changed chan struct{}
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len()+len(p) > b.max {
		keep := b.buf.Bytes()[max(0, b.buf.Len()-b.max/2):]
		b.buf = *bytes.NewBuffer(append([]byte(nil), keep...))
	}
	b.buf.Write(p)
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
	return len(p), nil
}

// snapshot returns the output so far and a channel closed at the next write.
func (b *tailBuffer) snapshot() (string, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.buf.String(), b.changed
}

func (b *tailBuffer) tail(n int) string {
	s, _ := b.snapshot()
	return s[max(0, len(s)-n):]
}
