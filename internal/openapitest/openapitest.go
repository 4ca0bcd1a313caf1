// Package openapitest checks real HTTP exchanges against oncepush's OpenAPI 3.1
// document (package api), so that the document cannot drift from the server.
//
// Load compiles every schema the document uses (OpenAPI 3.1 schemas are JSON
// Schema 2020-12) with formats asserted. Check takes one exchange — method,
// concrete path, request, status, response — finds the operation by its path
// template and validates it:
//
//   - the status must be documented for the operation, the Content-Type must be
//     one of that response's media types, the body must match its schema, and
//     its required headers must be present (a response without content must
//     have an empty body);
//   - a request the server accepted (2xx) must itself have been valid: path,
//     query and header parameters, the body against the requestBody schema,
//     and a bearer key for an operation that needs one;
//   - a path the document does not know must answer 404, and a known path
//     asked with a method it does not document must answer 405 with an Allow
//     header naming exactly the documented methods (components/responses
//     NotFound and MethodNotAllowed).
//
// Transport wraps an http.RoundTripper so that every request a test makes is
// checked this way.
package openapitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// docURL is the name the document is compiled under; nothing is fetched from it.
const docURL = "https://oncepush.invalid/openapi.json"

// Spec is a loaded OpenAPI document, ready to check exchanges. It is safe for
// concurrent use.
type Spec struct {
	doc   map[string]any
	paths []*pathItem

	notFound         *response // for paths the document does not know
	methodNotAllowed *response // for methods a known path does not serve

	mu   sync.Mutex
	seen map[string]bool // "METHOD template status" checked without error
}

type pathItem struct {
	template string
	segs     []string // "v1", "{id}", …
	ops      map[string]*operation
}

// Operation describes one documented operation.
type Operation struct {
	Method string // "GET"
	Path   string // the path template, "/v1/notifications/{id}"
	ID     string // operationId
	// Secured reports whether the operation needs an API key.
	Secured bool
	// Scope is the operation's x-oncepush-scope, "" when it has none.
	Scope string
	// RequestBody reports whether the operation takes a request body.
	RequestBody bool
	// Statuses are the documented response status codes, sorted.
	Statuses []int
}

type operation struct {
	Operation
	params    []*param
	body      *requestBody
	responses map[int]*response
}

type param struct {
	name, in string
	required bool
	schema   *jsonschema.Schema
}

type requestBody struct {
	required bool
	media    map[string]*jsonschema.Schema
}

type response struct {
	where   string // for messages: "#/components/responses/NotFound"
	headers map[string]bool
	media   map[string]*jsonschema.Schema // nil schema: any body
}

// Load parses and compiles the document. It fails when the document is not
// JSON, is not OpenAPI 3.1, holds a reference that does not resolve, or a
// schema that is not valid JSON Schema 2020-12.
func Load(doc []byte) (*Spec, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("openapitest: the document is not JSON: %w", err)
	}
	root, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("openapitest: the document is not a JSON object")
	}
	if ver, _ := root["openapi"].(string); !strings.HasPrefix(ver, "3.1.") {
		return nil, fmt.Errorf("openapitest: openapi is %q, want 3.1.x", ver)
	}
	c, err := newCompiler(root)
	if err != nil {
		return nil, err
	}
	l := &loader{root: root, c: c}
	s := &Spec{doc: root, seen: map[string]bool{}}

	secured := len(asSlice(root["security"])) > 0
	paths, _ := root["paths"].(map[string]any)
	if len(paths) == 0 {
		return nil, errors.New("openapitest: the document has no paths")
	}
	for _, tmpl := range sortedKeys(paths) {
		ptr := "/paths/" + escape(tmpl)
		item, err := l.object(ptr)
		if err != nil {
			return nil, err
		}
		pi := &pathItem{template: tmpl, segs: strings.Split(strings.TrimPrefix(tmpl, "/"), "/"), ops: map[string]*operation{}}
		shared := asSlice(item["parameters"])
		for _, m := range []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"} {
			if _, ok := item[m]; !ok {
				continue
			}
			op, err := l.operation(ptr+"/"+m, len(shared), secured)
			if err != nil {
				return nil, err
			}
			op.Method, op.Path = strings.ToUpper(m), tmpl
			pi.ops[op.Method] = op
		}
		s.paths = append(s.paths, pi)
	}
	if s.notFound, err = l.response("/components/responses/NotFound"); err != nil {
		return nil, fmt.Errorf("openapitest: the document must describe components/responses/NotFound: %w", err)
	}
	if s.methodNotAllowed, err = l.response("/components/responses/MethodNotAllowed"); err != nil {
		return nil, fmt.Errorf("openapitest: the document must describe components/responses/MethodNotAllowed: %w", err)
	}
	return s, nil
}

