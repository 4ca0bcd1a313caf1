// Package api holds the OpenAPI 3.1 document of oncepush's HTTP API. The
// server serves it at /openapi.json, and the server's tests validate real
// requests and responses against it, so it cannot drift from the code.
package api

import _ "embed"

// OpenAPI is the document, as JSON.
//
//go:embed openapi.json
var OpenAPI []byte
