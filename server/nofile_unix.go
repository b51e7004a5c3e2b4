//go:build unix

package server

import "syscall"

// raiseNoFile raises the soft descriptor limit (RLIMIT_NOFILE) to the hard one where allowed (the Go
// runtime already does at start on most systems) and returns the soft limit in force (0 when unknown).
func raiseNoFile() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = raised.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			lim = raised
		}
	}
	return uint64(lim.Cur)
}
