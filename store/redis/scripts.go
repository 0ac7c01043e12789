package redis

import (
	_ "embed"

	goredis "github.com/redis/go-redis/v9"
)

// The scripts; each file's header lists its KEYS, ARGV and reply. Script.Run
// sends EVALSHA and falls back to EVAL when the server has lost the script
// (restart, SCRIPT FLUSH, failover to a replica that never loaded it).
var (
	//go:embed ready_push.lua
	readyPushSrc    string
	readyPushScript = goredis.NewScript(readyPushSrc)

	//go:embed claim.lua
	claimSrc    string
	claimScript = goredis.NewScript(claimSrc)

	//go:embed inflight_remove.lua
	inflightRemoveSrc    string
	inflightRemoveScript = goredis.NewScript(inflightRemoveSrc)

	allScripts = []*goredis.Script{readyPushScript, claimScript, inflightRemoveScript}
)
