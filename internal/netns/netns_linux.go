package netns

import (
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// Listen listens on the TCP address addr inside the network namespace
// that fd refers to. A socket belongs to the namespace it was made in,
// whichever thread later accepts on it, so only the listening is done
// there. It needs CAP_SYS_ADMIN.
func Listen(fd int, addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// Never unlocked: this thread leaves the process's namespace, so
		// Go must discard it when the goroutine ends.
		runtime.LockOSThread()
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, err}
			return
		}
		ln, err := net.Listen("tcp", addr)
		ch <- result{ln, err}
	}()
	r := <-ch
	return r.ln, r.err
}
