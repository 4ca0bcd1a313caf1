// Package server is oncepush's HTTP API: notifications, devices, preferences,
// campaigns and delivery history over JSON, with bearer API keys (stored
// hashed, with scopes), RFC 9457 problem+json errors with stable codes,
// Prometheus metrics and the OpenAPI document. It is the library behind
// HTTP; see docs/architecture.md.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/api"
	"github.com/oncepush/oncepush/driver/serverstore"
	"github.com/oncepush/oncepush/internal/apikey"
	"github.com/oncepush/oncepush/internal/console"
	"github.com/oncepush/oncepush/internal/wallclock"
)

// MaxBodyBytesDefault bounds request bodies: 10,000 recipients of 100 bytes fit.
const MaxBodyBytesDefault = 2 << 20

// Options configure a Server.
type Options[TTx any] struct {
	// Client is the engine; the server sends, registers and reads the
	// ledger through it, never through the client's driver.
	Client *oncepush.Client[TTx]
	// Store holds the server's own state (API keys, preferences), on the
	// client's database: serverstore.Driver.ServerStore. The client must
	// have been configured with Configure on the same store.
	Store serverstore.Store[TTx]
	// Metrics, when set, is served at /metrics and counts HTTP requests. Its
	// backlog gauges are as fresh as WatchBacklog (or RefreshBacklog) keeps
	// them.
	Metrics *Metrics
	// SeparateMetrics serves /metrics on OperationsHandler only (a listener
	// of its own), not on Handler, where it answers 404.
	SeparateMetrics bool
	// BacklogCountMax is the most due deliveries a backlog read counts; default
	// BacklogCountMaxDefault.
	BacklogCountMax int
	// Logger; default slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body; default MaxBodyBytesDefault.
	MaxBodyBytes int64
	// Version is reported by /healthz.
	Version string
	// KeyCacheTTL is how long an API key lookup is reused (so how long a
	// revoked key may keep working); default KeyCacheTTLDefault, negative
	// disables the cache.
	KeyCacheTTL time.Duration
	// MaxBacklogAge, when positive, refuses sends for now (429 overloaded,
	// with Retry-After) while the oldest due delivery of the lane a send
	// joins (not a campaign's, which waits in its own), as the last backlog
	// read found it, has waited longer than this. Zero: never refused.
	MaxBacklogAge time.Duration
	// AccessLog logs one info line per request Handler serves ("http
	// request": method, route pattern, status, duration, key id).
	AccessLog bool
}

// Server serves the HTTP API.
type Server[TTx any] struct {
	core
	client *oncepush.Client[TTx]
	store  serverstore.Store[TTx]
	mux    *http.ServeMux
	keys   keyCache
	// served is the route table the mux was built from.
	served []route
	// accessLog is Options.AccessLog.
	accessLog bool
	// maxBacklogAge is Options.MaxBacklogAge; backlogAge the oldest due
	// age of the transactional lane — the one a send joins — that the last
	// backlog read found, in nanoseconds.
	maxBacklogAge time.Duration
	backlogAge    atomic.Int64
	// separate and backlogMax are Options.SeparateMetrics and BacklogCountMax.
	separate   bool
	backlogMax int
}

// Backlog reads.
const (
	// BacklogCountMaxDefault caps the due count: on PostgreSQL, counting 2.2M
	// due rows took 0.7-1.3 s, 10,000 took 4 ms.
	BacklogCountMaxDefault = 10000
	// BacklogIntervalDefault is how often a serving process reads the backlog.
	BacklogIntervalDefault = 15 * time.Second
)

// core is what does not depend on the transaction type.
type core struct {
	log     *slog.Logger
	metrics *Metrics
	maxBody int64
	version string
	// down says whether an error means the database cannot be reached (an
	// answer of 503, not 500): the driver's Unavailable when it has one.
	down func(error) bool
}

// unavailability is what a driver offers to tell an unreachable database from
// a failed statement (both built-in drivers do).
type unavailability interface {
	Unavailable(err error) bool
}

// netDown is the guess for a driver without Unavailable: a network error.
func netDown(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr)
}

