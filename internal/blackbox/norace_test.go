//go:build !race

package blackbox

const raceEnabled = false