// Operations lists the documented operations by path, then method.
func (s *Spec) Operations() []Operation {
	var out []Operation
	for _, p := range s.paths {
		for _, m := range sortedKeys(p.ops) {
			out = append(out, p.ops[m].Operation)
		}
	}
	return out
}

// Schema compiles the schema at a JSON pointer into the document, for tests
// that validate values of their own ("/components/schemas/Problem").
func (s *Spec) Schema(pointer string) (*jsonschema.Schema, error) {
	c, err := newCompiler(s.doc)
	if err != nil {
		return nil, err
	}
	return c.Compile(docURL + "#" + pointer)
}

// newCompiler compiles schemas of the document as JSON Schema 2020-12, with
// formats (date-time, uri) asserted rather than only annotated.
func newCompiler(doc map[string]any) (*jsonschema.Compiler, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(docURL, doc); err != nil {
		return nil, fmt.Errorf("openapitest: %w", err)
	}
	return c, nil
}

// Document returns the parsed document (numbers are json.Number).
func (s *Spec) Document() map[string]any { return s.doc }

// Exchange is one HTTP request and the answer it got.
type Exchange struct {
	Method string
	// URL is the request's URL; only its path and query are used.
	URL            *url.URL
	RequestHeader  http.Header
	RequestBody    []byte
	Status         int
	ResponseHeader http.Header
	ResponseBody   []byte
}

// Check validates the exchange against the document and returns every
// mismatch found, or nil.
func (s *Spec) Check(x *Exchange) error {
	path := x.URL.EscapedPath()
	item, values := s.match(path)
	if item == nil {
		if err := s.checkResponse(x, s.notFound, http.StatusNotFound); err != nil {
			return fmt.Errorf("%s %s: the document has no such path: %w", x.Method, path, err)
		}
		return nil
	}
	method := x.Method
	if method == "" {
		method = http.MethodGet
	}
	op := item.ops[method]
	if op == nil {
		var errs []error
		if err := s.checkResponse(x, s.methodNotAllowed, http.StatusMethodNotAllowed); err != nil {
			errs = append(errs, err)
		}
		if got, want := splitAllow(x.ResponseHeader.Get("Allow")), sortedKeys(item.ops); x.Status == http.StatusMethodNotAllowed && !slices.Equal(got, want) {
			errs = append(errs, fmt.Errorf("Allow lists %v; the document has %v", got, want))
		}
		if len(errs) > 0 {
			return fmt.Errorf("%s %s: the document has no %s operation on %s: %w", x.Method, path, method, item.template, errors.Join(errs...))
		}
		return nil
	}

	var errs []error
	resp, ok := op.responses[x.Status]
	if !ok {
		errs = append(errs, fmt.Errorf("status %d is not documented (documented: %v)", x.Status, op.Statuses))
	} else if err := s.checkResponse(x, resp, x.Status); err != nil {
		errs = append(errs, err)
	}
	if x.Status >= 200 && x.Status < 300 {
		errs = append(errs, op.checkRequest(x, values)...)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s %s (%s %s): %w", x.Method, path, op.Method, op.Path, errors.Join(errs...))
	}
	s.mu.Lock()
	s.seen[op.Method+" "+op.Path+" "+strconv.Itoa(x.Status)] = true
	s.mu.Unlock()
	return nil
}

// Unexercised lists the documented responses ("GET /v1/notifications/{id} 404")
// that no successful Check has seen yet.
func (s *Spec) Unexercised() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, op := range s.Operations() {
		for _, st := range op.Statuses {
			k := op.Method + " " + op.Path + " " + strconv.Itoa(st)
			if !s.seen[k] {
				out = append(out, k)
			}
		}
	}
	return out
}

