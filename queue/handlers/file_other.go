//go:build !unix

package handlers

// openNonblock: no named pipes to guard against here.
const openNonblock = 0
