package hostile

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"unicode"
	"unicode/utf16"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/hms"
)

// hostileWords is what a push service appends to its echo: a terminal
// escape that clears the screen and colours what follows, the same as a C1
// control (CSI), a right-to-left override, and a line break with a forged
// log line after it.
const hostileWords = " \x1b[2J\x1b[31mALERT\x1b[0m \u009b31m \u202eevil\u202c \r\nlevel=ERROR msg=\"forged\" \x00\x7f"

// echo is the whole request as a push service could repeat it in an error:
// its method, path, every header (the credential included) and its body
// (the device token included), then hostileWords.
func echo(r *request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", r.method, r.path)
	names := make([]string, 0, len(r.header))
	for k := range r.header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(r.header[k], ", "))
	}
	b.Write(r.body)
	b.WriteString(hostileWords)
	return b.String()
}

// errorBody is an error answer in the transport's own format, its words
// the echo.
func errorBody(tr provider.Transport, status int, words string) string {
	var v any
	switch tr {
	case provider.TransportFCM, provider.TransportRuStore:
		v = map[string]any{"error": map[string]any{"code": status, "message": words, "status": "INVALID_ARGUMENT"}}
	case provider.TransportAPNs:
		v = map[string]string{"reason": words}
	case hms.Name:
		v = map[string]string{"code": "80100003", "msg": words, "requestId": "hostile-2"}
	default:
		return words // Web Push: text
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// escapedErrorBody is errorBody with every character of words a JSON \u
// escape.
func escapedErrorBody(tr provider.Transport, status, words string) string {
	var b strings.Builder
	for _, u := range utf16.Encode([]rune(words)) {
		fmt.Fprintf(&b, `\u%04x`, u)
	}
	switch tr {
	case provider.TransportFCM, provider.TransportRuStore:
		return `{"error": {"message": "` + b.String() + `", "status": "` + status + `"}}`
	case provider.TransportAPNs:
		return `{"reason": "` + b.String() + `"}`
	case hms.Name:
		code := "80200001" // the JWT refused
		if status == "PERMISSION_DENIED" {
			code = "80300002"
		}
		return `{"code": "` + code + `", "msg": "` + b.String() + `"}`
	}
	return words
}

// TestProviderWordsCarryNoSecretsOrControls: a push service that answers
// with the request it got — the device token, the Authorization header's
// credential, the Web Push endpoint and keys — and with terminal escapes,
// C1 and bidirectional controls and forged log lines, in its JSON error
// document, as plain text, or in an accepted message's id: no secret reaches
// the Result (which the ledger records and the API shows) or the log, and
// the Result's text holds no control character.
func TestProviderWordsCarryNoSecretsOrControls(t *testing.T) {
	t.Parallel()
	type answer struct {
		name string
		fn   func(tr provider.Transport, rw http.ResponseWriter, r *request)
	}
	var answers []answer
	for _, status := range []int{400, 401, 403, 404, 413, 429, 500, 503} {
		answers = append(answers, answer{fmt.Sprintf("%d in the provider's format", status), func(tr provider.Transport, rw http.ResponseWriter, r *request) {
			rw.WriteHeader(status)
			_, _ = rw.Write([]byte(errorBody(tr, status, echo(r))))
		}})
	}
	answers = append(answers,
		answer{"502 as text", func(_ provider.Transport, rw http.ResponseWriter, r *request) {
			rw.Header().Set("Content-Type", "text/html")
			rw.WriteHeader(http.StatusBadGateway)
			_, _ = rw.Write([]byte("<html><body>" + echo(r) + "</body></html>"))
		}},
		answer{"the token escaped in JSON", func(tr provider.Transport, rw http.ResponseWriter, r *request) {
			rw.WriteHeader(http.StatusBadRequest)
			b, _ := json.Marshal(echo(r)) // "/" is not escaped; < > & are
			_, _ = rw.Write([]byte(errorBody(tr, 400, strings.ReplaceAll(string(b), "/", `\/`))))
		}},
		// Every character a \u escape: the raw body holds no secret in any
		// form a JSON encoder writes, the decoded message does, and a 401
		// or 403 is logged.
		answer{"401, the request \\u-escaped", func(tr provider.Transport, rw http.ResponseWriter, r *request) {
			rw.WriteHeader(http.StatusUnauthorized)
			_, _ = rw.Write([]byte(escapedErrorBody(tr, "UNAUTHENTICATED", echo(r))))
		}},
		answer{"403, the request \\u-escaped", func(tr provider.Transport, rw http.ResponseWriter, r *request) {
			rw.WriteHeader(http.StatusForbidden)
			_, _ = rw.Write([]byte(escapedErrorBody(tr, "PERMISSION_DENIED", echo(r))))
		}},
		answer{"400, a message of 60,000 bytes", func(tr provider.Transport, rw http.ResponseWriter, r *request) {
			rw.WriteHeader(http.StatusBadRequest)
			_, _ = rw.Write([]byte(errorBody(tr, 400, strings.Repeat("long ", 12000))))
		}},
		answer{"the path URL-escaped", func(tr provider.Transport, rw http.ResponseWriter, r *request) {
			rw.WriteHeader(http.StatusBadRequest)
			_, _ = rw.Write([]byte(errorBody(tr, 400, url.PathEscape(r.path)+" "+url.QueryEscape(string(r.body)))))
		}},
		answer{"accepted, its id the echo", func(tr provider.Transport, rw http.ResponseWriter, r *request) {
			id := strings.NewReplacer("\n", " ", "\r", " ").Replace(echo(r))
			id = strings.Map(func(c rune) rune {
				if c < 0x20 || c == 0x7f || c > 0x7e { // what a header value can carry
					return ' '
				}
				return c
			}, id)
			switch tr {
			case provider.TransportFCM, provider.TransportRuStore:
				b, _ := json.Marshal(map[string]string{"name": echo(r)})
				_, _ = rw.Write(b)
			case provider.TransportAPNs:
				rw.Header().Set("apns-id", id)
			case provider.TransportWebPush:
				rw.Header().Set("Location", id)
				rw.WriteHeader(http.StatusCreated)
			case hms.Name:
				b, _ := json.Marshal(map[string]string{"code": "80000000", "msg": "Success", "requestId": echo(r)})
				_, _ = rw.Write(b)
			}
		}},
	)
	for _, a := range answers {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.answerWith(a.fn)
			for _, tr := range transports {
				res := w.send(w.submission(tr))
				for what, text := range map[string]string{"text": res.Text, "provider id": res.ProviderID} {
					if len(text) > 1000 {
						t.Errorf("%s: the result's %s is %d bytes", tr, what, len(text))
					}
					if s := w.leaked(text); s != "" {
						t.Errorf("%s: the result's %s holds a secret (%.12s…): %q", tr, what, s, text)
					}
					if c, ok := control(text); ok {
						t.Errorf("%s: the result's %s holds the control character %U: %q", tr, what, c, text)
					}
				}
			}
			w.checkLogs(t)
		})
	}
}

