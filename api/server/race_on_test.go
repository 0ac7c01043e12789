//go:build race

package apiserver_test

// raceOn: the race detector allows 8,128 live goroutines, which caps the streams a test can open.
const raceOn = true
