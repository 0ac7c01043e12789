//go:build unix && !linux

package handlers

import "errors"

// waitExited is not available here: the group is only killed on
// cancellation, not after a normal exit.
func waitExited(int) error { return errors.ErrUnsupported }
