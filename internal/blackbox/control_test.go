package blackbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/pushtest"
)

// controlSetup starts an in-process fake; its control endpoints are what
// 'oncepush fake-providers' serves.
func controlSetup(t *testing.T) (*pushtest.FakeServer, *http.Client) {
	t.Helper()
	fake := pushtest.NewFakeServer(t)
	c := fake.Client()
	t.Cleanup(c.CloseIdleConnections)
	return fake, c
}

// rustoreSend sends to the fake RuStore API, which needs no OAuth exchange,
// and returns the answer's status, body and Retry-After header.
func rustoreSend(t *testing.T, fake *pushtest.FakeServer, c *http.Client, token string) (int, string, string, error) {
	t.Helper()
	body := `{"message":{"token":"` + token + `","data":{"oncepush_id":"n1"}}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, fake.URL+"/rustore/v1/projects/p/messages:send", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+fake.RuStoreToken())
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("Retry-After"), nil
}

func post(t *testing.T, c *http.Client, url, body string) (int, string) {
	t.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func controlRequests(t *testing.T, fake *pushtest.FakeServer, c *http.Client, query string) []pushtest.ControlRequest {
	t.Helper()
	resp, err := c.Get(fake.URL + "/_fake/requests" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /_fake/requests%s: %d %s", query, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var reqs []pushtest.ControlRequest
	if err := json.NewDecoder(resp.Body).Decode(&reqs); err != nil {
		t.Fatal(err)
	}
	return reqs
}

func TestControlProgramAndRequests(t *testing.T) {
	t.Parallel()
	fake, c := controlSetup(t)
	if reqs := controlRequests(t, fake, c, ""); reqs == nil || len(reqs) != 0 {
		t.Fatalf("a new fake's requests: %#v, want []", reqs)
	}
	// A provider's error document written inline as an object, and a header
	// value as a string.
	status, body := post(t, c, fake.URL+"/_fake/program", `{"transport": "rustore", "token": "dead-token-1", "answers": [
		{"status": 404, "body": {"error": {"code": 404, "status": "NOT_FOUND", "message": "gone"}}, "header": {"Retry-After": "7"}},
		{"status": 503, "body": "busy"}]}`)
	if status != http.StatusNoContent {
		t.Fatalf("program: %d %s", status, body)
	}
	st, b, retry, err := rustoreSend(t, fake, c, "dead-token-1")
	if err != nil || st != 404 || retry != "7" {
		t.Fatalf("first programmed answer: %d %q Retry-After %q (%v)", st, b, retry, err)
	}
	var doc struct{ Error struct{ Status string } }
	_ = json.Unmarshal([]byte(b), &doc)
	if doc.Error.Status != "NOT_FOUND" {
		t.Errorf("the inline object body was not sent as JSON: %s", b)
	}
	// The last answer keeps answering.
	for range 2 {
		if st, b, _, _ := rustoreSend(t, fake, c, "dead-token-1"); st != 503 || b != "busy" {
			t.Errorf("later answers: %d %q, want 503 busy", st, b)
		}
	}
	// Other tokens are not programmed.
	if st, _, _, _ := rustoreSend(t, fake, c, "live-token-1"); st != http.StatusOK {
		t.Errorf("an unprogrammed token: %d", st)
	}

	reqs := controlRequests(t, fake, c, "?transport=rustore")
	if len(reqs) != 4 {
		t.Fatalf("%d rustore requests recorded, want 4", len(reqs))
	}
	r := reqs[0]
	if r.Transport != oncepush.TransportRuStore || r.Token != "dead-token-1" || r.NotificationID != "n1" || r.Status != 404 ||
		!strings.Contains(r.Payload, `"token":"dead-token-1"`) || r.At.IsZero() {
		t.Errorf("recorded request: %+v", r)
	}
	if r.Header.Get("Authorization") != "" {
		t.Error("the recorded request shows its Authorization header")
	}
	if other := controlRequests(t, fake, c, "?transport=apns"); len(other) != 0 {
		t.Errorf("apns requests: %+v", other)
	}

	// No answers clears the program.
	if st, b := post(t, c, fake.URL+"/_fake/program", `{"transport": "rustore", "token": "dead-token-1", "answers": []}`); st != http.StatusNoContent {
		t.Fatalf("clear: %d %s", st, b)
	}
	if st, _, _, _ := rustoreSend(t, fake, c, "dead-token-1"); st != http.StatusOK {
		t.Errorf("after clearing the program: %d", st)
	}

	// Reset forgets the requests.
	if st, b := post(t, c, fake.URL+"/_fake/reset", ""); st != http.StatusNoContent {
		t.Fatalf("reset: %d %s", st, b)
	}
	if reqs := controlRequests(t, fake, c, ""); len(reqs) != 0 {
		t.Errorf("after reset: %d requests", len(reqs))
	}
}

func TestControlAnswerOfRoundTrips(t *testing.T) {
	t.Parallel()
	fake, c := controlSetup(t)
	want := pushtest.RuStoreError(429, "RESOURCE_EXHAUSTED", "Slow down.")
	want.Header = http.Header{"Retry-After": {"30"}}
	b, err := json.Marshal(pushtest.ControlProgram{
		Transport: oncepush.TransportRuStore, Answers: []pushtest.ControlAnswer{pushtest.ControlAnswerOf(want)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if st, body := post(t, c, fake.URL+"/_fake/program", string(b)); st != http.StatusNoContent {
		t.Fatalf("program: %d %s", st, body)
	}
	st, body, retry, err := rustoreSend(t, fake, c, "any-token")
	if err != nil || st != 429 || body != want.Body || retry != "30" {
		t.Errorf("answer %d %q Retry-After %q (%v); want 429 %q Retry-After 30", st, body, retry, err, want.Body)
	}
}

func TestControlLatencyAndDrop(t *testing.T) {
	t.Parallel()
	fake, c := controlSetup(t)
	if st, b := post(t, c, fake.URL+"/_fake/latency", `{"transport": "rustore", "latencyMs": 300}`); st != http.StatusNoContent {
		t.Fatalf("latency: %d %s", st, b)
	}
	start := time.Now()
	if st, _, _, err := rustoreSend(t, fake, c, "slow-token-1"); err != nil || st != http.StatusOK {
		t.Fatalf("send: %d %v", st, err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("answered after %s, want at least the 300 ms set", d)
	}
	post(t, c, fake.URL+"/_fake/latency", `{"transport": "rustore", "latencyMs": 0}`)

	if st, b := post(t, c, fake.URL+"/_fake/program", `{"transport": "rustore", "answers": [{"drop": true}]}`); st != http.StatusNoContent {
		t.Fatalf("program: %d %s", st, b)
	}
	if _, _, _, err := rustoreSend(t, fake, c, "dropped-token-1"); err == nil {
		t.Error("a dropped request got an answer")
	}
	reqs := controlRequests(t, fake, c, "")
	if last := reqs[len(reqs)-1]; last.Token != "dropped-token-1" || last.Status != 0 {
		t.Errorf("the dropped request was recorded as %+v, want status 0", last)
	}
}

func TestControlWebPushSubscription(t *testing.T) {
	t.Parallel()
	fake, c := controlSetup(t)
	st, body := post(t, c, fake.URL+"/_fake/webpush/subscriptions", "")
	if st != http.StatusCreated {
		t.Fatalf("subscribe: %d %s", st, body)
	}
	var sub pushtest.ControlSubscription
	if err := json.Unmarshal([]byte(body), &sub); err != nil {
		t.Fatal(err)
	}
	parsed, err := oncepush.ParseWebPushSubscription(sub.Token)
	if err != nil {
		t.Fatalf("the token is not a Web Push subscription: %v", err)
	}
	if sub.ID == "" || parsed.Endpoint != fake.URL+"/webpush/"+sub.ID {
		t.Errorf("endpoint %q, id %q: want the id to be the endpoint's last segment on the fake", parsed.Endpoint, sub.ID)
	}
	_, again := post(t, c, fake.URL+"/_fake/webpush/subscriptions", "")
	if again == body {
		t.Error("two subscriptions are the same")
	}
}

func TestControlRefusesBadRequests(t *testing.T) {
	t.Parallel()
	fake, c := controlSetup(t)
	for _, tc := range []struct{ path, body, field string }{
		{"/_fake/program", `{"transport": "mipush", "answers": []}`, "transport"},
		{"/_fake/program", `{"transport": "fcm", "answers": [{"status": 1000}]}`, "answers[0].status"},
		{"/_fake/program", `{"transport": "fcm", "answers": [{"latencyMs": -1}]}`, "answers[0].latencyMs"},
		{"/_fake/program", `{"transport": "fcm", "answers": [{"body": 42}]}`, "answers[0].body"},
		{"/_fake/program", `{"transport": "fcm", "answers": [{"stauts": 404}]}`, "stauts"},
		{"/_fake/program", `{"transport": "fcm", "answers": [{"header": {"Retry-After": 5}}]}`, "header"},
		{"/_fake/program", `{"transport": "fcm"} {}`, "more than one"},
		{"/_fake/program", `not json`, "body"},
		{"/_fake/latency", `{"transport": "apns", "latencyMs": "slow"}`, "latencyMs"},
		{"/_fake/latency", `{"transport": "apns", "latencyMs": -5}`, "latencyMs"},
		{"/_fake/latency", `{"transport": "", "latencyMs": 5}`, "transport"},
	} {
		st, body := post(t, c, fake.URL+tc.path, tc.body)
		var e struct{ Error string }
		_ = json.Unmarshal([]byte(body), &e)
		if st != http.StatusBadRequest || !strings.Contains(e.Error, tc.field) {
			t.Errorf("POST %s %s: %d %s; want 400 naming %s", tc.path, tc.body, st, body, tc.field)
		}
	}
	resp, err := c.Get(fake.URL + "/_fake/requests?transport=carrier-pigeon")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("requests of an unknown transport: %d, want 400", resp.StatusCode)
	}
}

func controlGet(t *testing.T, fake *pushtest.FakeServer, c *http.Client, path string, out any) int {
	t.Helper()
	resp, err := c.Get(fake.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	return resp.StatusCode
}

// TestControlReceivedStatsAndMix: a held request is listed by
// /_fake/received (and ?fate=held) before its answer; /_fake/stats counts by
// fate; a mix set over HTTP answers in its proportions.
func TestControlReceivedStatsAndMix(t *testing.T) {
	t.Parallel()
	fake, c := controlSetup(t)
	if st, b := post(t, c, fake.URL+"/_fake/program", `{"transport": "rustore", "token": "slow-1", "answers": [{"latencyMs": 60000}]}`); st != http.StatusNoContent {
		t.Fatalf("program: %d %s", st, b)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fake.URL+"/rustore/v1/projects/p/messages:send",
			strings.NewReader(`{"message":{"token":"slow-1","data":{"oncepush_id":"n1"}}}`))
		req.Header.Set("Authorization", "Bearer "+fake.RuStoreToken())
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	var held []pushtest.ControlReceipt
	deadline := time.Now().Add(10 * time.Second)
	for len(held) == 0 && time.Now().Before(deadline) {
		controlGet(t, fake, c, "/_fake/received?fate=held", &held)
	}
	if len(held) != 1 || held[0].Token != "slow-1" || held[0].Fate != pushtest.FateHeld || held[0].Seq != 1 ||
		held[0].ReceivedAt.IsZero() || !held[0].At.IsZero() || held[0].RemoteAddr == "" {
		t.Fatalf("held: %+v", held)
	}
	var st pushtest.FakeStats
	if controlGet(t, fake, c, "/_fake/stats", &st); st.Received != 1 || st.Held != 1 {
		t.Errorf("stats: %+v", st)
	}
	if reqs := controlRequests(t, fake, c, ""); len(reqs) != 0 {
		t.Errorf("/_fake/requests lists a held request: %+v", reqs)
	}
	cancel() // the client gives up: the request is abandoned
	<-done
	deadline = time.Now().Add(10 * time.Second)
	for controlGet(t, fake, c, "/_fake/stats", &st); st.Abandoned != 1 && time.Now().Before(deadline); {
		controlGet(t, fake, c, "/_fake/stats", &st)
	}
	if st.Held != 0 || st.Abandoned != 1 {
		t.Errorf("stats after the client gave up: %+v", st)
	}

	if st, b := post(t, c, fake.URL+"/_fake/mix", `{"transport": "rustore", "seed": 3, "choices": [
		{"weight": 1, "answer": {}}, {"weight": 1, "answer": {"status": 503, "body": "busy"}}]}`); st != http.StatusNoContent {
		t.Fatalf("mix: %d %s", st, b)
	}
	counts := map[int]int{}
	for i := range 40 {
		st, _, _, err := rustoreSend(t, fake, c, fmt.Sprintf("mixed-%02d", i))
		if err != nil {
			t.Fatal(err)
		}
		counts[st]++
	}
	if counts[200] == 0 || counts[503] == 0 || counts[200]+counts[503] != 40 {
		t.Errorf("answers of an even mix: %v", counts)
	}
	var page []pushtest.ControlReceipt
	if controlGet(t, fake, c, "/_fake/received?after=1&limit=5", &page); len(page) != 5 || page[0].Seq != 2 || page[0].Fate != pushtest.FateAnswered {
		t.Errorf("a page after seq 1: %+v", page)
	}
	for _, q := range []string{"after=-1", "after=x", "limit=0", "limit=10001", "fate=answered"} {
		if st := controlGet(t, fake, c, "/_fake/received?"+q, nil); st != http.StatusBadRequest {
			t.Errorf("/_fake/received?%s: %d, want 400", q, st)
		}
	}
	for _, tc := range []struct{ body, field string }{
		{`{"transport": "fcm", "choices": [{"weight": 0, "answer": {}}]}`, "choices[0].weight"},
		{`{"transport": "fcm", "choices": [{"weight": 1, "answer": {"status": 99}}]}`, "choices[0].answer.status"},
		{`{"transport": "pigeon", "choices": []}`, "transport"},
	} {
		st, body := post(t, c, fake.URL+"/_fake/mix", tc.body)
		if st != http.StatusBadRequest || !strings.Contains(body, tc.field) {
			t.Errorf("POST /_fake/mix %s: %d %s; want 400 naming %s", tc.body, st, body, tc.field)
		}
	}
}
