package config

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// listenPorts are the keys of every port a jq process listens on, with a pointer to each in c.
func (c *Config) listenPorts() []struct {
	key  string
	port *int
} {
	return []struct {
		key  string
		port *int
	}{
		{"grpc.port", &c.GRPC.Port},
		{"health.port", &c.Health.Port},
		{"metrics.port", &c.Metrics.Port},
		{"ui.port", &c.UI.Port},
		{"worker.health_port", &c.Worker.HealthPort},
		{"worker.metrics_port", &c.Worker.MetricsPort},
		{"producer.metrics_port", &c.Producer.MetricsPort},
	}
}

// applyPortOffset moves every listen port by port_offset; producer.metrics_port 0 (not served)
// stays 0.
func (c *Config) applyPortOffset() {
	if c.PortOffset == 0 {
		return
	}
	for _, lp := range c.listenPorts() {
		if *lp.port != 0 {
			*lp.port += c.PortOffset
		}
	}
}

// ListenError is the error of a listener that could not bind addr for the port setting key (such
// as "health.port"). When the port is taken it says which settings move it: port_offset for every
// port of this process (a second instance on the same host), or key for this one alone.
func ListenError(what, key, addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return &portInUseError{err: err, msg: fmt.Sprintf("listen %s: %s is already in use (another jq on this host?): "+
			"set port_offset (--port-offset, %s) to move every port of this process, or %s (%s) for this one alone",
			what, addr, EnvVar("port_offset"), key, EnvVar(key))}
	}
	return fmt.Errorf("listen %s: %w", what, err)
}

// portInUseError keeps the bind error for errors.Is without repeating its text after the hint.
type portInUseError struct {
	msg string
	err error
}

func (e *portInUseError) Error() string { return e.msg }
func (e *portInUseError) Unwrap() error { return e.err }

// Listen binds host:port for the listener what, whose port is the setting key; errors as ListenError.
func Listen(what, key, host string, port int) (net.Listener, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	// Binding a port does not wait on anything a context could end.
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, ListenError(what, key, addr, err)
	}
	return ln, nil
}