// New returns a server; Handler serves it.
func New[TTx any](o Options[TTx]) (*Server[TTx], error) {
	if o.Client == nil || o.Store == nil {
		return nil, errors.New("server: Options.Client and Options.Store are required")
	}
	s := &Server[TTx]{client: o.Client, store: o.Store, mux: http.NewServeMux()}
	s.log = o.Logger
	if s.log == nil {
		s.log = slog.Default()
	}
	s.metrics = o.Metrics
	if s.metrics != nil {
		s.metrics.recent.useClock(o.Client.Config().Clock)
	}
	s.maxBody = o.MaxBodyBytes
	if s.maxBody <= 0 {
		s.maxBody = MaxBodyBytesDefault
	}
	s.version = o.Version
	s.separate = o.SeparateMetrics
	s.backlogMax = cmp.Or(o.BacklogCountMax, BacklogCountMaxDefault)
	s.down = netDown
	if u, ok := any(o.Client.Driver()).(unavailability); ok {
		s.down = u.Unavailable
	}
	s.accessLog = o.AccessLog
	s.maxBacklogAge = max(o.MaxBacklogAge, 0)
	s.keys.ttl = o.KeyCacheTTL
	if s.keys.ttl == 0 {
		s.keys.ttl = KeyCacheTTLDefault
	}
	s.routes()
	return s, nil
}

// Handler returns the server's HTTP handler.
func (s *Server[TTx]) Handler() http.Handler {
	h := cleanPathsOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt, param, ok := s.loneSlash(r.Method, r.URL.EscapedPath()); ok {
			var err error
			if rt.scope != "" {
				_, err = s.authorize(r, rt.scope)
			}
			if err == nil {
				err = fieldProblem(CodeInvalidField, param, `cannot be "/" alone over HTTP: the router takes it for the end of the path`)
			}
			writeProblem(w, r, asProblem(err, s.down))
			return
		}
		s.mux.ServeHTTP(w, r)
	}))
	if s.accessLog {
		h = s.accessLogged(h)
	}
	return nosniff(h)
}

// nosniff marks every answer, whoever writes it (a handler, a refusal, the
// mux's 404 and 405, /metrics, the static files), as the type it says it
// is: a browser must not sniff a JSON answer holding someone's text into
// HTML and run it.
func nosniff(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

// loneSlash finds the route whose path parameter a path gives as a slash
// alone, escaped (/v1/recipients/%2F/devices): http.ServeMux takes that
// segment for the path's trailing slash and routes the request nowhere, a
// 404 naming a path the document does describe, so Handler refuses it
// itself (after the route's authentication), naming the parameter. A "/"
// within a longer value is routed.
func (s *Server[TTx]) loneSlash(method, escaped string) (route, string, bool) {
	segs := strings.Split(escaped, "/")
	at := slices.IndexFunc(segs, func(seg string) bool { return strings.EqualFold(seg, "%2F") })
	if at < 0 {
		return route{}, "", false
	}
	for _, rt := range s.served {
		tmpl := strings.Split(rt.path, "/")
		if rt.method != method || len(tmpl) != len(segs) || !strings.HasPrefix(tmpl[at], "{") {
			continue
		}
		same := true
		for i, seg := range tmpl {
			if !strings.HasPrefix(seg, "{") && seg != segs[i] {
				same = false
				break
			}
		}
		if same {
			return rt, strings.Trim(tmpl[at], "{}"), true
		}
	}
	return route{}, "", false
}

// cleanPathsOnly answers 404, as for any path the API does not know, a path
// with an empty, "." or ".." segment ("/v1/recipients//devices",
// "/v1/recipients/../devices"), which http.ServeMux would otherwise answer
// with a redirect to the cleaned path: a 307 that a client follows by
// sending its method and body to another route. It looks at the escaped
// path, as the mux does: "%2F" in a recipient id is no segment.
func cleanPathsOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.EscapedPath()
		clean := path.Clean("/" + p)
		if strings.HasSuffix(p, "/") && clean != "/" {
			clean += "/"
		}
		if p != clean && r.Method != http.MethodConnect {
			writeProblem(w, r, problem(http.StatusNotFound, CodeNotFound, "no API resource at "+r.URL.Path))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// OperationsHandler serves only /metrics, /healthz and /readyz: what a
// worker process (oncepush work) exposes, and the listener of its own that
// SeparateMetrics gives a serving process.
func (s *Server[TTx]) OperationsHandler() http.Handler {
	mux := http.NewServeMux()
	for _, p := range []string{"/healthz", "/readyz"} {
		mux.Handle(p, s.mux)
	}
	if s.metrics != nil {
		mux.Handle("GET /metrics", s.metrics.Handler())
		mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", "GET")
			writeProblem(w, r, problem(http.StatusMethodNotAllowed, CodeMethodNotAllowed, r.Method+" is not served here; allowed: GET"))
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, problem(http.StatusNotFound, CodeNotFound, "this listener serves /metrics, /healthz and /readyz only"))
	})
	return nosniff(cleanPathsOnly(mux))
}

