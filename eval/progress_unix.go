//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package eval

import (
	"os"
	"syscall"
	"unsafe"
)

// terminalWidth returns the width of the terminal f is, or 0: the
// TIOCGWINSZ ioctl, from package syscall (no new dependency).
func terminalWidth(f *os.File) int {
	var ws struct{ rows, cols, x, y uint16 }
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), uintptr(syscall.TIOCGWINSZ), uintptr(unsafe.Pointer(&ws))); errno != 0 {
		return 0
	}
	return int(ws.cols)
}
