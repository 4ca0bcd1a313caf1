package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/api"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/postgres"
	"github.com/oncepush/oncepush/driver/serverstore"
	"github.com/oncepush/oncepush/driver/sqlite"
	"github.com/oncepush/oncepush/internal/apikey"
	"github.com/oncepush/oncepush/internal/enginetest"
	"github.com/oncepush/oncepush/internal/openapitest"
	"github.com/oncepush/oncepush/internal/server"
	"github.com/oncepush/oncepush/internal/testdb"
	"github.com/oncepush/oncepush/internal/testlog"
	"github.com/oncepush/oncepush/pushtest"
)

// spec is the OpenAPI document every exchange of these tests is checked against.
var spec = sync.OnceValues(func() (*openapitest.Spec, error) { return openapitest.Load(api.OpenAPI) })

// mustSpec is the OpenAPI document, for tests that walk its operations.
func mustSpec(t *testing.T) *openapitest.Spec {
	t.Helper()
	s, err := spec()
	if err != nil {
		t.Fatalf("the OpenAPI document: %v", err)
	}
	return s
}

// probePath fills a documented path's parameters with values of their shape,
// for requests whose answer does not depend on what they name.
var probePath = strings.NewReplacer("{id}", "1", "{page}", "1", "{recipient}", "u_probe", "{session}", "s_probe").Replace

// probeBody is a body for op: an empty object where it takes one.
func probeBody(op openapitest.Operation) any {
	if op.RequestBody {
		return obj{}
	}
	return nil
}

// TestMain lists, with -v, the documented responses no test exercised.
func TestMain(m *testing.M) {
	code := m.Run()
	if s, err := spec(); err == nil && testing.Verbose() {
		if un := s.Unexercised(); len(un) > 0 {
			fmt.Printf("OpenAPI responses no test exercised (%d):\n  %s\n", len(un), strings.Join(un, "\n  "))
		}
	}
	os.Exit(code)
}

// epoch is where every test's clock starts: Monday 2026-01-05 09:00 UTC,
// 10:00 in Zurich.
var epoch = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// Ledger tables, for "nothing was written" checks.
var tables = []string{
	"oncepush_message", "oncepush_delivery", "oncepush_device_attempt", "oncepush_device",
	"oncepush_preference", "oncepush_idempotency", "oncepush_revoked_session",
	"oncepush_campaign", "oncepush_campaign_recipient", "oncepush_campaign_page",
}

// envOptions adjust a test's server.
type envOptions struct {
	unmigrated bool                   // leave the database unmigrated (and keyless)
	engineOnly bool                   // migrate the engine's schema only (keyless)
	maxBody    int64                  // server.Options.MaxBodyBytes
	config     func(*oncepush.Config) // adjusts the client's configuration
	// sqliteBusyTimeout replaces the SQLite driver's busy timeout.
	sqliteBusyTimeout time.Duration
	// keyCacheTTL is server.Options.KeyCacheTTL.
	keyCacheTTL time.Duration
	// separateMetrics and backlogMax are server.Options.SeparateMetrics and
	// BacklogCountMax.
	separateMetrics bool
	backlogMax      int
	accessLog       bool // server.Options.AccessLog
	// maxBacklogAge is server.Options.MaxBacklogAge.
	maxBacklogAge time.Duration
}

