package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/api/console"
	"github.com/jq-dev/jq/config"
)

// consoleServer builds the web console's server on ui.port (api/console), or returns nils when
// ui.enabled is false (roles turns auto into false for every role but all). With true, a port that
// cannot be bound fails the start; with auto (--role=all) it only logs a warning, since the console
// is a convenience there and several all-in-one nodes may share a host. The console calls api, the
// API's own handler, in-process with each user's credential; it is served over TLS, with the API's
// certificate, when the API is.
func (s *Server) consoleServer(api http.Handler, tlsCfg *tls.Config) (*http.Server, net.Listener, error) {
	cfg := s.deps.Config
	if cfg.UI.Enabled == config.UIOff {
		return nil, nil, nil
	}
	c, err := console.New(console.Options{
		API: api, Auth: s.auth, Log: s.log.Named("console"), TracingURL: cfg.UI.TracingURL, Secure: tlsCfg != nil,
	})
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.GRPC.Host, strconv.Itoa(cfg.UI.Port)))
	if err != nil && cfg.UI.Enabled == config.UIAuto {
		s.log.Warn("console not served: its port is taken (set ui.port, or ui.enabled: false)",
			zap.Int("ui_port", cfg.UI.Port), zap.Error(err))
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listen ui: %w", err)
	}
	srv := &http.Server{
		Handler: c, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute, ErrorLog: zap.NewStdLog(s.log.Named("console.http")),
	}
	if tlsCfg != nil {
		srv.TLSConfig = tlsCfg.Clone()
	}
	addr := ln.Addr().String()
	s.uiAddr.Store(&addr)
	s.log.Info("console serving", zap.String("ui_addr", addr))
	return srv, ln, nil
}

// serveConsole serves the console until it is shut down.
func serveConsole(srv *http.Server, ln net.Listener) error {
	var err error
	if srv.TLSConfig != nil {
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ConsoleAddr is the bound console address (valid after Listening; "" when the console is off).
func (s *Server) ConsoleAddr() string { return deref(s.uiAddr.Load()) }
