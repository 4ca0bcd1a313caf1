//go:build race

package blackbox

// raceEnabled: the binary under test is built with -race too, so the server's
// own goroutines are checked while the tests drive it.
const raceEnabled = true