// handlerFunc is an API handler: it writes its answer, or returns an error that
// becomes a problem+json answer.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// route is one operation the server answers: every path it serves is
// registered from its table (routes), so that the table is the whole of the
// API and tests can walk it.
type route struct {
	method, path string
	// scope is what a key needs; "" means no key is asked for.
	scope string
	h     handlerFunc
	// raw, when set, serves the route instead of h, without the API's
	// wrapper: /metrics, whose own requests are not counted.
	raw http.Handler
}

// table lists the server's routes.
func (s *Server[TTx]) table() []route {
	rs := []route{
		{method: "POST", path: "/v1/notifications", scope: apikey.ScopeSend, h: s.postNotification},
		{method: "GET", path: "/v1/notifications", scope: apikey.ScopeRead, h: s.listNotifications},
		{method: "GET", path: "/v1/notifications/{id}", scope: apikey.ScopeRead, h: s.getNotification},
		{method: "GET", path: "/v1/notifications/{id}/deliveries", scope: apikey.ScopeRead, h: s.listNotificationDeliveries},
		{method: "POST", path: "/v1/notifications/{id}/cancel", scope: apikey.ScopeSend, h: s.cancelNotification},
		{method: "GET", path: "/v1/recipients/{recipient}/deliveries", scope: apikey.ScopeRead, h: s.listRecipientDeliveries},
		{method: "PUT", path: "/v1/recipients/{recipient}/devices", scope: apikey.ScopeDevices, h: s.putDevice},
		{method: "GET", path: "/v1/recipients/{recipient}/devices", scope: apikey.ScopeRead, h: s.listDevices},
		{method: "DELETE", path: "/v1/devices", scope: apikey.ScopeDevices, h: s.deleteDevice},
		{method: "POST", path: "/v1/devices/lookup", scope: apikey.ScopeRead, h: s.lookupDevice},
		{method: "GET", path: "/v1/activity", scope: apikey.ScopeRead, h: s.getActivity},
		{method: "POST", path: "/v1/sessions/{session}/revoke", scope: apikey.ScopeDevices, h: s.revokeSession},
		{method: "DELETE", path: "/v1/recipients/{recipient}", scope: apikey.ScopeDevices, h: s.deleteRecipient},
		{method: "GET", path: "/v1/recipients/{recipient}/preferences", scope: apikey.ScopeRead, h: s.getPreferences},
		{method: "PUT", path: "/v1/recipients/{recipient}/preferences", scope: apikey.ScopeDevices, h: s.putPreferences},
		{method: "POST", path: "/v1/campaigns", scope: apikey.ScopeCampaigns, h: s.postCampaign},
		{method: "GET", path: "/v1/campaigns", scope: apikey.ScopeRead, h: s.listCampaigns},
		{method: "GET", path: "/v1/campaigns/{id}", scope: apikey.ScopeRead, h: s.getCampaign},
		{method: "PUT", path: "/v1/campaigns/{id}", scope: apikey.ScopeCampaigns, h: s.putCampaign},
		{method: "PUT", path: "/v1/campaigns/{id}/recipients/{page}", scope: apikey.ScopeCampaigns, h: s.putCampaignRecipients},
		{method: "POST", path: "/v1/campaigns/{id}/schedule", scope: apikey.ScopeCampaigns, h: s.scheduleCampaign},
		{method: "POST", path: "/v1/campaigns/{id}/start", scope: apikey.ScopeCampaigns, h: s.startCampaign},
		{method: "POST", path: "/v1/campaigns/{id}/cancel", scope: apikey.ScopeCampaigns, h: s.cancelCampaign},
		{method: "POST", path: "/v1/campaigns/{id}/resume", scope: apikey.ScopeCampaigns, h: s.resumeCampaign},

		{method: "GET", path: "/", h: s.home},
		{method: "GET", path: "/healthz", h: s.healthz},
		{method: "GET", path: "/readyz", h: s.readyz},
		{method: "GET", path: "/openapi.json", h: func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Content-Type", "application/json")
			_, err := w.Write(api.OpenAPI)
			return err
		}},
	}
	if s.metrics != nil && !s.separate {
		rs = append(rs, route{method: "GET", path: "/metrics", raw: s.metrics.Handler()})
	}
	return rs
}

