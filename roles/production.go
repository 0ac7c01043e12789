package roles

import (
	"slices"

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

// production reports whether the role runs in production: one of the listeners it opens is on a
// non-loopback address ("" is every interface). The admin role opens none. Secrets in the config
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
			hosts = append(hosts, c.GRPC.Host) // API, health, metrics and console
		case Worker:
			hosts = append(hosts, c.Worker.BindHost) // health and metrics
		case Producer:
			// Its metrics listener exists only when it scans, in watch mode, with a port.
			if c.Producer.ScanDir != "" && !c.Producer.Once && c.Producer.MetricsPort != 0 && c.Metrics.Enabled {
				hosts = append(hosts, c.Producer.BindHost)
			}
		}
	}
	return slices.ContainsFunc(hosts, func(h string) bool { return !config.IsLoopback(h) })
}
