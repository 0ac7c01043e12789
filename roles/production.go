package roles

import (
	"net"
	"slices"
	"strings"

	"github.com/jq-dev/jq/config"
)

// localDefaults makes --role=all a local development process when grpc.host is left empty: it is
// reachable from this machine only, and so needs no credentials (auth.enabled auto). grpc.host
// 0.0.0.0 opens it up.
func localDefaults(role Name, cfg *config.Config) {
	if role != All || cfg.GRPC.Host != "" {
		return
	}
	cfg.GRPC.Host = "127.0.0.1"
	if cfg.Worker.BindHost == "" {
		cfg.Worker.BindHost = "127.0.0.1"
	}
	if cfg.Producer.BindHost == "" {
		cfg.Producer.BindHost = "127.0.0.1"
	}
}

// storeDefaults resolves store.driver auto: the embedded store for --role=all when no database is
// configured (every db.* key at its default), Postgres otherwise. The worker, producer and admin
// roles open no store, so theirs stays as written.
func storeDefaults(role Name, cfg *config.Config) {
	if cfg.Store.Driver != config.StoreAuto {
		return
	}
	switch {
	case role == All && cfg.DB == config.Default().DB:
		cfg.Store.Driver = config.StoreSQLite
	case role == All || role == Server:
		cfg.Store.Driver = config.StorePostgres
	}
}

// production reports whether the role runs in production: one of the listeners it opens is on a
// non-loopback address ("" is every interface), or, for a worker, the server it works for is. The admin role opens none. Secrets in the config
// file are refused then (FR-045), and only warned about in local development.
func production(role Name, cfg *config.Config) bool {
	c := *cfg // localDefaults sets strings only: the copy shares nothing it changes
	localDefaults(role, &c)
	var hosts []string
	for _, r := range roleTable {
		if (r.role != role && role != All) || (r.skip != nil && r.skip(role, &c)) {
			continue
		}
		switch r.role {
		case Server:
			hosts = append(hosts, c.GRPC.Host, c.Health.Host) // API and console, health
			if c.Metrics.Enabled {
				hosts = append(hosts, c.Metrics.Host)
			}
		case Worker:
			hosts = append(hosts, c.Worker.BindHost) // health and metrics
			// Its listeners are loopback by default: a worker of a server elsewhere is in
			// production all the same.
			for _, a := range strings.Split(c.Worker.ServerAddr, ",") {
				if h, _, err := net.SplitHostPort(strings.TrimSpace(a)); err == nil {
					hosts = append(hosts, h)
				}
			}
		case Producer:
			// Its metrics listener exists only when it scans, in watch mode, with a port.
			if c.Producer.ScanDir != "" && !c.Producer.Once && c.Producer.MetricsPort != 0 && c.Metrics.Enabled {
				hosts = append(hosts, c.Producer.BindHost)
			}
		}
	}
	return slices.ContainsFunc(hosts, func(h string) bool { return !config.IsLoopback(h) })
}