// match finds the path item for a concrete, escaped path and the values of its
// parameters. A template with more literal segments wins, as OpenAPI requires.
// A path with a "." or ".." segment matches none: it names a resource only
// once cleaned, and the document describes paths as they are sent.
func (s *Spec) match(escaped string) (*pathItem, map[string]string) {
	segs := strings.Split(strings.TrimPrefix(escaped, "/"), "/")
	if slices.Contains(segs, ".") || slices.Contains(segs, "..") {
		return nil, nil
	}
	var best *pathItem
	var bestValues map[string]string
	bestLiterals := -1
	for _, p := range s.paths {
		if len(p.segs) != len(segs) {
			continue
		}
		values := map[string]string{}
		literals := 0
		ok := true
		for i, ts := range p.segs {
			if name, isParam := strings.CutPrefix(ts, "{"); isParam {
				v, err := url.PathUnescape(segs[i])
				if err != nil || v == "" {
					ok = false
					break
				}
				values[strings.TrimSuffix(name, "}")] = v
				continue
			}
			if ts != segs[i] {
				ok = false
				break
			}
			literals++
		}
		if ok && literals > bestLiterals {
			best, bestValues, bestLiterals = p, values, literals
		}
	}
	return best, bestValues
}

// checkResponse validates the status line's companions: content type, body,
// required headers.
func (s *Spec) checkResponse(x *Exchange, r *response, want int) error {
	if x.Status != want {
		return fmt.Errorf("status %d, want %d", x.Status, want)
	}
	var errs []error
	for h := range r.headers {
		if x.ResponseHeader.Get(h) == "" {
			errs = append(errs, fmt.Errorf("status %d: required header %s is missing (%s)", x.Status, h, r.where))
		}
	}
	if len(r.media) == 0 {
		if len(x.ResponseBody) > 0 {
			errs = append(errs, fmt.Errorf("status %d documents no content, got %d bytes", x.Status, len(x.ResponseBody)))
		}
		return errors.Join(errs...)
	}
	ct := x.ResponseHeader.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		errs = append(errs, fmt.Errorf("status %d: Content-Type %q: %v", x.Status, ct, err))
		return errors.Join(errs...)
	}
	sch, ok := r.media[mt]
	if !ok {
		errs = append(errs, fmt.Errorf("status %d: Content-Type %s is not documented (documented: %v, %s)", x.Status, mt, sortedKeys(r.media), r.where))
		return errors.Join(errs...)
	}
	if sch != nil {
		if err := validateBody(sch, mt, x.ResponseBody); err != nil {
			errs = append(errs, fmt.Errorf("status %d %s body (%s): %w\nbody: %s", x.Status, mt, r.where, err, snippet(x.ResponseBody)))
		}
	}
	return errors.Join(errs...)
}

// checkRequest validates a request the server accepted.
func (op *operation) checkRequest(x *Exchange, pathValues map[string]string) []error {
	var errs []error
	if op.Secured {
		scheme, _, _ := strings.Cut(x.RequestHeader.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			errs = append(errs, errors.New("accepted without a bearer API key, but the operation is secured"))
		}
	}
	query := x.URL.Query()
	for _, p := range op.params {
		var raw string
		var present bool
		switch p.in {
		case "path":
			raw, present = pathValues[p.name]
		case "query":
			if vs, ok := query[p.name]; ok {
				raw, present = vs[0], true
			}
		case "header":
			if vs := x.RequestHeader.Values(p.name); len(vs) > 0 {
				raw, present = vs[0], true
			}
		default:
			continue // cookies: none in this API
		}
		if !present {
			if p.required {
				errs = append(errs, fmt.Errorf("accepted without the required %s parameter %s", p.in, p.name))
			}
			continue
		}
		if err := validateParam(p.schema, raw); err != nil {
			errs = append(errs, fmt.Errorf("accepted with %s parameter %s=%q that the document forbids: %w", p.in, p.name, raw, err))
		}
	}

	body := x.RequestBody
	if op.body == nil {
		if len(body) > 0 {
			errs = append(errs, fmt.Errorf("accepted a %d-byte body, but the operation documents none", len(body)))
		}
		return errs
	}
	if len(body) == 0 {
		if op.body.required {
			errs = append(errs, errors.New("accepted without the required request body"))
		}
		return errs
	}
	ct := x.RequestHeader.Get("Content-Type")
	mt := "application/json" // the server reads a body without Content-Type as JSON
	if ct != "" {
		var err error
		if mt, _, err = mime.ParseMediaType(ct); err != nil {
			return append(errs, fmt.Errorf("request Content-Type %q: %v", ct, err))
		}
	}
	sch, ok := op.body.media[mt]
	if !ok {
		return append(errs, fmt.Errorf("accepted a request body of type %s (documented: %v)", mt, sortedKeys(op.body.media)))
	}
	if sch != nil {
		if err := validateBody(sch, mt, body); err != nil {
			errs = append(errs, fmt.Errorf("accepted a request body the document forbids: %w\nbody: %s", err, snippet(body)))
		}
	}
	return errs
}

