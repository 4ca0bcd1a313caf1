package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncepush/oncepush/internal/tools/loadkit"
)

// system is a push server under test as the load sees it: where to POST a
// notification, and what the fake will see of it.
type system struct {
	name string
	url  string // the send endpoint
	hc   *http.Client
	// header is added to every request (authentication).
	header http.Header
	// accepted is the status of a send it took.
	accepted int
	// body is the request for a notification to the devices tokens; key
	// is unique in the run (a dedup key), id the oncepush_id the fake sees
	// for its first device.
	body func(key string, tokens []string) (body []byte, id string)
	// tokens are the device tokens it can send to.
	tokens []string
	// proc is the server process: its pid (peak RSS, CPU) and its output.
	proc func() *proc
	// database is the URL of the system's database when it is on the
	// local PostgreSQL server: its backends' CPU is the database's.
	database string
	// idle says whether the system has nothing left to send, so that a
	// case does not count what an earlier one (a failed one) left queued.
	idle func(ctx context.Context) (bool, error)
	// round numbers the cases, so that no two notifications of a run
	// share a key.
	round atomic.Int64
}

// start begins a case: it waits until what earlier cases queued has been
// sent, then resets the fake and sets its latency; the case's
// notifications are numbered from 1 again.
func (s *system) start(ctx context.Context, f *fake, latency time.Duration) error {
	s.round.Add(1)
	deadline := time.Now().Add(4 * stallTimeout)
	for {
		idle, err := s.idle(ctx)
		if err != nil {
			return fmt.Errorf("%s: is it idle: %w", s.name, err)
		}
		if idle {
			break
		}
		if time.Now().After(deadline) {
			return s.failure(fmt.Errorf("still sending what earlier cases queued after %s", 4*stallTimeout))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return f.prepare(ctx, latency)
}

// getJSON is GET url decoded into out, with the system's headers.
func (s *system) getJSON(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header = s.header.Clone()
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, out)
}

// tokensFor is the per devices of notification n, round robin.
func (s *system) tokensFor(n int64, per int) []string {
	out := make([]string, per)
	for i := range out {
		out[i] = s.tokens[(int(n)*per+i)%len(s.tokens)]
	}
	return out
}

// post sends notification n to per devices; it returns the status (0 and
// the error when there was no answer) and the id the fake will see.
func (s *system) post(ctx context.Context, n int64, per int) (int, string, error) {
	b, id := s.body(fmt.Sprintf("%d-%d", s.round.Load(), n), s.tokensFor(n, per))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(b))
	if err != nil {
		return 0, id, err
	}
	req.Header = s.header.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, id, err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != s.accepted {
		return resp.StatusCode, id, fmt.Errorf("%s: POST answered %d: %s", s.name, resp.StatusCode, bytes.TrimSpace(out))
	}
	return resp.StatusCode, id, nil
}

// firstError keeps the first of many concurrent errors.
type firstError struct {
	once sync.Once
	err  error
}

func (f *firstError) set(err error) {
	if err != nil {
		f.once.Do(func() { f.err = err })
	}
}

// closedLoop posts posts notifications of per devices each from conns
// connections as fast as they are answered, and returns the sends per
// second from the first POST to the fake's receipt of the last send. When
// cpu is not nil, the CPU each part of the machine used from the first POST
// until the fake had received every send is added to it (D97).
func closedLoop(ctx context.Context, s *system, f *fake, posts, per, conns int, latency time.Duration, cpu *cpuUse) (float64, error) {
	if err := s.start(ctx, f, latency); err != nil {
		return 0, err
	}
	parts := cpuParts{system: s.proc().pid(), fake: f.proc.pid(), database: s.database}
	var before cpuSnapshot
	if cpu != nil {
		var err error
		if before, err = parts.snapshot(ctx); err != nil {
			return 0, fmt.Errorf("CPU use: %w", err)
		}
	}
	var seq atomic.Int64
	var fail firstError
	var wg sync.WaitGroup
	start := time.Now()
	for range min(conns, posts) {
		wg.Go(func() {
			for n := seq.Add(1); n <= int64(posts) && ctx.Err() == nil; n = seq.Add(1) {
				_, _, err := s.post(ctx, n, per)
				fail.set(err)
			}
		})
	}
	wg.Wait()
	if fail.err != nil {
		return 0, fail.err
	}
	want := posts * per
	if err := f.waitReceived(ctx, want); err != nil {
		return 0, s.failure(err)
	}
	if cpu != nil {
		after, err := parts.snapshot(ctx)
		if err != nil {
			return 0, fmt.Errorf("CPU use: %w", err)
		}
		cpu.add(after.since(before, want))
	}
	if _, err := f.waitSettled(ctx); err != nil {
		return 0, err
	}
	rs, err := f.receipts(ctx)
	if err != nil {
		return 0, err
	}
	last, err := checkReceipts(rs, want)
	if err != nil {
		return 0, err
	}
	return float64(want) / last.Sub(start).Seconds(), nil
}

