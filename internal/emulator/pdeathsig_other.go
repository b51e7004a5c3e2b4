//go:build !linux

package emulator

import "os/exec"

func setPdeathsig(*exec.Cmd) {}
