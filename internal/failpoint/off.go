//go:build !oncepush_failpoints

package failpoint

// Hit does nothing: failpoints are compiled in only with the build tag
// oncepush_failpoints.
func Hit(string) {}
