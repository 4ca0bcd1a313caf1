// Package blackbox tests the oncepush binary from the outside, as an operator
// runs it: it builds cmd/oncepush, starts 'oncepush fake-providers' and
// 'oncepush serve' (or 'serve --no-workers' and 'work') as processes on SQLite
// and on PostgreSQL, and drives them over HTTP and the command line only —
// the API for the server, the fake's control endpoints (pushtest.ControlPrefix)
// for the providers. The package has no code of its own; see its tests.
package blackbox
