//go:build race

package e2e

// raceEnabled is true when the tests run under the race detector; the server binary is then built with
// -race as well.
const raceEnabled = true