func (s *Server[TTx]) routes() {
	s.served = s.table()
	allow := map[string][]string{}
	for _, rt := range s.served {
		pattern := rt.method + " " + muxPath(rt.path)
		if rt.raw != nil {
			s.mux.Handle(pattern, rt.raw)
		} else {
			s.handle(pattern, rt.scope, rt.h)
		}
		allow[rt.path] = append(allow[rt.path], rt.method)
	}
	// Paths the API knows, with a method it does not serve: 405 with Allow.
	for path, methods := range allow {
		slices.Sort(methods)
		allowed := strings.Join(methods, ", ")
		s.mux.HandleFunc(muxPath(path), func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allowed)
			writeProblem(w, r, problem(http.StatusMethodNotAllowed, CodeMethodNotAllowed,
				fmt.Sprintf("%s is not served here; allowed: %s", r.Method, allowed)))
		})
	}
	// The console's pages and the web client kit: static files beside the
	// API, not operations of it (the pages call the API like any client).
	s.mux.Handle("GET "+console.Path, console.Handler())
	s.mux.Handle("GET "+strings.TrimSuffix(console.Path, "/"), http.RedirectHandler(console.Path, http.StatusMovedPermanently))
	s.mux.Handle("GET "+console.WebPath, console.WebKit())
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, problem(http.StatusNotFound, CodeNotFound, "no API resource at "+r.URL.Path))
	})
}

// muxPath is a route's path as an http.ServeMux pattern: "/" is the root
// alone ("/{$}"), not every path.
func muxPath(path string) string {
	if path == "/" {
		return "/{$}"
	}
	return path
}

// handle registers an API route: authentication (when scope is set), panics
// turned into 500s, errors into problem+json, metrics and one log line per
// failure.
func (s *Server[TTx]) handle(pattern, scope string, h handlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusWriter{ResponseWriter: w}
		var keyID string
		err := func() (err error) {
			defer func() {
				if v := recover(); v != nil {
					err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
				}
			}()
			if scope != "" {
				id, err := s.authorize(r, scope)
				keyID = id
				noteKey(r, id)
				if err != nil {
					return err
				}
			}
			return h(rec, r)
		}()
		if err != nil {
			p := asProblem(err, s.down)
			if p.Status >= 500 {
				s.log.ErrorContext(r.Context(), "request failed", slog.String("method", r.Method),
					slog.String("route", pattern), slog.String("key", keyID), slog.Any("error", errors.Join(err, p.cause)))
			}
			if !rec.wrote {
				writeProblem(rec, r, p)
			}
		}
		if s.metrics != nil {
			s.metrics.observeHTTP(pattern, rec.code(), time.Since(start))
		}
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// authorize checks the bearer key and its scope; it returns the key's id.
func (s *Server[TTx]) authorize(r *http.Request, scope string) (string, error) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return "", problem(http.StatusUnauthorized, CodeUnauthorized, "send an API key: Authorization: Bearer opk_…")
	}
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", problem(http.StatusUnauthorized, CodeUnauthorized, "the Authorization header must be: Bearer <API key>")
	}
	key, err := apikey.Parse(token)
	if err != nil {
		return "", problem(http.StatusUnauthorized, CodeUnauthorized, "the API key is malformed")
	}
	row, cached := s.keys.get(key.Hash())
	if !cached {
		row, err = s.store.Exec().APIKeyGetByHash(r.Context(), key.Hash())
		switch {
		case errors.Is(err, oncepush.ErrNotFound):
			row = nil
		case err != nil:
			return key.ID(), unavailable(err)
		}
		s.keys.put(key.Hash(), row)
	}
	switch {
	case row == nil:
		return key.ID(), problem(http.StatusUnauthorized, CodeUnauthorized, "unknown API key")
	case row.RevokedAt != nil:
		return key.ID(), problem(http.StatusUnauthorized, CodeUnauthorized, "the API key was revoked")
	case !apikey.Allows(row.Scopes, scope):
		return key.ID(), problem(http.StatusForbidden, CodeForbidden, fmt.Sprintf("the API key lacks the %q scope", scope))
	}
	return key.ID(), nil
}

// unavailable wraps a database failure as a 503.
func unavailable(err error) *Problem {
	p := problem(http.StatusServiceUnavailable, CodeUnavailable, "the database cannot be reached")
	p.cause = err
	return p
}

func (s *Server[TTx]) healthz(w http.ResponseWriter, r *http.Request) error {
	return replyJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": s.version})
}

// readyz: the database answers and is migrated to exactly this build's
// schemas, the engine's and the server's.
// It needs no key, so its answer says which of those failed and nothing of
// the database's own error text (user, database, address); that goes to the
// log.
func (s *Server[TTx]) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	if err := s.checkSchema(ctx); err != nil {
		detail := "the database cannot be reached"
		switch {
		case errors.Is(err, oncepush.ErrSchemaNotCurrent):
			detail = "the database is not migrated to this build's schema: run oncepush migrate"
		case errors.Is(err, oncepush.ErrSchemaTooNew):
			detail = "the database was migrated by a newer oncepush than this one"
		}
		s.log.WarnContext(r.Context(), "not ready", slog.String("reason", detail), slog.Any("error", err))
		writeProblem(w, r, problem(http.StatusServiceUnavailable, CodeUnavailable, detail))
		return nil
	}
	return replyJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// checkSchema is Client.CheckSchema for the engine's migrations, then the
