// Package foreground lets a server started in a terminal by a parent
// without job control (make run) take the terminal's foreground for itself,
// so that a Ctrl-C reaches the server alone: it shuts down cleanly and exits
// 0, and its parent reports that status instead of dying of the same SIGINT
// (GNU make re-raises a SIGINT it receives, whatever its recipe returns).
// Started by a shell, a process already leads its foreground group, and
// Take does nothing; without a terminal it does nothing either.
package foreground

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// Take moves this process into a process group of its own and makes it the
// terminal's foreground group, when stdin is a terminal whose foreground
// group is this process's and this process does not lead it. The returned
// function gives the foreground back to the group it came from; call it
// before exiting. Ctrl-Z is ignored meanwhile: a stopped server would leave
// its parent waiting with no shell to resume it.
func Take() (giveBack func()) {
	none := func() {}
	fd := int(os.Stdin.Fd())
	fg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil {
		return none // not a terminal
	}
	own := unix.Getpgrp()
	if fg != own || own == os.Getpid() {
		return none // in the background, or already leading the foreground
	}
	// A process outside the foreground group that sets it is stopped by
	// SIGTTOU unless it ignores it.
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	if unix.Setpgid(0, 0) != nil {
		return none
	}
	if unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, os.Getpid()) != nil {
		_ = unix.Setpgid(0, own)
		return none
	}
	signal.Ignore(syscall.SIGTSTP)
	return func() {
		signal.Ignore(syscall.SIGTTOU)
		defer signal.Reset(syscall.SIGTTOU)
		_ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, own)
	}
}
