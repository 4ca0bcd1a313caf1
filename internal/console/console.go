// Package console is oncepush's operator console: static pages, embedded in
// the binary, that read and steer through the public HTTP API with the
// operator's API key, which the browser keeps in sessionStorage and sends
// as a bearer token (docs/architecture.md, "The operator console"). It also
// serves the web client kit (package web) at /web/.
//
// The pages hold no data: every figure they show comes from /v1, answered
// for the key the operator entered, so they are served without a key.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

	"github.com/oncepush/oncepush/web"
)

//go:embed static
var static embed.FS

// Paths the server mounts the handlers at.
const (
	Path    = "/console/"
	WebPath = "/web/"
)

// securityHeaders are set on every answer of the console: no script or style
// but the console's own files (no inline script, so an injected string
// cannot run), no framing, no content sniffing, no referrer.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"X-Frame-Options":        "DENY",
	"Referrer-Policy":        "no-referrer",
	"Cache-Control":          "no-cache",
}

// Handler serves the console under Path.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix(strings.TrimSuffix(Path, "/"), http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		files.ServeHTTP(w, r)
	})
}

// WebKit serves the web client kit under WebPath, to any origin (a site
// imports the modules from here into its own pages and service worker; they
// hold no secret).
func WebKit() http.Handler {
	files := http.StripPrefix(strings.TrimSuffix(WebPath, "/"), http.FileServerFS(web.Files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == WebPath {
			http.NotFound(w, r) // no listing
			return
		}
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
