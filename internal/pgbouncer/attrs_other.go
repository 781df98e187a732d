//go:build !linux

package pgbouncer

import "syscall"

func childAttrs(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}
