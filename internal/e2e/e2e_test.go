// Package e2e tests the engine through the real provider clients against the
// fake providers over loopback HTTP/2, on PostgreSQL.
package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/internal/fakepush"
	"github.com/oncepush/oncepush/internal/testdb"
	"github.com/oncepush/oncepush/provider/hms"
	"github.com/oncepush/oncepush/pushtest"
	"github.com/oncepush/oncepush/pushtest/fakeproviders"
)

// specs are the transports these tests cover: the built-in ones and Huawei
// Push Kit, as the server has them (internal/registry).
func specs() []oncepush.TransportSpec { return append(oncepush.BuiltinTransports(), hms.Spec) }

// transports are the names of specs().
func transports() []oncepush.Transport {
	var out []oncepush.Transport
	for _, s := range specs() {
		out = append(out, s.Name)
	}
	return out
}

type env struct {
	t      *testing.T
	ctx    context.Context
	fake   *pushtest.FakeServer
	client *oncepush.Client[pgx.Tx]
}

func setup(t *testing.T, mod func(*oncepush.Config)) *env {
	t.Helper()
	conn := testdb.Schema(t)
	drv := postgres.New(testdb.Pool(t, conn, 0))
	if _, err := drv.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	fake := pushtest.NewFakeServer(t)
	quiet := slog.New(slog.DiscardHandler)
	providers, err := fakeproviders.New(fake, fakeproviders.Options{Logger: quiet, Transports: specs()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &oncepush.Config{Transports: specs(), Providers: providers, Logger: quiet}
	if mod != nil {
		mod(cfg)
	}
	client, err := oncepush.NewClient(drv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: t.Context(), fake: fake, client: client}
}

// token returns a device token of the transport's shape; Web Push tokens are
// subscriptions the fake can decrypt for.
func (e *env) token(tr oncepush.Transport, n int) oncepush.Token {
	switch tr {
	case oncepush.TransportAPNs:
		return oncepush.Token(fmt.Sprintf("%064x", n))
	case oncepush.TransportWebPush:
		return e.fake.NewWebPushSubscription()
	}
	return oncepush.Token(fmt.Sprintf("%s-device-token-%06d", tr, n))
}

func (e *env) register(recipient string, tr oncepush.Transport, n int) *oncepush.Device {
	e.t.Helper()
	d, err := e.client.RegisterDevice(e.ctx, oncepush.Device{Recipient: recipient, Transport: tr, Token: e.token(tr, n)})
	if err != nil {
		e.t.Fatalf("register %s: %v", tr, err)
	}
	return d
}

// registerMany registers n recipients ("r0", "r1", …), each with one device
// of tr numbered from first, and returns their names.
func (e *env) registerMany(n int, tr oncepush.Transport, first int) []string {
	e.t.Helper()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("r%d", i)
		e.register(names[i], tr, first+i)
	}
	return names
}

// sendAndDrain sends msg to the recipients and delivers until nothing is due.
func (e *env) sendAndDrain(recipients []string, msg oncepush.Message) oncepush.RunStats {
	e.t.Helper()
	if _, err := e.client.Send(e.ctx, recipients, msg, nil); err != nil {
		e.t.Fatal(err)
	}
	st, err := e.client.Drain(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

func TestEveryTransportOnceWithItsCollapseID(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	devs := map[oncepush.Transport]*oncepush.Device{}
	for i, tr := range transports() {
		devs[tr] = e.register("u_8831", tr, i)
	}
	res, err := e.client.Send(e.ctx, []string{"u_8831"}, oncepush.Message{
		Type: "invoice.paid", Title: "Invoice paid", Body: "Globex paid inv_2201.", Link: "/invoices/inv_2201",
		Data: map[string]any{"invoice": "inv_2201"},
	}, &oncepush.SendOptions{DedupKey: "invoice.paid:inv_2201"})
	if err != nil || res.Queued != 1 {
		t.Fatalf("send: %+v, %v", res, err)
	}
	if _, err := e.client.Drain(e.ctx); err != nil {
		t.Fatal(err)
	}
	nid := oncepush.NotificationID("invoice.paid", "u_8831", map[string]any{"dedupKey": "invoice.paid:inv_2201"})
	for _, tr := range transports() {
		reqs := e.fake.RequestsFor(tr)
		if len(reqs) != 1 {
			t.Fatalf("%s: %d requests, want exactly 1", tr, len(reqs))
		}
		r := reqs[0]
		if r.NotificationID != nid {
			t.Errorf("%s: payload carries oncepush_id %q, want %q", tr, r.NotificationID, nid)
		}
		// RuStore and Push Kit have no collapse identity on the wire.
		if tr != oncepush.TransportRuStore && tr != hms.Name && r.CollapseID != nid {
			t.Errorf("%s: collapse id %q, want the notification id %q", tr, r.CollapseID, nid)
		}
		if r.Status < 200 || r.Status > 299 {
			t.Errorf("%s: fake answered %d", tr, r.Status)
		}
	}
	ds, err := e.client.RecipientDeliveries(e.ctx, "u_8831", 0, 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries: %+v, %v", ds, err)
	}
	d := ds[0]
	if d.Status != oncepush.StatusSent || len(d.Devices) != len(transports()) {
		t.Fatalf("delivery: %+v", d)
	}
	for _, a := range d.Devices {
		if a.State != oncepush.AttemptAccepted || a.Submissions != 1 {
			t.Errorf("%s ledger: %+v", a.Transport, a)
		}
		if a.Transport != oncepush.TransportRuStore && a.ProviderID == "" {
			t.Errorf("%s: no provider id recorded", a.Transport)
		}
	}
	apnsReq := e.fake.RequestsFor(oncepush.TransportAPNs)[0]
	if want := oncepush.SubmissionID(d.ID, oncepush.TransportAPNs, string(devs[oncepush.TransportAPNs].Token)); apnsReq.APNsID != want {
		t.Errorf("apns-id %q, want the submission id %q", apnsReq.APNsID, want)
	}
	web := e.fake.RequestsFor(oncepush.TransportWebPush)[0]
	if !strings.Contains(string(web.Payload), `"title":"Invoice paid"`) {
		t.Errorf("web push payload (decrypted by the fake): %s", web.Payload)
	}
}

// TestInvalidTokensInProvidersWords: each provider's own dead-token answer
// deletes that device only, and the ledger keeps the provider's words.
func TestInvalidTokensInProvidersWords(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	wantText := map[oncepush.Transport]string{
		oncepush.TransportFCM:     "fcm 404 UNREGISTERED: Requested entity was not found.",
		oncepush.TransportAPNs:    "apns 410 Unregistered",
		oncepush.TransportWebPush: "webpush 410 Gone",
		oncepush.TransportRuStore: "rustore 404 NOT_FOUND: Requested entity was not found.",
		hms.Name:                  "hms 400 80300007: All the tokens are invalid.",
	}
	for i, tr := range transports() {
		e.register("gone", tr, 100+i)
		e.fake.Program(tr, "", fakepush.DeadTokenAnswer(tr))
	}
	e.register("kept", oncepush.TransportFCM, 200)
	e.fake.Program(oncepush.TransportFCM, "fcm-device-token-000200", pushtest.FakeAnswer{})
	e.sendAndDrain([]string{"gone", "kept"}, oncepush.Message{Title: "bye"})
	if devs, _ := e.client.Devices(e.ctx, "gone"); len(devs) != 0 {
		t.Fatalf("dead devices kept: %+v", devs)
	}
	if devs, _ := e.client.Devices(e.ctx, "kept"); len(devs) != 1 {
		t.Fatalf("a live device was deleted: %+v", devs)
	}
	ds, _ := e.client.RecipientDeliveries(e.ctx, "gone", 0, 1)
	if len(ds) != 1 || ds[0].Status != oncepush.StatusFailed {
		t.Fatalf("delivery to dead devices: %+v", ds)
	}
	for _, a := range ds[0].Devices {
		if a.State != oncepush.AttemptInvalid || !strings.HasPrefix(a.Error, wantText[a.Transport]) {
			t.Errorf("%s: state %s, text %q; want invalid and %q", a.Transport, a.State, a.Error, wantText[a.Transport])
		}
	}
}

// TestProviderWide429SlowsLaterSends: FCM's project quota (a 429 whose
// ErrorInfo names SendsPerMinutePerProject) with Retry-After holds every
// later FCM send of this client, not just the one device's.
func TestProviderWide429SlowsLaterSends(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *oncepush.Config) { c.ConcurrentSends = 1 })
	names := e.registerMany(5, oncepush.TransportFCM, 300)
	e.register("apple", oncepush.TransportAPNs, 400)
	quota := pushtest.FCMProjectQuotaExceeded()
	quota.Header = http.Header{"Retry-After": {"120"}}
	e.fake.Program(oncepush.TransportFCM, "", quota)
	st := e.sendAndDrain(append(names, "apple"), oncepush.Message{Title: "quota"})
	if n := len(e.fake.RequestsFor(oncepush.TransportFCM)); n != 1 {
		t.Fatalf("%d FCM requests after a project-wide 429, want 1", n)
	}
	if n := len(e.fake.RequestsFor(oncepush.TransportAPNs)); n != 1 {
		t.Fatalf("APNs held by FCM's quota: %d requests", n)
	}
	if st.Released != 4 {
		t.Fatalf("run stats %+v: want the 4 other FCM pairs released", st)
	}
	for _, r := range names {
		ds, _ := e.client.RecipientDeliveries(e.ctx, r, 0, 1)
		if ds[0].Status != oncepush.StatusPending || time.Until(ds[0].NextAttemptAt) < 100*time.Second {
			t.Fatalf("%s: %s due %s; want pending until the provider's Retry-After (120 s)", r, ds[0].Status, ds[0].NextAttemptAt)
		}
	}
}

// TestDeviceRate429HoldsOnlyThatDevice: FCM's per-device message rate
// (QUOTA_EXCEEDED) backs off that device; the other FCM sends of the run go
// on, one at a time, as if nothing happened.
func TestDeviceRate429HoldsOnlyThatDevice(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *oncepush.Config) { c.ConcurrentSends = 1 })
	names := e.registerMany(5, oncepush.TransportFCM, 500)
	busy := pushtest.FCMDeviceRateExceeded()
	busy.Header = http.Header{"Retry-After": {"1"}}
	e.fake.Program(oncepush.TransportFCM, string(e.token(oncepush.TransportFCM, 500)), busy)
	st := e.sendAndDrain(names, oncepush.Message{Title: "rate"})
	if n := len(e.fake.RequestsFor(oncepush.TransportFCM)); n != 5 {
		t.Fatalf("%d FCM requests, want 5: one device's rate limit held the others", n)
	}
	if st.Released != 0 {
		t.Fatalf("run stats %+v: nothing should be released for one device's 429", st)
	}
	for i, r := range names {
		ds, _ := e.client.RecipientDeliveries(e.ctx, r, 0, 1)
		want := oncepush.StatusSent
		if i == 0 {
			want = oncepush.StatusPending
		}
		if ds[0].Status != want {
			t.Errorf("%s: %s, want %s", r, ds[0].Status, want)
		}
	}
}
