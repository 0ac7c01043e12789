package sqlite

import "time"

// SetListScanBound replaces the time bound of a job list whose filters no index serves.
func SetListScanBound(s *Store, d time.Duration) { s.listScanBound = d }
