package redisstore

import (
	_ "embed"

	goredis "github.com/redis/go-redis/v9"
)

// The scripts; each file's header lists its KEYS, ARGV and reply. Script.Run
// sends EVALSHA and falls back to EVAL when the server has lost the script
// (restart, SCRIPT FLUSH, failover to a replica that never loaded it).
var (
	//go:embed inflight_add.lua
	inflightAddSrc    string
	inflightAddScript = goredis.NewScript(inflightAddSrc)

	//go:embed inflight_remove.lua
	inflightRemoveSrc    string
	inflightRemoveScript = goredis.NewScript(inflightRemoveSrc)

	allScripts = []*goredis.Script{inflightAddScript, inflightRemoveScript}
)
