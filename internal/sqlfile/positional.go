package sqlfile

import "strings"

// Positional turns a query with named parameters (@name) into PostgreSQL's
// positional form ($1, $2, …), returning the names in position order (each
// name once, however often it appears). Quoted strings, quoted identifiers and
// comments are left alone. Drivers do this once per query instead of on every
// execution.
func Positional(query string) (string, []string) {
	var out strings.Builder
	var names []string
	index := map[string]int{}
	for i := 0; i < len(query); {
		c := query[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(query) {
				if query[j] == c {
					if j+1 < len(query) && query[j+1] == c { // doubled quote
						j += 2
						continue
					}
					break
				}
				j++
			}
			j = min(j+1, len(query))
			out.WriteString(query[i:j])
			i = j
		case c == '-' && strings.HasPrefix(query[i:], "--"):
			j := strings.IndexByte(query[i:], '\n')
			if j < 0 {
				j = len(query) - i
			}
			out.WriteString(query[i : i+j])
			i += j
		case c == '/' && strings.HasPrefix(query[i:], "/*"):
			j := strings.Index(query[i+2:], "*/")
			end := len(query)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			out.WriteString(query[i:end])
			i = end
		case c == '@' && i+1 < len(query) && isNameStart(query[i+1]):
			j := i + 1
			for j < len(query) && isNamePart(query[j]) {
				j++
			}
			name := query[i+1 : j]
			n, ok := index[name]
			if !ok {
				names = append(names, name)
				n = len(names)
				index[name] = n
			}
			out.WriteByte('$')
			out.WriteString(itoa(n))
			i = j
		default:
			out.WriteByte(c)
			i++
		}
	}
	return out.String(), names
}

func isNameStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isNamePart(c byte) bool  { return isNameStart(c) || c >= '0' && c <= '9' }

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
