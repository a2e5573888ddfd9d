//go:build !linux

package netns

import (
	"errors"
	"net"
)

// Listen is Linux only.
func Listen(fd int, addr string) (net.Listener, error) {
	return nil, errors.New("netns: network namespaces are Linux only")
}
