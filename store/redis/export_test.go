package redisstore

// ScriptSHAs returns the SHA1 digests of the scripts, for tests that look into the server's script
// cache.
func ScriptSHAs() []string {
	shas := make([]string, len(allScripts))
	for i, s := range allScripts {
		shas[i] = s.Hash()
	}
	return shas
}
