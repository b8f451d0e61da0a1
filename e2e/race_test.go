//go:build race

package e2e

// raceBuild is set when the tests are built with the race detector (go
// test -race): the harness then builds the parley binary with it too, so
// that the servers the tests run report their data races (see
// server.checkRaces).
const raceBuild = true
