package emulator

import (
	"os/exec"
	"syscall"
)

// setPdeathsig kills the emulator when the test process dies without stopping it.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
