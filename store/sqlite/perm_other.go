//go:build !unix

package sqlite

// checkOwner has no owner or mode bits to check where the system has no unix permissions.
func checkOwner(string, bool) error { return nil }
