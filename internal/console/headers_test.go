package console_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// get fetches a path of the test's server without a key.
func get(t *testing.T, e *env, path string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", e.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestConsoleHeaders: every file of the console is served with a CSP that
// allows no inline script and no other origin, no framing and no sniffing;
// the page itself has no inline script or style, so the CSP costs nothing.
func TestConsoleHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, path := range []string{"/console/", "/console/console.js", "/console/console.css"} {
		resp, _ := get(t, e, path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
			continue
		}
		h := resp.Header
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("GET %s: CSP %q allows inline or eval'd script", path, csp)
		}
		for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
			if got := h.Get(k); got != want {
				t.Errorf("GET %s: %s %q, want %q", path, k, got, want)
			}
		}
	}
	if resp, _ := get(t, e, "/console/console.js"); !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
		t.Errorf("console.js is served as %q", resp.Header.Get("Content-Type"))
	}
	_, page := get(t, e, "/console/")
	if scripts := regexp.MustCompile(`<script[^>]*>`).FindAllString(page, -1); len(scripts) != 1 || !strings.Contains(scripts[0], `src="console.js"`) {
		t.Errorf("the page's scripts: %q; want only <script src=\"console.js\">", scripts)
	}
	if regexp.MustCompile(`(?i)<style|\sstyle=|\son[a-z]+=`).MatchString(page) {
		t.Error("the page has inline style or an inline event handler, which the CSP refuses")
	}
	if resp, _ := get(t, e, "/console"); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/console/" {
		t.Errorf("GET /console: %d to %q, want a redirect to /console/", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestWebKitIsServed: the kit's modules at a stable path, importable from
// any origin, as JavaScript; no listing of the directory.
func TestWebKitIsServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, path := range []string{"/web/oncepush-sw.js", "/web/oncepush-page.js", "/web/sw.js"} {
		resp, body := get(t, e, path)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") ||
			resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %d, %v", path, resp.StatusCode, resp.Header)
		}
		if !strings.Contains(body, "export") && !strings.Contains(body, "import") {
			t.Errorf("GET %s is not a module: %.80s", path, body)
		}
	}
	if resp, _ := get(t, e, "/web/"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /web/: %d, want 404 (no listing)", resp.StatusCode)
	}
}