// env is one test's server: an in-process oncepush server on its own
// database, fake providers for every transport, a clock the test moves and an
// HTTP client that checks every exchange against the OpenAPI document.
type env struct {
	t     *testing.T
	db    string // "sqlite" or "postgres"
	url   string
	http  *http.Client
	clock *pushtest.Clock
	fcm   *pushtest.Provider
	apns  *pushtest.Provider
	web   *pushtest.Provider
	rus   *pushtest.Provider
	// store runs the server's own statements (keys, preferences).
	store serverstore.Executor
	// opsURL serves the server's OperationsHandler (/metrics, /healthz,
	// /readyz), as a listener of its own would.
	opsURL string
	// drain delivers everything due at the clock's now.
	drain func()
	// cleanup runs one cleanup round at the clock's now.
	cleanup func() *oncepush.CleanupStats
	// expand runs campaign steps until none has work (Client.ExpandCampaigns),
	// as a started server's campaign loop does, with ctx's hooks.
	expand func(ctx context.Context) (oncepush.CampaignStats, error)
	// refreshBacklog reads the due backlog into the metrics, as the serving
	// process does every BacklogIntervalDefault.
	refreshBacklog func()
	// closeDB closes the server's database handle (to make it unreachable).
	closeDB func()
	// outage makes the database unreachable: on PostgreSQL as a restart
	// does (its backends terminated, new connections refused with 57P03),
	// on SQLite by closing the handle.
	outage func()
	// restore ends a PostgreSQL outage; nil on SQLite.
	restore func()
	// outageConns says how many connections the last PostgreSQL outage
	// killed, and how many statements failed on them since; nil on SQLite.
	outageConns func() (killed int, met int32)
	// sqlitePath is the SQLite file ("" on PostgreSQL).
	sqlitePath string
	// dbWords are the words of the database's own errors (user, database,
	// address, schema or file) that no answer may repeat.
	dbWords []string
	count   func(table string) int
	// text runs a query that answers one text value.
	text func(query string) string

	// admin is a key with every scope.
	admin string
	// routes is the server's route table.
	routes []server.Route

	// hooks, when set, are the engine's test hooks of every API request.
	hooks atomic.Pointer[enginetest.Hooks]

	logs    *testlog.Buffer
	mu      sync.Mutex
	secrets []string // keys and tokens no answer and no log line may hold
	seq     atomic.Int64
}

// each runs fn on a fresh server on SQLite and on PostgreSQL, in parallel,
// the test itself in parallel with others.
func each(t *testing.T, o envOptions, fn func(t *testing.T, e *env)) {
	t.Helper()
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			fn(t, newEnv(t, db, o))
		})
	}
}

func newEnv(t *testing.T, db string, o envOptions) *env {
	t.Helper()
	e := &env{
		t: t, db: db, clock: pushtest.NewClock(epoch), logs: &testlog.Buffer{},
		fcm: pushtest.NewProvider(oncepush.TransportFCM), apns: pushtest.NewProvider(oncepush.TransportAPNs),
		web: pushtest.NewProvider(oncepush.TransportWebPush), rus: pushtest.NewProvider(oncepush.TransportRuStore),
	}
	// Registered first, so it runs last: after the server has stopped.
	t.Cleanup(e.checkLogs)
	switch db {
	case "sqlite":
		path := filepath.Join(t.TempDir(), "oncepush.db")
		e.sqlitePath = path
		drv, err := sqlite.Open(t.Context(), path, &sqlite.Options{BusyTimeout: o.sqliteBusyTimeout})
		if err != nil {
			t.Fatalf("open sqlite: %v", err)
		}
		var closed sync.Once
		e.closeDB = func() { closed.Do(func() { _ = drv.Close() }) }
		t.Cleanup(e.closeDB)
		e.outage = e.closeDB
		e.dbWords = []string{filepath.Base(filepath.Dir(path)), "oncepush.db"}
		e.count = countWith(t, func(q string) *sql.Row { return drv.DB().QueryRowContext(context.Background(), q) })
		e.text = textWith(t, func(q string) *sql.Row { return drv.DB().QueryRowContext(context.Background(), q) })
		build(e, drv, drv.ServerStore(), o)
	case "postgres":
		out := outagePool(t, testdb.Schema(t))
		pool := out.pool
		e.closeDB = pool.Close // idempotent
		e.outage, e.restore = out.begin, out.end
		e.outageConns = func() (int, int32) { return out.killed, out.met.Load() }
		cc := pool.Config().ConnConfig
		e.dbWords = []string{cc.User, cc.Database, cc.Host, strconv.Itoa(int(cc.Port)), cc.RuntimeParams["search_path"]}
		e.count = countWith(t, func(q string) pgx.Row { return pool.QueryRow(context.Background(), q) })
		e.text = textWith(t, func(q string) pgx.Row { return pool.QueryRow(context.Background(), q) })
		drv := postgres.New(pool)
		build(e, drv, drv.ServerStore(), o)
	default:
		t.Fatalf("unknown database %q", db)
	}
	return e
}

