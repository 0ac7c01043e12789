package admin

import (
	"time"

	"connectrpc.com/connect"

	jqv1 "github.com/jq-dev/jq/api/gen/jq/v1"
	"github.com/jq-dev/jq/client"
)

// followWatch prints the events of the server's WatchEvents stream (of --queue, or of every queue)
// until ctx ends: the server sends each event once it is recorded, woken by its own transitions.
// It reports false, with nothing printed, when the server has no such RPC (an older jq): the
// caller polls instead. A stream that breaks after it opened is opened again every --interval
// until it succeeds; the events recorded while it was closed are not shown (said on stderr).
func (c *EventsTailCmd) followWatch(re *runEnv, out *eventPrinter) (bool, error) {
	cl, err := re.Client()
	if err != nil {
		return true, err
	}
	for opened, broken := false, false; ; {
		stream, err := cl.API().Jobs.WatchEvents(re.ctx, connect.NewRequest(&jqv1.WatchEventsRequest{Queue: c.Queue}))
		if err == nil {
			for stream.Receive() {
				if !opened || broken {
					where := "every queue"
					if c.Queue != "" {
						where = "queue " + c.Queue
					}
					if !opened {
						out.notice("following the events of %s as %s records them (Ctrl-C to stop)", where, re.globals.ServerAddr)
					} else {
						out.notice("following again; events recorded while the stream was closed are not shown")
					}
					opened, broken = true, false
				}
				for _, e := range stream.Msg().GetEvents() {
					out.print(e)
				}
			}
			err = stream.Err()
			_ = stream.Close()
		}
		err = client.CallError("", err)
		switch {
		case re.ctx.Err() != nil:
			return true, nil //nolint:nilerr // Ctrl-C ends the stream, and the tail with success
		case !opened && connect.CodeOf(err) == connect.CodeUnimplemented:
			return false, nil
		case !opened:
			return true, named(err, "queue", c.Queue)
		case !broken:
			out.notice("the event stream broke, opening it again: %s", errorLine(err, re.globals))
			broken = true
		}
		t := time.NewTimer(c.Interval)
		select {
		case <-re.ctx.Done():
			t.Stop()
			return true, nil
		case <-t.C:
		}
	}
}
