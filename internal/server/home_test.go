package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/oncepush/oncepush/internal/server"
)

// TestHomePointsTheWay: the server's address, opened by a person, says
// where the console, the API's document and the guides are, with the
// headers of every answer; another method is refused, naming GET, and a
// path under it is still the API's 404.
func TestHomePointsTheWay(t *testing.T) {
	each(t, envOptions{}, func(t *testing.T, e *env) {
		r := e.do("GET", "/", "", nil)
		if r.status != http.StatusOK || r.header.Get("X-Content-Type-Options") != "nosniff" ||
			!strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
			t.Fatalf("GET /: %d %v %s", r.status, r.header, r.body)
		}
		var home struct{ Name, Console, OpenAPI, Docs string }
		r.decode(t, &home)
		if home.Name != "oncepush" || home.Console != "/console/" || home.OpenAPI != "/openapi.json" || home.Docs != server.DocsURL {
			t.Errorf("GET /: %s", r.body)
		}
		// The links lead somewhere (the console is no API path: asked
		// without the document's check).
		if r := e.do("GET", home.OpenAPI, "", nil); r.status != http.StatusOK {
			t.Errorf("GET %s (linked from /): %d", home.OpenAPI, r.status)
		}
		req, err := http.NewRequestWithContext(t.Context(), "GET", e.url+home.Console, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s (linked from /): %d", home.Console, resp.StatusCode)
		}
		if r := e.do("POST", "/", "", nil); r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET" {
			t.Errorf("POST /: %d, Allow %q", r.status, r.header.Get("Allow"))
		}
		if r := e.do("GET", "/nothing-here", "", nil); r.status != http.StatusNotFound {
			t.Errorf("GET /nothing-here: %d", r.status)
		}
	})
}
