//go:build !linux

package chaos

import (
	"errors"
	"syscall"
)

var errLinuxOnly = errors.New("chaos: needs Linux (/proc and prctl)")

func becomeSubreaper() error            { return errLinuxOnly }
func children(int) ([]int, error)       { return nil, errLinuxOnly }
func exited(int) bool                   { return true }
func signal(int, syscall.Signal) error  { return errLinuxOnly }
func processesIn(string) ([]int, error) { return nil, errLinuxOnly }