func validateBody(sch *jsonschema.Schema, mediaType string, body []byte) error {
	if !isJSON(mediaType) {
		return sch.Validate(string(body))
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return sch.Validate(v)
}

// validateParam validates a parameter's text, or what it denotes when it is
// a JSON scalar: "12" satisfies {"type": "integer"}.
func validateParam(sch *jsonschema.Schema, raw string) error {
	err := sch.Validate(raw)
	if err == nil {
		return nil
	}
	if v, jerr := jsonschema.UnmarshalJSON(strings.NewReader(raw)); jerr == nil {
		switch v.(type) {
		case json.Number, bool:
			return sch.Validate(v)
		}
	}
	return err
}

func isJSON(mediaType string) bool {
	return mediaType == "application/json" || strings.HasSuffix(mediaType, "+json")
}

// Transport returns an http.RoundTripper that sends through base (nil:
// http.DefaultTransport) and checks every exchange with Check, reporting a
// mismatch with t.Errorf. A 500 answer is reported too: the document describes
// it, but no test expects the server to fail. Bodies are read whole and handed
// on unchanged. Each of also is given every exchange as well, HEAD requests
// included: the test's own checks of every answer.
func (s *Spec) Transport(t testing.TB, base http.RoundTripper, also ...func(*Exchange)) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &checkingTransport{t: t, spec: s, base: base, also: also}
}

type checkingTransport struct {
	t    testing.TB
	spec *Spec
	base http.RoundTripper
	also []func(*Exchange)
}

func (ct *checkingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		reqBody = b
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	resp, err := ct.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	respBody, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	x := &Exchange{
		Method: req.Method, URL: req.URL, RequestHeader: req.Header, RequestBody: reqBody,
		Status: resp.StatusCode, ResponseHeader: resp.Header, ResponseBody: respBody,
	}
	for _, check := range ct.also {
		check(x)
	}
	if req.Method == http.MethodHead {
		return resp, nil // answered by the GET handler without a body; nothing to compare
	}
	if err := ct.spec.Check(x); err != nil {
		ct.t.Errorf("OpenAPI: %v", err)
	}
	if resp.StatusCode == http.StatusInternalServerError {
		ct.t.Errorf("OpenAPI: %s %s: the server failed (500): %s", req.Method, req.URL.Path, snippet(respBody))
	}
	return resp, nil
}

// loader resolves the document's references and compiles its schemas.
type loader struct {
	root map[string]any
	c    *jsonschema.Compiler
}

// resolve follows $ref (local references only) from a pointer to the object
// it names, and returns that object's pointer.
func (l *loader) resolve(ptr string) (string, map[string]any, error) {
	for range 10 {
		v, err := lookup(l.root, ptr)
		if err != nil {
			return "", nil, err
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return "", nil, fmt.Errorf("openapitest: #%s is not an object", ptr)
		}
		ref, ok := obj["$ref"].(string)
		if !ok {
			return ptr, obj, nil
		}
		next, ok := strings.CutPrefix(ref, "#")
		if !ok {
			return "", nil, fmt.Errorf("openapitest: #%s: only local references are supported, got %q", ptr, ref)
		}
		ptr = next
	}
	return "", nil, fmt.Errorf("openapitest: #%s: references loop", ptr)
}

func (l *loader) object(ptr string) (map[string]any, error) {
	_, obj, err := l.resolve(ptr)
	return obj, err
}

func (l *loader) schema(ptr string) (*jsonschema.Schema, error) {
	sch, err := l.c.Compile(docURL + "#" + ptr)
	if err != nil {
		return nil, fmt.Errorf("openapitest: schema #%s: %w", ptr, err)
	}
	return sch, nil
}