func countWith[R interface{ Scan(...any) error }](t *testing.T, query func(string) R) func(string) int {
	return func(table string) int {
		t.Helper()
		var n int
		if err := query("SELECT count(*) FROM " + table).Scan(&n); err != nil {
			t.Fatalf("count %s: %v", table, err)
		}
		return n
	}
}

func textWith[R interface{ Scan(...any) error }](t *testing.T, query func(string) R) func(string) string {
	return func(q string) string {
		t.Helper()
		var s *string
		if err := query(q).Scan(&s); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if s == nil {
			return ""
		}
		return *s
	}
}

// build wires the client, the server and the HTTP client on the driver and
// the server's store.
func build[TTx any](e *env, drv driver.Driver[TTx], store serverstore.Store[TTx], o envOptions) {
	t := e.t
	t.Helper()
	if !o.unmigrated {
		if _, err := drv.Migrate(t.Context()); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		if !o.engineOnly {
			if _, err := store.Migrate(t.Context()); err != nil {
				t.Fatalf("migrate the server's schema: %v", err)
			}
		}
	}
	log := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	metrics := server.NewMetrics()
	cfg := &oncepush.Config{
		Providers: []oncepush.Provider{e.fcm, e.apns, e.web, e.rus},
		Observer:  metrics,
		Clock:     e.clock,
		Logger:    log,
	}
	server.Configure(cfg, store)
	if o.config != nil {
		o.config(cfg)
	}
	client, err := oncepush.NewClient(drv, cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	srv, err := server.New(server.Options[TTx]{
		Client: client, Store: store, Metrics: metrics, Logger: log, MaxBodyBytes: o.maxBody, Version: "test", AccessLog: o.accessLog,
		SeparateMetrics: o.separateMetrics, BacklogCountMax: o.backlogMax, MaxBacklogAge: o.maxBacklogAge,
		KeyCacheTTL: o.keyCacheTTL,
	})
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	e.routes = server.RoutesOf(srv)
	api := srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := e.hooks.Load(); h != nil {
			r = r.WithContext(enginetest.WithHooks(r.Context(), h))
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	ops := httptest.NewServer(srv.OperationsHandler())
	t.Cleanup(ops.Close)
	e.opsURL = ops.URL
	e.refreshBacklog = func() {
		t.Helper()
		if err := srv.RefreshBacklog(t.Context()); err != nil {
			t.Fatalf("RefreshBacklog: %v", err)
		}
	}
	e.url = ts.URL
	e.http = &http.Client{Transport: mustSpec(t).Transport(t, ts.Client().Transport, e.checkAnswer)}
	e.store = store.Exec()
	e.drain = func() {
		t.Helper()
		if _, err := client.Drain(context.WithoutCancel(t.Context())); err != nil {
			t.Fatalf("Drain: %v", err)
		}
	}
	e.expand = client.ExpandCampaigns
	e.cleanup = func() *oncepush.CleanupStats {
		t.Helper()
		st, err := client.Cleanup(context.WithoutCancel(t.Context()))
		if err != nil {
			t.Fatalf("Cleanup: %v", err)
		}
		return st
	}
	if !o.unmigrated && !o.engineOnly {
		e.admin = e.key(apikey.ScopeAdmin)
	}
}

// key stores a new API key with the scopes and returns it.
func (e *env) key(scopes ...string) string {
	e.t.Helper()
	k := apikey.Key(e.unknownKey())
	if err := e.store.APIKeyInsert(e.t.Context(), &serverstore.APIKey{ID: k.ID(), Name: "test", Hash: k.Hash(), Scopes: scopes}); err != nil {
		e.t.Fatalf("APIKeyInsert: %v", err)
	}
	return string(k)
}

// unknownKey makes a well-formed API key, stored nowhere, and records it as
// a secret.
func (e *env) unknownKey() string {
	e.t.Helper()
	k, err := apikey.New()
	if err != nil {
		e.t.Fatal(err)
	}
	e.secret(string(k))
	return string(k)
}

// secret records a string that no answer and no log line may contain.
func (e *env) secret(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.secrets = append(e.secrets, s)
}

func (e *env) leaked(b []byte) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.secrets {
		if bytes.Contains(b, []byte(s)) {
			return s
		}
	}
	return ""
}

func (e *env) checkLogs() {
	if s := e.leaked(e.logs.Bytes()); s != "" {
		e.t.Errorf("a secret (%s…) appears in the server's log", s[:min(8, len(s))])
	}
}

// checkAnswer fails the test when an answer holds a key or a device token,
// may be sniffed as another type than it says, or writes <, > or & raw
// into JSON (the checked-in /openapi.json aside, which holds no one's text).
func (e *env) checkAnswer(x *openapitest.Exchange) {
	if s := e.leaked(x.ResponseBody); s != "" {
		e.t.Errorf("%s %s: the answer holds a secret (%s…): %s", x.Method, x.URL.Path, s[:min(8, len(s))], x.ResponseBody)
	}
	if got := x.ResponseHeader.Get("X-Content-Type-Options"); got != "nosniff" {
		e.t.Errorf("%s %s: a %d answer has X-Content-Type-Options %q, want nosniff", x.Method, x.URL.Path, x.Status, got)
	}
	if ct := x.ResponseHeader.Get("Content-Type"); strings.Contains(ct, "json") && x.URL.Path != "/openapi.json" &&
		bytes.ContainsAny(x.ResponseBody, "<>&") {
		e.t.Errorf("%s %s: the JSON answer writes <, > or & raw: %s", x.Method, x.URL.Path, x.ResponseBody)
	}
}

// reply is an answer of the server.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// decode reads the answer's JSON body into v.
func (r *reply) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("answer %d is not the JSON expected: %v\n%s", r.status, err, r.body)
	}
}

