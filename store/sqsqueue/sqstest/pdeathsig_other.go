//go:build !linux

package sqstest

import "os/exec"

func setPdeathsig(*exec.Cmd) {}
