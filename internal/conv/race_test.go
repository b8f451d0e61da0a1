//go:build race

package conv_test

// raceEnabled makes the property tests run fewer sequences under the race
// detector, which slows them about tenfold.
const raceEnabled = true
