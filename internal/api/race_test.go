//go:build race

package api_test

// raceEnabled gives the tests' requests longer to finish under the race
// detector, which slows the server down several times (see setupRunners).
const raceEnabled = true
