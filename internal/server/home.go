package server

import (
	"encoding/json"
	"net/http"

	"github.com/oncepush/oncepush/internal/console"
)

// DocsURL is where the guides are read online.
const DocsURL = "https://github.com/oncepush/oncepush/tree/main/docs"

// home answers GET /, the address a person opens first: where the
// console, the API's document and the guides are. It is JSON, not a
// redirect to the console, so that curl and a browser are told the same.
func (s *Server[TTx]) home(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		Console string `json:"console"`
		OpenAPI string `json:"openapi"`
		Docs    string `json:"docs"`
	}{"oncepush", s.version, console.Path, "/openapi.json", DocsURL})
}