// latencies is POST → provider at a fixed rate.
type latencies struct {
	Sent    int     `json:"sent"`
	P50ms   float64 `json:"p50Ms"`
	P99ms   float64 `json:"p99Ms"`
	MaxMs   float64 `json:"maxMs"`
	Missing int     `json:"missing"`
}

// openLoop posts single-device notifications at rate per second for d,
// each on its own schedule whatever the answers (open loop), and matches
// each one's id with the fake's receipt.
func openLoop(ctx context.Context, s *system, f *fake, rate int, d time.Duration, latency time.Duration) (*latencies, error) {
	if err := s.start(ctx, f, latency); err != nil {
		return nil, err
	}
	total := int(int64(rate) * int64(d) / int64(time.Second))
	interval := time.Second / time.Duration(rate)
	postedAt := make([]time.Time, total)
	ids := make([]string, total)
	var fail firstError
	var wg sync.WaitGroup
	start := time.Now()
	for i := range total {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		wg.Go(func() {
			postedAt[i] = time.Now()
			_, id, err := s.post(ctx, int64(i+1), 1)
			ids[i] = id
			fail.set(err)
		})
	}
	wg.Wait()
	if fail.err != nil {
		return nil, fail.err
	}
	if err := f.waitReceived(ctx, total); err != nil {
		return nil, s.failure(err)
	}
	if _, err := f.waitSettled(ctx); err != nil {
		return nil, err
	}
	rs, err := f.receipts(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := checkReceipts(rs, total); err != nil {
		return nil, err
	}
	received := make(map[string]time.Time, len(rs))
	for _, r := range rs {
		if _, seen := received[r.NotificationID]; !seen {
			received[r.NotificationID] = r.ReceivedAt
		}
	}
	out := &latencies{Sent: total}
	var lat []time.Duration
	for i, id := range ids {
		at, ok := received[id]
		if !ok {
			out.Missing++
			continue
		}
		lat = append(lat, at.Sub(postedAt[i]))
	}
	sorted := loadkit.Sorted(lat)
	out.P50ms, out.P99ms, out.MaxMs = ms(loadkit.Percentile(sorted, 0.50)), ms(loadkit.Percentile(sorted, 0.99)), ms(loadkit.Max(lat))
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// saturation is what the API accepted and the workers delivered while
// POSTs came as fast as they were answered.
type saturation struct {
	AcceptedPerS  float64 `json:"acceptedPerS"`
	DeliveredPerS float64 `json:"deliveredPerS"`
	Refused429    int64   `json:"refused429"`
	BacklogHalf   int     `json:"backlogAtHalf"`
	BacklogEnd    int     `json:"backlogAtEnd"`
	Grows         bool    `json:"backlogGrows"`
}

// saturate posts single-device notifications from conns connections for
// d; the backlog (sends accepted and not yet received by the fake) is read
// at half time and at the end. It then waits for the backlog to drain, so
// that the next case starts from an empty queue.
func saturate(ctx context.Context, s *system, f *fake, d time.Duration, conns int) (*saturation, error) {
	if err := s.start(ctx, f, 0); err != nil {
		return nil, err
	}
	var seq, accepted, refused atomic.Int64
	var fail firstError
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for range conns {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				code, _, err := s.post(ctx, seq.Add(1), 1)
				switch {
				case err == nil:
					accepted.Add(1)
				case code == http.StatusTooManyRequests:
					refused.Add(1)
				default:
					fail.set(err)
				}
			}
		})
	}
	backlog := func() (int, int, error) {
		st, err := f.stats(ctx)
		return int(accepted.Load()) - st.Received, st.Received, err
	}
	out := &saturation{}
	var err error
	select {
	case <-time.After(d / 2):
	case <-ctx.Done():
	}
	out.BacklogHalf, _, err = backlog()
	wg.Wait()
	if fail.err != nil {
		return nil, fail.err
	}
	if err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	var received int
	if out.BacklogEnd, received, err = backlog(); err != nil {
		return nil, err
	}
	out.AcceptedPerS = float64(accepted.Load()) / elapsed.Seconds()
	out.DeliveredPerS = float64(received) / elapsed.Seconds()
	out.Refused429 = refused.Load()
	// Growing: the second half added more than a tenth of the first half's
	// backlog (and more than a handful of sends in flight).
	out.Grows = out.BacklogEnd > out.BacklogHalf+max(out.BacklogHalf/10, 64)
	if err := f.waitReceived(ctx, int(accepted.Load())); err != nil {
		return nil, s.failure(err)
	}
	return out, nil
}

// failure adds the server's last output to err.
func (s *system) failure(err error) error {
	return fmt.Errorf("%w; %s's last output:\n%s", err, s.name, s.proc().out.tail(2000))
}