// same for the server's own: both must be this build's.
func (s *Server[TTx]) checkSchema(ctx context.Context) error {
	if err := s.client.CheckSchema(ctx); err != nil {
		return err
	}
	cur, latest, err := s.store.SchemaVersion(ctx)
	switch {
	case err != nil:
		return err
	case cur > latest:
		return fmt.Errorf("%w: server schema at version %d, this build knows %d", oncepush.ErrSchemaTooNew, cur, latest)
	case cur < latest:
		return fmt.Errorf("%w: server schema at version %d, this build needs %d", oncepush.ErrSchemaNotCurrent, cur, latest)
	}
	return nil
}

// RefreshBacklog reads the due backlog once — the count capped at
// BacklogCountMax, and the oldest due delivery's age — into the metrics and
// the backpressure check.
func (s *Server[TTx]) RefreshBacklog(ctx context.Context) error {
	if s.metrics == nil && s.maxBacklogAge == 0 {
		return nil
	}
	b, at, err := s.readBacklog(ctx)
	if err != nil {
		if s.metrics != nil {
			s.metrics.readFail.Inc()
		}
		return fmt.Errorf("read the due backlog: %w", err)
	}
	// A send joins the transactional lane, which the claim empties before
	// it takes from a campaign's: only that lane's wait is one a send would
	// share (D118).
	s.backlogAge.Store(int64(b.Transactional.OldestAge))
	if s.metrics != nil {
		s.metrics.setBacklog(b, s.backlogMax, at)
	}
	return nil
}

// BacklogInterval is how often WatchBacklog should read the backlog: the
// gauges' BacklogIntervalDefault, or with backpressure a tenth of its bound,
// from 1 s, so that a refusal outlasts the overload by little.
func (s *Server[TTx]) BacklogInterval() time.Duration {
	if s.maxBacklogAge == 0 {
		return BacklogIntervalDefault
	}
	return min(max(s.maxBacklogAge/10, time.Second), BacklogIntervalDefault)
}

// overloaded returns a 429 problem when backpressure is on, the oldest due
// delivery of the transactional lane (the one a send joins; a campaign's
// deliveries wait behind it) has waited longer than its bound, and a send
// scheduled at (zero: now) would fall due within the bound; else nil.
func (s *Server[TTx]) overloaded(at time.Time) *Problem {
	age := time.Duration(s.backlogAge.Load())
	if s.maxBacklogAge == 0 || age <= s.maxBacklogAge {
		return nil
	}
	if !at.IsZero() && at.Sub(s.now()) > s.maxBacklogAge {
		return nil
	}
	p := problem(http.StatusTooManyRequests, CodeOverloaded, fmt.Sprintf(
		"the oldest due notification sent outside campaigns has waited %s, longer than this server's bound of %s (http.maxBacklogAge): try again later",
		age.Truncate(time.Second), s.maxBacklogAge))
	p.header = http.Header{"Retry-After": {strconv.Itoa(int((s.BacklogInterval() + time.Second - 1) / time.Second))}}
	return p
}

// now is the client's clock: the injected one, or the process's.
func (s *Server[TTx]) now() time.Time {
	if c := s.client.Config().Clock; c != nil {
		return c.Now()
	}
	return wallclock.Now()
}

// readBacklog reads the due backlog, the count capped at BacklogCountMax,
// and says when: for the metrics (RefreshBacklog) and GET /v1/activity.
func (s *Server[TTx]) readBacklog(ctx context.Context) (oncepush.Backlog, time.Time, error) {
	at := s.now() // when it was read
	b, err := s.client.Backlog(ctx, s.backlogMax)
	return b, at, err
}

// WatchBacklog refreshes the backlog gauges every interval until ctx ends:
// one bounded query per interval per process, however often /metrics is
// scraped. (Call RefreshBacklog first for values from the start.) A failed
// read keeps the last values — their timestamp says how old they are — and
// is logged.
func (s *Server[TTx]) WatchBacklog(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(ctx, every)
		if err := s.RefreshBacklog(rctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "backlog read failed; the backlog gauges keep their last values", slog.Any("error", err))
		}
		cancel()
	}
}
