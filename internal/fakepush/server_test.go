package fakepush

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncepush/oncepush/provider"
)

// parsePKCS8PEM reads a private key the fake handed out (what names it for
// the failure): a PEM "PRIVATE KEY" block holding PKCS #8.
func parsePKCS8PEM(t *testing.T, what string, b []byte) any {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		t.Fatalf("%s is not a PEM PRIVATE KEY: %q", what, b)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatalf("%s is not PKCS #8: %v", what, err)
	}
	return k
}

// postBearer posts a JSON body to the fake at path, with bearer as the
// Authorization ("" sends none), and returns the answer's status and body.
func postBearer(t *testing.T, fake *Server, path, bearer, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, fake.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := fake.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// rustorePost sends one RuStore message for token to the fake; the fake's
// RuStore needs no OAuth exchange.
func rustorePost(ctx context.Context, fake *Server, token string) (int, error) {
	body := fmt.Sprintf(`{"message":{"token":%q,"data":{"oncepush_id":"n-%s"}}}`, token, token)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fake.URL+"/rustore/v1/projects/p1/messages:send", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+fake.RuStoreToken())
	resp, err := fake.Client().Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.ReadAll(resp.Body)
	return resp.StatusCode, nil
}

// TestFakeRecordsAtArrival: a request is recorded the moment it was read,
// before its (held) answer; what became of it is recorded when it settles,
// also when the client went away meanwhile. Requests and Count show only
// requests that were answered or dropped, as they always did.
func TestFakeRecordsAtArrival(t *testing.T) {
	t.Parallel()
	fake := StartForTest(t, nil)
	fake.Program(provider.TransportRuStore, "held-1", Answer{Latency: time.Hour})

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := rustorePost(ctx, fake, "held-1")
		errc <- err
	}()
	if !fake.WaitReceived(t.Context(), 1) {
		t.Fatal("the held request was never recorded")
	}
	held := fake.Held()
	if len(held) != 1 || held[0].Token != "held-1" || held[0].Fate != FateHeld || held[0].Seq != 1 ||
		held[0].ReceivedAt.IsZero() || !held[0].At.IsZero() || held[0].RemoteAddr == "" || held[0].Payload != nil {
		t.Fatalf("held: %+v", held)
	}
	if n := fake.Count(); n != 0 || len(fake.Requests()) != 0 {
		t.Fatalf("a held request counts as answered: Count %d, Requests %+v", n, fake.Requests())
	}
	if st := fake.Stats(); st != (Stats{Received: 1, Held: 1}) {
		t.Errorf("stats while held: %+v", st)
	}

	cancel() // the client gives up while the fake holds the answer
	if err := <-errc; err == nil {
		t.Fatal("the cancelled request got an answer")
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	if !fake.WaitStats(wctx, func(st Stats) bool { return st.Abandoned > 0 }) {
		t.Fatalf("the abandoned request never settled: %+v", fake.Stats())
	}
	if status, err := rustorePost(t.Context(), fake, "live-1"); err != nil || status != http.StatusOK {
		t.Fatalf("a live send: %d %v", status, err)
	}

	got := fake.Received()
	if len(got) != 2 || got[0].Fate != FateAbandoned || got[0].Status != 0 || got[0].At.IsZero() ||
		got[1].Token != "live-1" || got[1].Fate != FateAnswered || got[1].Status != http.StatusOK || got[1].Seq != 2 ||
		got[1].At.Before(got[1].ReceivedAt) || got[1].NotificationID != "n-live-1" {
		t.Fatalf("received: %+v", got)
	}
	if reqs := fake.Requests(); len(reqs) != 1 || reqs[0].Token != "live-1" || fake.Count() != 1 {
		t.Errorf("Requests lists the abandoned request, or not the answered one: %+v", reqs)
	}
	if page := fake.ReceivedAfter(1, 10); len(page) != 1 || page[0].Seq != 2 || page[0].Payload != nil {
		t.Errorf("ReceivedAfter(1): %+v", page)
	}
	if st := fake.Stats(); st != (Stats{Received: 2, Answered: 1, Abandoned: 1}) {
		t.Errorf("stats: %+v", st)
	}

	// Sequence numbers go on after a Reset.
	fake.Reset()
	if _, err := rustorePost(t.Context(), fake, "after-reset"); err != nil {
		t.Fatal(err)
	}
	if got := fake.Received(); len(got) != 1 || got[0].Seq != 3 {
		t.Errorf("after Reset: %+v", got)
	}
}

