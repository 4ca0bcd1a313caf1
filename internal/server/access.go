package server

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// The access log (Options.AccessLog): one info line per request, naming the
// matched route pattern, never the raw path, and the key's id, never the key.
// See docs/architecture.md, "Access log".

// accessEntry is what the route's handler adds to its request's line.
type accessEntry struct{ keyID string }

type accessKey struct{}

// accessLogged logs each request h serves once it has been answered.
func (s *Server[TTx]) accessLogged(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		entry := &accessEntry{}
		r = r.WithContext(context.WithValue(r.Context(), accessKey{}, entry))
		rec := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		// The mux sets Pattern on the request it routes; "/" is the
		// catch-all that answers 404.
		route := r.Pattern
		if route == "" || route == "/" {
			route = "unmatched"
		}
		s.log.LogAttrs(r.Context(), slog.LevelInfo, "http request",
			slog.String("method", r.Method), slog.String("route", route), slog.Int("status", rec.code()),
			slog.Duration("duration", time.Since(start)), slog.String("key_id", entry.keyID))
	})
}

// noteKey records the id of the key that authenticated r, for its line.
func noteKey(r *http.Request, id string) {
	if e, ok := r.Context().Value(accessKey{}).(*accessEntry); ok {
		e.keyID = id
	}
}
