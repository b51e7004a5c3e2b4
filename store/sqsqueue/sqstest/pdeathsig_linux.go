package sqstest

import (
	"os/exec"
	"syscall"
)

// setPdeathsig kills the emulator when the test process dies without calling Stop.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