// TestFakeMix: requests without a program draw from the mix in its
// proportions, the same sequence for the same seed; a program still wins.
func TestFakeMix(t *testing.T) {
	t.Parallel()
	draws := func(seed uint64) []int {
		fake := StartForTest(t, nil)
		if err := fake.Mix(provider.TransportRuStore, seed,
			Choice{Weight: 3, Answer: Answer{}},
			Choice{Weight: 1, Answer: RuStoreError(503, "UNAVAILABLE", "busy")},
		); err != nil {
			t.Fatal(err)
		}
		fake.Program(provider.TransportRuStore, "programmed", Answer{Status: 418, Body: "teapot"})
		var out []int
		for i := range 200 {
			status, err := rustorePost(t.Context(), fake, fmt.Sprintf("device-%03d", i))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, status)
		}
		if status, _ := rustorePost(t.Context(), fake, "programmed"); status != 418 {
			t.Errorf("a programmed token drew from the mix: %d", status)
		}
		return out
	}
	a, b := draws(7), draws(7)
	busy := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("draw %d: %d, then %d with the same seed", i, a[i], b[i])
		}
		if a[i] == 503 {
			busy++
		}
	}
	if busy < 25 || busy > 80 { // 50 expected
		t.Errorf("%d of 200 answers were 503, want about a quarter", busy)
	}

	fake := StartForTest(t, nil)
	if err := fake.Mix(provider.TransportFCM, 1, Choice{Weight: 0}); err == nil {
		t.Error("a zero weight was accepted")
	}
}

// handClock is a clock the test moves by hand, as pushtest.Clock (which
// imports this package, so this package's tests cannot use it).
type handClock struct{ ns atomic.Int64 }

func (c *handClock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

func (c *handClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// TestFakeRunsOnItsClock: with a clock, the fake judges assertions and
// expires the access tokens it issued on that clock, not the wall clock, and
// records its requests' times from it.
func TestFakeRunsOnItsClock(t *testing.T) {
	t.Parallel()
	clock := &handClock{}
	clock.ns.Store(time.Date(2021, 6, 1, 8, 0, 0, 0, time.UTC).UnixNano())
	fake := StartForTest(t, &Options{Clock: clock})
	acct := fcmAccountOf(t, fake, "proj-a")
	onClock := func(h, c map[string]any) {
		c["iat"], c["exp"] = clock.Now().Unix(), clock.Now().Add(time.Hour).Unix()
	}
	if status, body := postToken(t, fake, acct.TokenURI, acct.assertion(t, acct.key, nil)); status != http.StatusBadRequest {
		t.Fatalf("an assertion on the wall clock: %d %v, want 400 (years after the fake's now)", status, body)
	}
	access := acct.accessToken(t, fake, onClock) // an assertion on the fake's clock
	send := func() int {
		t.Helper()
		status, _ := postBearer(t, fake, "/fcm/v1/projects/proj-a/messages:send", access,
			`{"message":{"token":"device-1","data":{"oncepush_id":"n1"}}}`)
		return status
	}
	clock.Advance(59 * time.Minute)
	if status := send(); status != http.StatusOK {
		t.Fatalf("a token 59 minutes old on the fake's clock: %d, want 200", status)
	}
	if r := fake.Requests()[0]; !r.ReceivedAt.Equal(clock.Now()) || !r.At.Equal(clock.Now()) {
		t.Errorf("recorded at %v / %v, want the fake's now %v", r.ReceivedAt, r.At, clock.Now())
	}
	clock.Advance(time.Minute)
	if status := send(); status != http.StatusUnauthorized {
		t.Fatalf("a token an hour old on the fake's clock: %d, want 401", status)
	}
}
