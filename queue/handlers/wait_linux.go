package handlers

import (
	"syscall"
	"unsafe"
)

// pPID is waitid's P_PID id type.
const pPID = 1

// waitExited blocks until process pid has exited, leaving it a zombie
// (WNOWAIT): the caller still reaps it with Wait.
func waitExited(pid int) error {
	var info [128]byte // siginfo_t; only the fact of the exit matters
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		switch errno {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		default:
			return errno
		}
	}
}
