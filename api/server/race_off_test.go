//go:build !race

package apiserver_test

const raceOn = false
