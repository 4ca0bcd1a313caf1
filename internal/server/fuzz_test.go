package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/serverstore"
	"github.com/oncepush/oncepush/driver/sqlite"
	"github.com/oncepush/oncepush/internal/apikey"
	"github.com/oncepush/oncepush/internal/openapitest"
	"github.com/oncepush/oncepush/internal/server"
	"github.com/oncepush/oncepush/provider/webpush"
	"github.com/oncepush/oncepush/pushtest"
)

// FuzzWriteRoutes sends arbitrary bodies, content types, recipients (and
// sessions) in the path and Idempotency-Key headers to every route of the
// server's table that writes, through the real handler on SQLite, with the
// real Web Push provider's token check. Whatever comes in: never a 5xx;
// every answer is one the OpenAPI document describes for the operation (a
// 2xx only for a request valid against the whole document); a refusal is
// problem+json with a stable code; and a refused request wrote nothing.
func FuzzWriteRoutes(f *testing.F) {
	sub := string(oncepush.WebPushSubscription{
		Endpoint: "https://fcm.googleapis.com/fcm/send/fuzz-0001",
		P256dh:   p256Generator,
		Auth:     bytes.Repeat([]byte{9}, 16),
	}.Token())
	for _, s := range []struct {
		route         uint8
		contentType   uint8
		recipient     string
		body, idemKey string
	}{
		{0, 0, "u_1", `{"recipients": ["u_1"], "title": "Hello"}`, ""},
		{0, 1, "u_1", `{"recipients": ["u_1", "u_2"], "title": "Paid", "data": {"n": 9007199254740993}, "dedupeKey": "k1", "ttlSeconds": 60}`, ""},
		{0, 0, "u_1", `{"recipients": ["u_1"], "title": "Paid", "dedupeKey": "k1", "ttlSeconds": 61}`, ""},
		{0, 0, "u_1", `{"recipients": ["u_1"], "title": "Hello", "dedupeKey": "k2"}`, "k3"},
		{0, 0, "u_1", `{"recipients": ["u_1"], "title": "Hello"}`, "k\x00"},
		{0, 0, "u_1", `{"recipients": ["u_1"], "title": "Hello", "data": {"n": 1e400}}`, ""},
		{0, 0, "u_1", `{"recipients": ["u_1"], "title": "Hello", "data": {"n": [` + strings.Repeat("1e308,", 600) + `0]}}`, ""},
		{0, 0, "u_1", `{"recipients": ["u_1"], "title": "Hello", "scheduledAt": "2026-13-01T00:00:00Z"}`, ""},
		{0, 0, "u_1", `{"recipients": ["u_1"], "title": "\u0000"}`, ""},
		{0, 2, "u_1", `{"recipients": ["u_1"], "title": "Hello"}`, ""},
		{0, 3, "u_1", `{"recipients": ["u_1"], "title": "Hello"}`, ""},
		{1, 0, "u_1", `{"transport": "fcm", "token": "dQw4w9WgXcQ:APA91bHun4MxP5ego"}`, ""},
		{1, 0, "u_2", `{"transport": "webpush", "token": ` + sub + `, "timeZone": "Europe/Zurich", "locale": "de-CH"}`, ""},
		{1, 0, "u_2", `{"transport": "webpush", "token": ` + strings.Replace(sub, "fcm.googleapis.com", "169.254.169.254", 1) + `}`, ""},
		{1, 0, "u_2", `{"transport": "webpush", "token": ` + strings.Replace(sub, "fcm.googleapis.com", "[::ffff:127.0.0.1]", 1) + `}`, ""},
		{1, 0, "u_2", `{"transport": "apns", "token": "` + strings.Repeat("ab", 32) + `", "session": "s_1"}`, ""},
		{1, 0, "u_2", `{"transport": "fcm", "token": "dQw4w9WgXcQ:APA91b", "timeZone": "Local"}`, ""},
		{1, 0, "u_\xff", `{"transport": "fcm", "token": "dQw4w9WgXcQ:APA91b"}`, ""},
		{1, 0, "", `{"transport": "fcm", "token": "dQw4w9WgXcQ:APA91b"}`, ""},
		{2, 0, "u_1", `{"transport": "fcm", "token": "dQw4w9WgXcQ:APA91bHun4MxP5ego", "recipient": "u_1"}`, ""},
		{2, 0, "u_1", `{"transport": "webpush", "token": {}}`, ""},
		{5, 0, "u_1", `{"optOut": ["marketing"], "quietHours": {"start": "22:00", "end": "07:00", "timeZone": "Europe/Zurich"}}`, ""},
		{5, 0, "u_1", `{"quietHours": {"start": "22:00", "end": "22:00", "timeZone": "UTC"}}`, ""},
		{5, 0, "u_1", `{"quietHours": {"start": "24:00", "end": "07:00", "timeZone": "../etc/passwd"}}`, ""},
		{3, 0, "s_1", ``, ""},
		{3, 0, "s\x00", `{"anything": 1}`, ""},
		{4, 0, "u_2", ``, ""},
		{4, 0, strings.Repeat("u", 201), ``, ""},
		{0, 0, "u_1", `null`, ""},
		{1, 0, "u_1", `{"transport": "fcm", "token": "t", "": 1}`, ""},
		{5, 0, "u_1", "{\"optOut\": [\"caf\xe9\"]}", ""},
		// The campaign routes, from POST /v1/campaigns (8) on.
		{8, 0, "u_1", `{"message": {"title": "Sale"}, "audience": "recipients"}`, ""},
		{8, 0, "u_1", `{"message": {"title": "Sale", "data": {"n": 1}}, "audience": "devices", "filter": {"tags": ["beta", "a b"]}, "ratePerMinute": 60.0}`, ""},
		{8, 0, "u_1", `{"message": {"title": "Sale"}, "audience": "devices", "filter": {"transports": ["sms"]}, "ttlSeconds": 1e400}`, ""},
		{9, 0, "u_1", `{"message": {"body": "Sale, again"}, "audience": "recipients", "ratePerMinute": 1e12}`, ""},
		{10, 0, "u_1", `{"recipients": ["u_1", "u_2", "u_1"]}`, ""},
		{10, 0, "u_1", `{"recipients": ["u_3"]}`, ""},
		{11, 0, "u_1", `{"startAt": "2026-01-05T10:00:00Z"}`, ""},
		{12, 0, "u_1", ``, ""},
		{13, 0, "u_1", `{}`, ""},
		{14, 0, "u_1", ``, ""},
	} {
		f.Add(s.route, s.contentType, s.recipient, []byte(s.body), s.idemKey)
	}

	h := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, route, contentType uint8, recipient string, body []byte, idemKey string) {
		rt := h.routes[int(route)%len(h.routes)]
		path := rt.Path
		for _, p := range []string{"{recipient}", "{session}"} {
			path = strings.ReplaceAll(path, p, url.PathEscape(recipient))
		}
		// Ids and page numbers of the first notification and campaign,
		// which earlier inputs may have made.
		path = strings.NewReplacer("{id}", "1", "{page}", "1").Replace(path)
		req := httptest.NewRequest(rt.Method, path, bytes.NewReader(body))
		if ct := contentTypes[int(contentType)%len(contentTypes)]; ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		if idemKey != "" {
			req.Header["Idempotency-Key"] = []string{idemKey}
		}
		req.Header.Set("Authorization", "Bearer "+h.admin)
		before := h.rows(t)
		w := httptest.NewRecorder()
		h.handler.ServeHTTP(w, req)
		res := w.Result()
		answer, _ := io.ReadAll(res.Body)

		if res.StatusCode >= 500 {
			t.Fatalf("%s %s %q: %d %s", rt.Method, path, body, res.StatusCode, answer)
		}
		u, _ := url.Parse(path)
		if err := h.spec.Check(&openapitest.Exchange{Method: rt.Method, URL: u, RequestHeader: req.Header, RequestBody: body,
			Status: res.StatusCode, ResponseHeader: res.Header, ResponseBody: answer}); err != nil {
			t.Fatalf("%s %s %q: the answer is not what the document says: %v\n%s", rt.Method, path, body, err, answer)
		}
		if res.StatusCode < 400 {
			return
		}
		var p struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
		}
		if ct := res.Header.Get("Content-Type"); ct != "application/problem+json" || json.Unmarshal(answer, &p) != nil ||
			p.Status != res.StatusCode || !slices.Contains(stableCodes, p.Code) {
			t.Fatalf("%s %s %q: refused with %d %s %s, want a problem with a stable code", rt.Method, path, body, res.StatusCode, ct, answer)
		}
		if after := h.rows(t); after != before {
			t.Fatalf("%s %s %q: refused (%s) but wrote: rows %s, were %s", rt.Method, path, body, answer, after, before)
		}
	})
}

