//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// The disk scenario (-disk): SQLite's file, or a private PostgreSQL
// cluster (data directory and WAL), on a small tmpfs of its own, which the
// harness fills with a filler file mid-run and frees again, cycle after
// cycle, while the load goes on. SQLite's writes then fail with "database
// or disk is full"; PostgreSQL's fail with "could not extend file", and
// one that cannot write its WAL PANICs: the postmaster ends every backend
// and recovers, and if recovery itself finds no room it exits, and the
// harness, as a supervisor would, starts it again once there is room. The
// API must answer 503 and never 500, the workers must keep running and
// resume once there is room, and the check is the usual one: nothing lost,
// nothing sent twice without a mark.
// It mounts, so it needs root; without root it fails, saying so. The mount
// is undone on every way out of the phase (the harness's SIGINT and SIGTERM
// end the phase's context, and its defers run).
const (
	faultDiskFull = "disk-full"
	// diskSize is the tmpfs's size: room for the run's database with the
	// filler taking the rest.
	diskSize = "256m"
	// diskFullFor is how long the disk stays full in a cycle, diskFreeFor
	// how long it has room before the next.
	diskFullFor = 3 * time.Second
	diskFreeFor = 5 * time.Second
)

// diskPlan sets a phase up for the disk scenario: fill and free cycles
// instead of kills.
func (p *plan) diskPlan(long bool) {
	p.scenario = "disk"
	p.killEvery, p.stops, p.apiKills, p.pgRestarts = 0, 0, 0, 0
	p.minKills, p.minSends = 0, 0
	p.chaos = 40 * time.Second
	if long {
		p.chaos = 2 * time.Minute
	}
	p.maxChaos = p.chaos
}

// disk is the phase's tmpfs and what was done to it.
type disk struct {
	dir    string
	filler string

	mu     sync.Mutex
	cycles int
	fullAt time.Duration // time spent full, in all
	// pgStarts counts the private cluster's postmaster started again after
	// it exited on a full disk.
	pgStarts int
}

// mountDisk mounts a tmpfs of diskSize at dir/disk.
func mountDisk(ctx context.Context, dir string) (*disk, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the disk scenario mounts a tmpfs and needs root: run it as root, or leave -disk out")
	}
	d := &disk{dir: filepath.Join(dir, "disk")}
	d.filler = filepath.Join(d.dir, "filler")
	if err := os.Mkdir(d.dir, 0o700); err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, "mount", "-t", "tmpfs", "-o", "size="+diskSize+",mode=0711", "tmpfs", d.dir).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("mount -t tmpfs on %s: %w: %s", d.dir, err, out)
	}
	return d, nil
}

// unmount undoes the mount; the processes using the file are gone by then.
func (d *disk) unmount() error {
	out, err := exec.Command("umount", d.dir).CombinedOutput()
	if err != nil {
		// A process that has not let go yet: detach it, so the mount goes
		// with the last of them.
		if out2, err2 := exec.Command("umount", "-l", d.dir).CombinedOutput(); err2 != nil {
			return fmt.Errorf("umount %s: %w: %s; umount -l: %s", d.dir, err, out, out2)
		}
	}
	return nil
}

// fill writes the filler until the file system refuses another byte.
func (d *disk) fill() error {
	f, err := os.OpenFile(d.filler, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4 << 10, 1} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if errors.Is(err, syscall.ENOSPC) {
					break
				}
				return err
			}
		}
	}
	return nil
}

// free removes the filler.
func (d *disk) free() error { return os.Remove(d.filler) }

// fillCycles fills the disk, holds it full, frees it, until ctx ends; the
// disk has room when it returns.
func (inj *injector) fillCycles(ctx context.Context) error {
	d := inj.disk
	for {
		if err := sleep(ctx, diskFreeFor); err != nil {
			return nil
		}
		start := time.Now()
		// A full disk is not a moment but a stretch: every run that marks
		// while it lasts may fail to record. The checker matches faults
		// that are instants with what each had in flight within a lease,
		// so the stretch is noted as one fault every half lease, from the
		// fill until the disk is writable again.
		stopNoting := inj.noteWhile(faultDiskFull, d.dir)
		err := d.fill()
		if err == nil {
			_ = sleep(context.WithoutCancel(ctx), diskFullFor)
		}
		if ferr := d.free(); err == nil && ferr != nil {
			err = fmt.Errorf("free %s: %w", d.dir, ferr)
		}
		restarted := false
		if err == nil && inj.pg != nil && inj.pg.proc.Exited() {
			// The postmaster gave up (recovery found no room): start it
			// again, as its supervisor would, now that there is room.
			err = inj.pg.start(context.WithoutCancel(ctx))
			restarted = true
		}
		stopNoting()
		if err != nil {
			return err
		}
		d.mu.Lock()
		d.cycles++
		d.fullAt += time.Since(start)
		if restarted {
			d.pgStarts++
		}
		d.mu.Unlock()
	}
}

// noteWhile records a fault of kind now and every half lease until the
// function it returns is called, and once more then.
func (inj *injector) noteWhile(kind, target string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(engineLease / 2)
		defer tick.Stop()
		for {
			inj.record(Fault{Kind: kind, At: time.Now(), Target: target})
			select {
			case <-done:
				inj.record(Fault{Kind: kind, At: time.Now(), Target: target})
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// pgPanics counts the PANIC lines in the logs of the phase's postmasters.
func (inj *injector) pgPanics() int {
	logs, _ := filepath.Glob(filepath.Join(inj.h.ps.logs, "*-postgres.log"))
	n := 0
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		n += bytes.Count(b, []byte("PANIC:"))
	}
	return n
}

// printDisk prints what the disk scenario did and what the API answered.
func printDisk(out io.Writer, r *phaseResult) {
	d := r.disk
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(out, "  disk full %d times (%s in all, tmpfs of %s); the API answered 503 %d times, 500 %d times\n",
		d.cycles, d.fullAt.Round(100*time.Millisecond), diskSize, r.api503, r.api500)
	if r.plan.driver == "postgres" {
		fmt.Fprintf(out, "  PostgreSQL: %d PANIC lines in its log, its postmaster started again %d times after it gave up\n", r.pgPanics, d.pgStarts)
	}
}