// do sends a request with the key (none when empty). body is sent as JSON,
// except a string or []byte, which is sent as it is. header holds pairs of
// header names and values; an empty value removes the header.
func (e *env) do(method, path, key string, body any, header ...string) *reply {
	e.t.Helper()
	r, err := e.request(method, path, key, body, header...)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// doLogged is do, also returning what the server logged meanwhile: the
// cause of an answer that is not the one expected.
func (e *env) doLogged(method, path, key string, body any) (*reply, string) {
	e.t.Helper()
	before := len(e.logs.Bytes())
	r := e.do(method, path, key, body)
	return r, string(e.logs.Bytes()[before:])
}

// request is do for goroutines other than the test's: it returns its error.
func (e *env) request(method, path, key string, body any, header ...string) (*reply, error) {
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = strings.NewReader(b)
		case []byte:
			rd = bytes.NewReader(b)
		default:
			j, err := json.Marshal(b)
			if err != nil {
				return nil, err
			}
			rd = bytes.NewReader(j)
		}
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.url+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	return &reply{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// want fails the test unless the answer has the status.
func (r *reply) want(t *testing.T, status int) *reply {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	return r
}

// problemBody is an RFC 9457 answer.
type problemBody struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Code     string `json:"code"`
	Detail   string `json:"detail"`
	Field    string `json:"field"`
	Instance string `json:"instance"`
}

// wantProblem checks a problem+json answer's status, code and field ("" for none).
func (r *reply) wantProblem(t *testing.T, status int, code, field string) problemBody {
	t.Helper()
	var p problemBody
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("status %d: the body is not a problem: %v\n%s", r.status, err, r.body)
	}
	if r.status != status || p.Status != status || p.Code != code || p.Field != field {
		t.Errorf("got %d %s (field %q), want %d %s (field %q): %s", r.status, p.Code, p.Field, status, code, field, r.body)
	}
	return p
}

// obj is a JSON object to send.
type obj = map[string]any

// send posts a notification and expects 202.
func (e *env) send(key string, body any, header ...string) server.SendAnswer {
	e.t.Helper()
	var a server.SendAnswer
	e.do("POST", "/v1/notifications", key, body, header...).want(e.t, http.StatusAccepted).decode(e.t, &a)
	return a
}