// TestTokenEndpointWordsCarryNoSecrets: FCM's token endpoint repeating the
// signed assertion it was sent, in its error document.
func TestTokenEndpointWordsCarryNoSecrets(t *testing.T) {
	t.Parallel()
	for _, status := range []int{400, 401, 500} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			h := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				_ = r.ParseForm()
				w.mu.Lock()
				w.secrets = append(w.secrets, r.PostForm.Get("assertion"))
				w.mu.Unlock()
				rw.Header().Set("Content-Type", "application/json")
				rw.WriteHeader(status)
				b, _ := json.Marshal(map[string]string{"error": "invalid_grant", "error_description": r.PostForm.Encode() + hostileWords})
				_, _ = rw.Write(b)
			})
			w.token.Store(&h)
			res := w.send(w.submission(provider.TransportFCM))
			if s := w.leaked(res.Text); s != "" {
				t.Errorf("the result holds a secret (%.12s…): %q", s, res.Text)
			}
			if c, ok := control(res.Text); ok {
				t.Errorf("the result holds the control character %U: %q", c, res.Text)
			}
			w.checkLogs(t)
		})
	}
}

// checkLogs fails the test when a log line holds a secret, or a string in
// it holds a control character once decoded (a JSON handler escapes C0
// controls, not C1 or bidirectional ones, and a reader decodes them all).
func (w *world) checkLogs(t testing.TB) {
	t.Helper()
	logs := w.logs.String()
	if s := w.leaked(logs); s != "" {
		t.Errorf("the log holds a secret (%.12s…):\n%s", s, logs)
	}
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Errorf("a log line is not JSON: %v: %s", err, sc.Text())
			continue
		}
		for k, v := range line {
			if s, ok := v.(string); ok {
				if c, bad := control(s); bad {
					t.Errorf("log attribute %s holds the control character %U: %q", k, c, s)
				}
				if w.leaked(s) != "" {
					t.Errorf("log attribute %s holds a secret: %q", k, s)
				}
			}
		}
	}
}

// control reports the first character of s that is a control character
// (C0, DEL, C1), a line or paragraph separator, or a bidirectional
// formatting character.
func control(s string) (rune, bool) {
	for _, c := range s {
		if unicode.IsControl(c) || c == '\u2028' || c == '\u2029' || unicode.Is(unicode.Bidi_Control, c) {
			return c, true
		}
	}
	return 0, false
}
