// Command probe is what the conformance suite runs inside a sandbox instead
// of host tools (nc, truncate, mkfifo, yes), so that the suite needs only Go.
// sandboxtest builds it from this file, embedded, with CGO_ENABLED=0: a
// static binary that also runs in a scratch container.
//
//	probe yes [N]              write "y\n" to stdout forever, or N bytes
//	probe yes-err N            write N bytes to stderr
//	probe dial NETWORK ADDR [SEND]  connect (tcp or unix), send SEND, copy what comes back
//	probe sparse NAME SIZE     make a sparse file of SIZE bytes
//	probe mkfifo NAME          make a FIFO
//	probe fill NAME N          write N bytes to NAME
//	probe spawn PIDFILE        start a child that sleeps, write its pid, sleep
package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("no command")
	}
	switch args[0] {
	case "yes", "yes-err":
		w := os.Stdout
		if args[0] == "yes-err" {
			w = os.Stderr
		}
		n := int64(-1)
		if len(args) > 1 {
			v, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil {
				return err
			}
			n = v
		}
		buf := bytes.Repeat([]byte("y\n"), 32<<10)
		for n != 0 {
			b := buf
			if n > 0 && int64(len(b)) > n {
				b = b[:n]
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
			if n > 0 {
				n -= int64(len(b))
			}
		}
		return nil
	case "dial":
		if len(args) != 3 && len(args) != 4 {
			return fmt.Errorf("dial NETWORK ADDR [SEND]")
		}
		c, err := net.DialTimeout(args[1], args[2], 3*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		if len(args) == 4 {
			if _, err := io.WriteString(c, args[3]); err != nil {
				return err
			}
		}
		_, err = io.Copy(os.Stdout, c)
		return err
	case "sparse":
		if len(args) != 3 {
			return fmt.Errorf("sparse NAME SIZE")
		}
		size, err := strconv.ParseInt(args[2], 10, 64)
		if err != nil {
			return err
		}
		f, err := os.Create(args[1])
		if err != nil {
			return err
		}
		if err := f.Truncate(size); err != nil {
			return err
		}
		return f.Close()
	case "fill":
		if len(args) != 3 {
			return fmt.Errorf("fill NAME N")
		}
		n, err := strconv.ParseInt(args[2], 10, 64)
		if err != nil {
			return err
		}
		f, err := os.Create(args[1])
		if err != nil {
			return err
		}
		buf := make([]byte, 1<<20)
		for n > 0 {
			k, err := f.Write(buf[:min(n, int64(len(buf)))])
			if err != nil {
				return err
			}
			n -= int64(k)
		}
		return f.Close()
	case "mkfifo":
		if len(args) != 2 {
			return fmt.Errorf("mkfifo NAME")
		}
		return syscall.Mkfifo(args[1], 0o644)
	case "spawn":
		if len(args) != 2 {
			return fmt.Errorf("spawn PIDFILE")
		}
		self, err := os.Executable()
		if err != nil {
			return err
		}
		c := exec.Command(self, "sleep")
		if err := c.Start(); err != nil {
			return err
		}
		if err := os.WriteFile(args[1], []byte(strconv.Itoa(c.Process.Pid)), 0o644); err != nil {
			return err
		}
		time.Sleep(time.Hour)
		return nil
	case "sleep":
		time.Sleep(time.Hour)
		return nil
	}
	return fmt.Errorf("unknown command %q", args[0])
}
