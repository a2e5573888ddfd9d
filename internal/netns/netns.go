// Package netns listens inside another network namespace: a sandbox
// driver serves the model gateway on a sandbox's own loopback this way, a
// namespace where no other address of the host exists.
package netns

import (
	"net"
	"os"
)

// ListenPath is Listen in the network namespace at path
// ("/proc/PID/ns/net").
func ListenPath(path, addr string) (net.Listener, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Listen(int(f.Fd()), addr)
}
