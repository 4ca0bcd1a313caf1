package server

import (
	"regexp"
	"strings"
	"time"
)

// dateTimeRE is RFC 3339's date-time (§5.6), which the document's
// "date-time" format is: two digits for every field but the year, "T" and
// "Z" in either case. time.Parse takes a one-digit hour, and no lower case.
var dateTimeRE = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:([0-9]{2})(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$`)

// dateTimeProblem is the refusal of a date-time that is not one.
func dateTimeProblem(field string) *Problem {
	return fieldProblem(CodeInvalidField, field, "must be an RFC 3339 date-time such as 2026-01-05T09:00:00Z")
}

// parseDateTime reads the date-time field exactly as the document's format
// describes it. A leap second (23:59:60 in UTC, which RFC 3339 allows and
// Go cannot hold) is the instant after 23:59:59, as POSIX time counts it.
// The zero instant, 0001-01-01T00:00:00Z, is returned as the time it is:
// callers that hand times to the library, where zero means "none", refuse
// it themselves.
func parseDateTime(field, s string) (time.Time, error) {
	m := dateTimeRE.FindStringSubmatchIndex(s)
	if m == nil {
		return time.Time{}, dateTimeProblem(field)
	}
	s = strings.ToUpper(s)
	leap := s[m[2]:m[3]] == "60"
	if leap {
		s = s[:m[2]] + "59" + s[m[3]:]
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, dateTimeProblem(field)
	}
	if leap {
		if u := t.UTC(); u.Hour() != 23 || u.Minute() != 59 {
			return time.Time{}, dateTimeProblem(field)
		}
		t = t.Add(time.Second)
	}
	return t, nil
}
