// Package fold finds a secret in text whatever the case of its ASCII
// letters. It is shared by the engine, which takes device tokens out of
// what providers say before the ledger keeps it, and the providers' HTTP
// layer, which takes every credential out of an answer before anyone reads
// it; it imports nothing of either.
package fold

import "strings"

// Replace replaces every occurrence of old in s by new, ignoring the
// case of ASCII letters. A provider may echo a secret in another case than
// it was sent (APNs reads hexadecimal device tokens in either case; JSON and
// URL escapes have two spellings). Lowering only ASCII keeps every byte in
// its place (strings.ToLower would not, for invalid UTF-8 and for some
// letters), so what is found in the lowered text is cut from s itself.
func Replace(s, old, new string) string {
	if old == "" {
		return s
	}
	ls, lold := LowerASCII(s), LowerASCII(old)
	if !strings.Contains(ls, lold) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(ls, lold)
		if i < 0 {
			break
		}
		b.WriteString(s[:i])
		b.WriteString(new)
		s, ls = s[i+len(old):], ls[i+len(old):]
	}
	b.WriteString(s)
	return b.String()
}

// LowerASCII lowers the ASCII letters of s and leaves every other byte as
// it is, invalid UTF-8 included.
func LowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}
