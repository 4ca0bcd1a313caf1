package httpsend

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	const tok = "fcm-token:ABCDEF/ghij+klmn"
	const jwt = "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJ0ZWFtIn0.c2lnbmF0dXJl"
	for _, tc := range []struct{ name, in, want string }{
		{"as written", "bad token " + tok + " here", "bad token [redacted] here"},
		{"JSON-escaped slash", `bad token fcm-token:ABCDEF\/ghij+klmn`, "bad token [redacted]"},
		{"URL path-escaped", "/send/fcm-token:ABCDEF%2Fghij+klmn", "/send/[redacted]"},
		{"URL query-escaped", "t=fcm-token%3AABCDEF%2Fghij%2Bklmn", "t=[redacted]"},
		{"a JWT", "authorization: bearer " + jwt, "authorization: bearer [redacted]"},
		{"line breaks", "one\r\ntwo\tthree", "one  two three"},
		{"an ANSI escape", "\x1b[31mred", "\uFFFD[31mred"},
		{"C1 CSI and DEL", "a\u009b2Jb\x7f", "a\uFFFD2Jb\uFFFD"},
		{"bidirectional override", "abc\u202edef\u2066", "abc\uFFFDdef\uFFFD"},
		{"invalid UTF-8", "caf\xe9", "caf\uFFFD"},
		{"ordinary text", "404 UNREGISTERED: Requested entity was not found.", "404 UNREGISTERED: Requested entity was not found."},
		{"upper case", "bad token FCM-TOKEN:ABCDEF/GHIJ+KLMN here", "bad token [redacted] here"},
		{"mixed case, lower-case escape", "/send/Fcm-Token:abcdef%2fGhij+klmn", "/send/[redacted]"},
		{"beside invalid UTF-8 and non-ASCII", "\xe9é fcm-token:abcdef/GHIJ+klmn \xe9", "\uFFFDé [redacted] \uFFFD"},
	} {
		if got := Redact(tc.in, tok, "short"); got != tc.want {
			t.Errorf("%s: Redact(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
	// A secret too short to tell from ordinary words is left alone.
	if got := Redact("a short word", "short"); got != "a short word" {
		t.Errorf("a short secret redacted: %q", got)
	}
}

func TestSnippetIsPrintableAndCutOnACharacter(t *testing.T) {
	t.Parallel()
	s := Snippet([]byte("<h1>\x1b[2J" + strings.Repeat("é", 150) + "</h1>"))
	for _, r := range s {
		if r == 0x1b {
			t.Fatalf("Snippet kept an escape: %q", s)
		}
	}
	if !utf8.ValidString(s) {
		t.Errorf("Snippet cut a character in two: %q", s)
	}
}
