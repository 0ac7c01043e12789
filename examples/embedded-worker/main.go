// Command embedded-worker is an application that embeds a jq worker: it
// registers its own Go handler ("resize", in resize.go) next to jq's
// built-ins (noop, sleep, and exec, file and http, which stay disabled: set
// handlers.Options' Exec, File.Roots or HTTP.Allow to enable them) on a
// queue.Mux, and runs the executor against a jq server until SIGINT or
// SIGTERM, then stops gracefully: running jobs get the grace period, their
// reports are delivered, the worker deregisters.
//
// Run it next to a server (for example `jq --role=server`; with authentication on, give it a
// worker token in JQ_TOKEN or --token-file):
//
//	go run ./examples/embedded-worker --server-addr localhost:50051 --queues images
//
// and give it work:
//
//	jq --role=admin job submit --queue images --type resize \
//	    --payload '{"src": "/tmp/in.png", "width": 320}'
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/jq-dev/jq/api/rpcclient"
	"github.com/jq-dev/jq/api/workerconn"
	"github.com/jq-dev/jq/queue"
	"github.com/jq-dev/jq/queue/executor"
	"github.com/jq-dev/jq/queue/handlers"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "embedded-worker: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		addr        = flag.String("server-addr", "localhost:50051", "jq server API address (host:port, or an http:// or https:// URL)")
		queues      = flag.String("queues", "default", "comma-separated queues to take jobs from")
		concurrency = flag.Int("concurrency", 4, "most jobs run at once")
		workerID    = flag.String("worker-id", "", "worker id (default <hostname>-<pid>)")
		grace       = flag.Duration("shutdown-grace", 60*time.Second, "how long running jobs may finish on SIGTERM")
		tlsCA       = flag.String("tls-ca", "", "CA certificate that verifies the server (turns on TLS)")
		tlsCert     = flag.String("tls-cert", "", "client certificate for mTLS")
		tlsKey      = flag.String("tls-key", "", "client key for mTLS")
		tokenFile   = flag.String("token-file", "", "file holding the API token (default: the JQ_TOKEN environment variable)")
	)
	flag.Parse()

	log, err := zap.NewProduction()
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()

	token := os.Getenv("JQ_TOKEN") // a server with authentication on needs a worker token
	if *tokenFile != "" {
		if token, err = rpcclient.ReadTokenFile(*tokenFile); err != nil {
			return err
		}
	}
	cl, err := rpcclient.New(rpcclient.Options{Addr: *addr, CAFile: *tlsCA, CertFile: *tlsCert, KeyFile: *tlsKey, Token: token})
	if err != nil {
		return err
	}
	defer cl.Close()

	mux := queue.NewMux()
	handlers.Register(mux, handlers.Options{}) // exec, file and http disabled
	mux.Register(TypeResize, Resize())

	exec, err := executor.New(executor.Options{
		Conn:          workerconn.New(cl),
		Handler:       mux,
		WorkerID:      *workerID,
		Version:       "embedded-worker-example",
		Concurrency:   *concurrency,
		Queues:        strings.Split(*queues, ","),
		Logger:        log,
		ShutdownGrace: *grace,
	})
	if err != nil {
		return err
	}
	log.Info("embedded worker starting", zap.String("server_addr", cl.BaseURL()), zap.Strings("types", mux.Types()))

	// Only main handles signals, so a library never steals SIGTERM: the executor just sees ctx end.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return exec.Run(ctx)
}
