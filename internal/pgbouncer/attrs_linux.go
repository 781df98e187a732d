package pgbouncer

import "syscall"

// childAttrs runs pgbouncer as cred, killed when this process dies.
func childAttrs(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
}
