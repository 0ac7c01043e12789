package serverrole

import (
	"time"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/api/auth"
	"github.com/jq-dev/jq/api/console"
	"github.com/jq-dev/jq/config"
	"github.com/jq-dev/jq/internal/hostcheck"
	"github.com/jq-dev/jq/internal/netlimit"
	"github.com/jq-dev/jq/roles/telemetry"
)

// NewConsole binds the web console's listener on ui.port (api/console), beside the API listener
// api, or returns nil when ui.enabled is false (roles turns auto into false for every role but
// all). With true, a port that cannot be bound fails the start; with auto (--role=all) it only logs
// a warning, since the console is a convenience there and several all-in-one nodes may share a
// host. The console calls the API's own handler in-process with each user's credential; it is
// served over TLS, with the API's certificate, when the API is. Its connections are bounded like
// the other side listeners.
func NewConsole(cfg *config.Config, api *Listener, authn *auth.Authenticator, lm *telemetry.Listeners, log *zap.Logger) (*Listener, error) {
	if cfg.UI.Enabled == config.UIOff {
		return nil, nil
	}
	c, err := console.New(console.Options{
		API: api.handler, Auth: authn, Log: log.Named("console"), TracingURL: cfg.UI.TracingURL, Secure: api.tlsCfg != nil,
	})
	if err != nil {
		return nil, err
	}
	ln, err := config.Listen("ui", "ui.port", cfg.GRPC.Host, cfg.UI.Port)
	if err != nil && cfg.UI.Enabled == config.UIAuto {
		log.Warn("console not served: its port is taken (set port_offset to move every port, ui.port for this one, or ui.enabled: false)",
			zap.Int("ui_port", cfg.UI.Port), zap.Error(err))
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ln = lm.Wrap(telemetry.ListenerConsole, ln, netlimit.SideOptions())
	srv := netlimit.SideServer(hostcheck.ForListener(cfg.GRPC.Host, authn == nil, cfg.Server.AllowedHosts).Handler(c), time.Minute)
	srv.ErrorLog = zap.NewStdLog(log.Named("console.http"))
	if api.tlsCfg != nil {
		srv.TLSConfig = api.tlsCfg.Clone()
	}
	l := &Listener{srv: srv, ln: ln, tls: api.tlsCfg != nil, grace: cfg.Server.ShutdownGrace(), log: log}
	log.Info("console serving", zap.String("ui_addr", l.Addr()))
	return l, nil
}
