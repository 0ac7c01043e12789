//go:build unix

package handlers

import "syscall"

// openNonblock keeps opening a named pipe from waiting for a writer.
const openNonblock = syscall.O_NONBLOCK
