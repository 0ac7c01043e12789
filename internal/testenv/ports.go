package testenv

import (
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// PickPort returns a TCP port that nothing listens on now, on every interface, never the same twice
// in one test binary. It is picked below the kernel's ephemeral range (32768–60999 by default), from
// which ":0" listeners and every outgoing connection (to Postgres, Redis, the servers under test)
// take their ports: a port picked there can be taken by a client socket before the process under
// test binds it. Test binaries running side by side pick at random, so they rarely meet.
func PickPort() (int, error) {
	const lo, hi = 20000, 32000
	for range 10000 {
		port := lo + rand.IntN(hi-lo)
		portsMu.Lock()
		given := portsGiven[port]
		portsMu.Unlock()
		if given {
			continue
		}
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		_ = ln.Close()
		portsMu.Lock()
		fresh := !portsGiven[port]
		portsGiven[port] = true
		portsMu.Unlock()
		if fresh {
			return port, nil
		}
	}
	return 0, errors.New("no free port below the ephemeral range")
}