// token makes a device token of the transport's shape, unique in the test,
// and records it as a secret. For webpush it is the subscription JSON.
func (e *env) token(tr oncepush.Transport) string {
	n := e.seq.Add(1)
	var tok string
	switch tr {
	case oncepush.TransportAPNs:
		tok = fmt.Sprintf("%064x", 0xa0000+n)
	case oncepush.TransportWebPush:
		sub := oncepush.WebPushSubscription{
			Endpoint: fmt.Sprintf("https://push.example.net/wpush/v2/sub-%d-%s", n, strings.Repeat("x", 20)),
			P256dh:   append([]byte{4}, bytes.Repeat([]byte{byte(n)}, 64)...),
			Auth:     bytes.Repeat([]byte{byte(n + 1)}, 16),
		}
		tok = string(sub.Token())
		var parts struct {
			Endpoint string `json:"endpoint"`
			Keys     struct{ P256dh, Auth string }
		}
		_ = json.Unmarshal([]byte(tok), &parts)
		e.secret(parts.Endpoint)
		e.secret(parts.Keys.P256dh)
		e.secret(parts.Keys.Auth)
	default:
		tok = fmt.Sprintf("%s-token:%06d-%s", tr, n, strings.Repeat("Q", 24))
	}
	e.secret(tok)
	return tok
}

// register registers a device of the transport, with a new token, for the
// recipient over HTTP.
func (e *env) register(recipient string, tr oncepush.Transport, extra obj) server.DeviceView {
	e.t.Helper()
	body := obj{"transport": string(tr), "token": e.token(tr)}
	maps.Copy(body, extra)
	return e.putDevice(recipient, body)
}

// answerOf sends a request with the admin key, expects 200 and reads the
// answer as a T.
func answerOf[T any](e *env, method, path string, body any) T {
	e.t.Helper()
	var v T
	e.do(method, path, e.admin, body).want(e.t, http.StatusOK).decode(e.t, &v)
	return v
}

// putDevice registers the device the body describes for the recipient.
func (e *env) putDevice(recipient string, body any) server.DeviceView {
	e.t.Helper()
	return answerOf[server.DeviceView](e, "PUT", "/v1/recipients/"+recipient+"/devices", body)
}

// preferences reads the recipient's preferences.
func (e *env) preferences(recipient string) server.Preferences {
	e.t.Helper()
	return answerOf[server.Preferences](e, "GET", "/v1/recipients/"+recipient+"/preferences", nil)
}

// putPreferences replaces the recipient's preferences and returns the answer.
func (e *env) putPreferences(recipient string, body any) server.Preferences {
	e.t.Helper()
	return answerOf[server.Preferences](e, "PUT", "/v1/recipients/"+recipient+"/preferences", body)
}

// deliveryPage reads one page of a deliveries list.
func (e *env) deliveryPage(path string) server.DeliveryPage {
	e.t.Helper()
	return answerOf[server.DeliveryPage](e, "GET", path, nil)
}

// rows counts the ledger's rows per table.
func (e *env) rows() map[string]int {
	e.t.Helper()
	out := map[string]int{}
	for _, tb := range tables {
		out[tb] = e.count(tb)
	}
	return out
}

// unchanged fails the test when a table's row count moved since before.
func (e *env) unchanged(t *testing.T, before map[string]int, what string) {
	t.Helper()
	for tb, n := range e.rows() {
		if n != before[tb] {
			t.Errorf("%s: %s has %d rows, had %d", what, tb, n, before[tb])
		}
	}
}

// submissions counts what every fake provider received.
func (e *env) submissions() int {
	return e.fcm.Count() + e.apns.Count() + e.web.Count() + e.rus.Count()
}

// deliveries reads every page of a deliveries list.
func (e *env) deliveries(path string) []server.DeliveryView {
	e.t.Helper()
	var out []server.DeliveryView
	cursor := ""
	for range 100 {
		p := path
		if cursor != "" {
			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			p += sep + "cursor=" + cursor
		}
		page := e.deliveryPage(p)
		out = append(out, page.Deliveries...)
		if page.NextCursor == nil {
			return out
		}
		cursor = *page.NextCursor
	}
	e.t.Fatalf("%s: more than 100 pages", path)
	return nil
}

// notification reads GET /v1/notifications/{id}.
func (e *env) notification(id int64) server.NotificationView {
	e.t.Helper()
	return answerOf[server.NotificationView](e, "GET", fmt.Sprintf("/v1/notifications/%d", id), nil)
}