func (l *loader) operation(ptr string, sharedParams int, securedByDefault bool) (*operation, error) {
	obj, err := l.object(ptr)
	if err != nil {
		return nil, err
	}
	op := &operation{responses: map[int]*response{}}
	op.ID, _ = obj["operationId"].(string)
	op.Scope, _ = obj["x-oncepush-scope"].(string)
	op.Secured = securedByDefault
	if sec, ok := obj["security"]; ok {
		op.Secured = len(asSlice(sec)) > 0
	}
	var paramPtrs []string
	for i := range sharedParams {
		paramPtrs = append(paramPtrs, ptr[:strings.LastIndex(ptr, "/")]+"/parameters/"+strconv.Itoa(i))
	}
	for i := range asSlice(obj["parameters"]) {
		paramPtrs = append(paramPtrs, ptr+"/parameters/"+strconv.Itoa(i))
	}
	for _, pp := range paramPtrs {
		pptr, pobj, err := l.resolve(pp)
		if err != nil {
			return nil, err
		}
		p := &param{}
		p.name, _ = pobj["name"].(string)
		p.in, _ = pobj["in"].(string)
		p.required, _ = pobj["required"].(bool)
		if p.name == "" || p.in == "" {
			return nil, fmt.Errorf("openapitest: parameter #%s needs a name and an in", pptr)
		}
		if p.in == "header" {
			p.name = http.CanonicalHeaderKey(p.name)
		}
		if p.schema, err = l.schema(pptr + "/schema"); err != nil {
			return nil, err
		}
		op.params = append(op.params, p)
	}
	if _, ok := obj["requestBody"]; ok {
		bptr, bobj, err := l.resolve(ptr + "/requestBody")
		if err != nil {
			return nil, err
		}
		op.body = &requestBody{}
		op.RequestBody = true
		op.body.required, _ = bobj["required"].(bool)
		if op.body.media, err = l.media(bptr, bobj); err != nil {
			return nil, err
		}
	}
	responses, _ := obj["responses"].(map[string]any)
	if len(responses) == 0 {
		return nil, fmt.Errorf("openapitest: #%s documents no responses", ptr)
	}
	for _, code := range sortedKeys(responses) {
		st, err := strconv.Atoi(code)
		if err != nil || st < 100 || st > 599 {
			return nil, fmt.Errorf("openapitest: #%s: response %q: only explicit status codes are supported", ptr, code)
		}
		r, err := l.response(ptr + "/responses/" + code)
		if err != nil {
			return nil, err
		}
		op.responses[st] = r
		op.Statuses = append(op.Statuses, st)
	}
	return op, nil
}

func (l *loader) response(ptr string) (*response, error) {
	rptr, robj, err := l.resolve(ptr)
	if err != nil {
		return nil, err
	}
	r := &response{where: "#" + rptr, headers: map[string]bool{}}
	if hs, ok := robj["headers"].(map[string]any); ok {
		for _, name := range sortedKeys(hs) {
			h, err := l.object(rptr + "/headers/" + escape(name))
			if err != nil {
				return nil, err
			}
			if req, _ := h["required"].(bool); req {
				r.headers[http.CanonicalHeaderKey(name)] = true
			}
		}
	}
	if r.media, err = l.media(rptr, robj); err != nil {
		return nil, err
	}
	return r, nil
}

// media compiles the schemas of an object's content map.
func (l *loader) media(ptr string, obj map[string]any) (map[string]*jsonschema.Schema, error) {
	content, _ := obj["content"].(map[string]any)
	out := map[string]*jsonschema.Schema{}
	for _, mt := range sortedKeys(content) {
		m, _ := content[mt].(map[string]any)
		if _, ok := m["schema"]; !ok {
			out[mt] = nil
			continue
		}
		sch, err := l.schema(ptr + "/content/" + escape(mt) + "/schema")
		if err != nil {
			return nil, err
		}
		out[mt] = sch
	}
	return out, nil
}

// lookup follows a JSON pointer ("/paths/~1v1~1devices") into v.
func lookup(v any, ptr string) (any, error) {
	if ptr == "" {
		return v, nil
	}
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch cur := v.(type) {
		case map[string]any:
			next, ok := cur[tok]
			if !ok {
				return nil, fmt.Errorf("openapitest: #%s does not exist (no %q)", ptr, tok)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(cur) {
				return nil, fmt.Errorf("openapitest: #%s does not exist (no index %q)", ptr, tok)
			}
			v = cur[i]
		default:
			return nil, fmt.Errorf("openapitest: #%s does not exist", ptr)
		}
	}
	return v, nil
}

// escape makes a JSON pointer token of a key.
func escape(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func splitAllow(h string) []string {
	var out []string
	for _, m := range strings.Split(h, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, strings.ToUpper(m))
		}
	}
	sort.Strings(out)
	return out
}

func snippet(b []byte) string {
	const limit = 600
	if len(b) > limit {
		return string(b[:limit]) + "…"
	}
	return string(b)
}