// contentTypes the fuzzer picks from: the body's own, and refused ones.
var contentTypes = []string{"application/json", "application/json; charset=UTF-8", "text/plain", ""}

// stableCodes are the documented problem codes.
var stableCodes = []string{server.CodeInvalidJSON, server.CodeInvalidField, server.CodeUnknownField, server.CodeMissingField,
	server.CodeBodyTooLarge, server.CodeUnsupportedMediaType, server.CodeUnauthorized, server.CodeForbidden, server.CodeNotFound,
	server.CodeMethodNotAllowed, server.CodeIdempotencyConflict, server.CodeSessionRevoked,
	server.CodeCampaignState, server.CodeCampaignPageConflict, server.CodeCampaignMessage}

// fuzzServer is one fuzzing process's server: SQLite in a temporary file,
// its route table's write routes, an admin key, and the document.
type fuzzServer struct {
	handler http.Handler
	routes  []server.Route
	admin   string
	spec    *openapitest.Spec
	rows    func(t *testing.T) string
}

func newFuzzServer(f *testing.F) *fuzzServer {
	f.Helper()
	drv, err := sqlite.Open(f.Context(), filepath.Join(f.TempDir(), "oncepush.db"), &sqlite.Options{SynchronousNormal: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = drv.Close() })
	store := drv.ServerStore()
	if _, err := drv.Migrate(context.Background()); err != nil {
		f.Fatal(err)
	}
	if _, err := store.Migrate(context.Background()); err != nil {
		f.Fatal(err)
	}
	_, vapid, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		f.Fatal(err)
	}
	web, err := webpush.New(webpush.Config{VAPIDPrivateKey: vapid, VAPIDSubject: "mailto:fuzz@oncepush.invalid"})
	if err != nil {
		f.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	cfg := &oncepush.Config{
		Providers: []oncepush.Provider{pushtest.NewProvider(oncepush.TransportFCM), pushtest.NewProvider(oncepush.TransportAPNs),
			web, pushtest.NewProvider(oncepush.TransportRuStore)},
		Clock:  pushtest.NewClock(epoch),
		Logger: log,
	}
	server.Configure(cfg, store)
	client, err := oncepush.NewClient(drv, cfg)
	if err != nil {
		f.Fatal(err)
	}
	srv, err := server.New(server.Options[*sql.Tx]{Client: client, Store: store, Logger: log, MaxBodyBytes: 64 << 10, Version: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	k, err := apikey.New()
	if err != nil {
		f.Fatal(err)
	}
	if err := store.Exec().APIKeyInsert(context.Background(), &serverstore.APIKey{ID: k.ID(), Name: "fuzz", Hash: k.Hash(), Scopes: []string{apikey.ScopeAdmin}}); err != nil {
		f.Fatal(err)
	}
	s, err := spec()
	if err != nil {
		f.Fatal(err)
	}
	h := &fuzzServer{handler: srv.Handler(), admin: string(k), spec: s}
	for _, rt := range server.RoutesOf(srv) {
		if rt.Method != http.MethodGet {
			h.routes = append(h.routes, rt)
		}
	}
	var counts []string
	for _, tb := range tables {
		counts = append(counts, "(SELECT count(*) FROM "+tb+")")
	}
	query := "SELECT " + strings.Join(counts, " || ',' || ")
	h.rows = func(t *testing.T) string {
		var n string
		if err := drv.DB().QueryRowContext(context.Background(), query).Scan(&n); err != nil {
			t.Fatalf("count rows: %v", err)
		}
		return n
	}
	return h
}

// p256Generator is P-256's base point, uncompressed: a public key on the
// curve, as a subscription's p256dh must be.
var p256Generator, _ = hex.DecodeString("04" +
	"6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296" +
	"4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5")
