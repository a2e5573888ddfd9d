package kubernetes

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/proctor-evals/proctor/sandbox"
	"github.com/proctor-evals/proctor/sandbox/driver"
)

// Exit codes of the driver's own scripts (commands they run fail with 1
// or 2; sh itself with 126 and 127).
const (
	codeNotExist   = 90
	codeEscape     = 91
	codeNotDir     = 92
	codeLoop       = 93
	codeNotRegular = 94
	codeTooLarge   = 95
	codeNoWork     = 96
	codeArgs       = 97
)

// resolveScript defines r NAME [create], which sets p to the physical
// path of NAME (clean, relative to the workspace $W; "." is its root),
// following symlinks one component at a time as the kernel would, and
// exits codeEscape when the result is outside the workspace (a symlink led
// out; also when what is missing is out there), codeNotExist when a
// component is missing (with create, missing
// components are taken as they are, for mkdir -p), codeLoop after 40
// links. Every path it makes is absolute, so no operand is ever taken for
// an option.
const resolveScript = `
r() {
	W=$(cd -P "$W" 2>/dev/null && pwd) || exit 96
	cur=$W rest=$1 n=0 missing=
	while [ -n "$rest" ]; do
		case $rest in
		*/*) c=${rest%%/*} rest=${rest#*/} ;;
		*) c=$rest rest= ;;
		esac
		case $c in
		'' | .) continue ;;
		..) cur=${cur%/*}; [ -n "$cur" ] || cur=/; continue ;;
		esac
		if [ "$cur" = / ]; then nx=/$c; else nx=$cur/$c; fi
		if [ -z "$missing" ] && [ -L "$nx" ]; then
			n=$((n+1))
			[ $n -le 40 ] || exit 93
			t=$(readlink "$nx"; echo .)
			t=${t%?.}
			case $t in /*) cur=/ t=${t#/} ;; esac
			rest=$t${rest:+/$rest}
		elif [ -z "$missing" ] && [ ! -e "$nx" ]; then
			[ -n "$2" ] || { inside "$cur" || exit 91; exit 90; }
			missing=1 cur=$nx
		else
			cur=$nx
		fi
	done
	inside "$cur" || exit 91
	p=$cur
}
inside() {
	[ "$W" = / ] && return
	case $1 in "$W" | "$W"/*) return 0 ;; esac
	return 1
}
`

// The scripts of the file API; $1 is always the workspace.
const (
	resolveDirScript = `W=$1; r "$2"; [ -d "$p" ] || exit 92; printf '%s' "$p"`

	// The stat line goes to stderr before anything is read: a FIFO or a
	// file over the cap is refused without opening it.
	readScript = `W=$1; r "$2"
st=$(stat -L -c '%f %s' "$p") || exit 90
printf '%s\n' "$st" >&2
[ -f "$p" ] || exit 94
[ "${st#* }" -le "$3" ] || exit 95
exec head -c "$4" "$p"`

	// A FIFO or a device in the way is replaced, not written through.
	writeScript = `W=$1; r "$2" create
[ ! -d "$p" ] || exit 94
[ ! -e "$p" ] || [ -f "$p" ] || rm -f "$p" || exit 1
d=${p%/*}
mkdir -p "${d:-/}" && cat > "$p" && chmod "$3" "$p"`

	// Entries are "MODE SIZE NAME" (stat's raw mode in hex), one a line
	// after an L, or NUL-terminated after a Z when a name holds a newline.
	// A directory too large for one stat call exits 97 unless $3 is set.
	listScript = `W=$1; r "$2"; [ -d "$p" ] || exit 92; cd "$p" || exit 92
nl='
'
slow=$3
for f in * .[!.]* ..?*; do case $f in *"$nl"*) slow=1; break ;; esac; done
if [ -z "$slow" ]; then
	printf L
	stat -c '%f %s %n' -- * .[!.]* ..?* 2>/dev/null
	[ $? -lt 126 ] || exit 97
	exit 0
fi
printf Z
for f in * .[!.]* ..?*; do
	if [ -e "$f" ] || [ -L "$f" ]; then
		s=$(stat -c '%f %s' -- "$f" 2>/dev/null) && printf '%s %s\0' "$s" "$f"
	fi
done
exit 0`
)

// script runs one of the file API's scripts in the pod; its output goes
// to stdout and the first 4 KiB of its stderr are returned.
func (b *box) script(ctx context.Context, body string, args []string, stdin io.Reader, stdout io.Writer) (int, string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.life, cancel)()
	argv := append([]string{"sh", "-c", resolveScript + body, "proctor", b.ws}, args...)
	var stderr bytes.Buffer
	err := b.stream(ctx, argv, stdin, stdout, &limited{&stderr, 4096})
	code, err := exitCode(err)
	if err != nil {
		return code, stderr.String(), b.fault(ctx, err)
	}
	return code, stderr.String(), nil
}

// scriptError turns the exit code of a script into the error it means.
func scriptError(code int, stderr string) error {
	switch code {
	case 0:
		return nil
	case codeNotExist:
		return fs.ErrNotExist
	case codeEscape:
		return sandbox.ErrEscape
	case codeNotDir:
		return fmt.Errorf("%w: not a directory", fs.ErrNotExist)
	case codeLoop:
		return fmt.Errorf("kubernetes: %w", syscall.ELOOP)
	case codeNoWork:
		return fmt.Errorf("kubernetes: the workspace is gone: %w", sandbox.ErrUnavailable)
	}
	return fmt.Errorf("kubernetes: exit %d: %s", code, strings.TrimSpace(stderr))
}

// resolveDir is the physical path of a workspace directory.
func (b *box) resolveDir(ctx context.Context, name string) (string, error) {
	var out bytes.Buffer
	code, stderr, err := b.script(ctx, resolveDirScript, []string{name}, nil, &limited{&out, 1 << 16})
	if err != nil {
		return "", err
	}
	if err := scriptError(code, stderr); err != nil {
		return "", err
	}
	return out.String(), nil
}

// ReadFile implements [driver.Sandbox]: stat says what the file is and
// how large before it is read, so a FIFO, a device or a sparse 100 GB file
// is refused without reading it; head bounds what comes back if it grows
// in between.
func (b *box) ReadFile(ctx context.Context, name string, max int64) ([]byte, error) {
	limit := max
	if max < math.MaxInt64 {
		limit = max + 1
	}
	out := &capBuffer{max: limit}
	code, stderr, err := b.script(ctx, readScript, []string{name, strconv.FormatInt(max, 10), strconv.FormatInt(limit, 10)}, nil, out)
	if err != nil {
		return nil, err
	}
	switch code {
	case codeNotRegular:
		mode, _, err := parseStat(firstLine(stderr))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", sandbox.ErrNotRegular, err)
		}
		return nil, fmt.Errorf("%w: %v", sandbox.ErrNotRegular, mode.Type())
	case codeTooLarge:
		_, size, err := parseStat(firstLine(stderr))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", sandbox.ErrTooLarge, err)
		}
		return nil, fmt.Errorf("%w: %d bytes, over %d", sandbox.ErrTooLarge, size, max)
	}
	if err := scriptError(code, stderr); err != nil {
		return nil, err
	}
	if int64(out.Len()) > max {
		return nil, fmt.Errorf("%w: over %d bytes", sandbox.ErrTooLarge, max)
	}
	return out.Bytes(), nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// capBuffer keeps at most max bytes.
type capBuffer struct {
	bytes.Buffer
	max int64
}

func (c *capBuffer) Write(p []byte) (int, error) {
	room := c.max - int64(c.Len())
	c.Buffer.Write(p[:min(int64(len(p)), max(room, 0))])
	return len(p), nil
}

// WriteFile implements [driver.Sandbox].
func (b *box) WriteFile(ctx context.Context, name string, data []byte, perm fs.FileMode) error {
	code, stderr, err := b.script(ctx, writeScript, []string{name, strconv.FormatUint(uint64(perm.Perm()), 8)}, bytes.NewReader(data), io.Discard)
	if err != nil {
		return err
	}
	if code == codeNotRegular {
		return fmt.Errorf("kubernetes: %w", syscall.EISDIR)
	}
	return scriptError(code, stderr)
}

// ReadDir implements [driver.Sandbox].
func (b *box) ReadDir(ctx context.Context, name string) ([]sandbox.FileInfo, error) {
	var out bytes.Buffer
	code, stderr, err := b.script(ctx, listScript, []string{name}, nil, &out)
	if err == nil && code == codeArgs { // too many entries for one stat
		out.Reset()
		code, stderr, err = b.script(ctx, listScript, []string{name, "slow"}, nil, &out)
	}
	if err != nil {
		return nil, err
	}
	if err := scriptError(code, stderr); err != nil {
		return nil, err
	}
	return parseListing(out.Bytes())
}

// parseStat parses "MODE SIZE" as stat -c '%f %s' prints it (the mode is
// st_mode in hex).
func parseStat(s string) (fs.FileMode, int64, error) {
	m, sz, ok := strings.Cut(s, " ")
	if !ok {
		return 0, 0, fmt.Errorf("kubernetes: stat output %q: want MODE SIZE", s)
	}
	raw, err := strconv.ParseUint(m, 16, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("kubernetes: stat output %q: mode: %w", s, err)
	}
	size, err := strconv.ParseInt(sz, 10, 64)
	if err != nil || size < 0 {
		return 0, 0, fmt.Errorf("kubernetes: stat output %q: size is not a non-negative integer", s)
	}
	return unixMode(uint32(raw)), size, nil
}

// unixMode converts st_mode to an fs.FileMode, as package os does.
func unixMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & syscall.S_IFMT {
	case syscall.S_IFDIR:
		mode |= fs.ModeDir
	case syscall.S_IFLNK:
		mode |= fs.ModeSymlink
	case syscall.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		mode |= fs.ModeSocket
	case syscall.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		mode |= fs.ModeDevice
	case syscall.S_IFREG:
	default:
		mode |= fs.ModeIrregular
	}
	if m&syscall.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// parseListing parses listScript's output. It comes from the sandbox, so
// it is checked: a malformed entry is an error naming it, never a panic.
func parseListing(b []byte) ([]sandbox.FileInfo, error) {
	if len(b) == 0 {
		return nil, errors.New("kubernetes: empty directory listing (no framing byte)")
	}
	var sep byte
	switch b[0] {
	case 'L':
		sep = '\n'
	case 'Z':
		sep = 0
	default:
		return nil, fmt.Errorf("kubernetes: directory listing starts with %q, want L or Z", b[0])
	}
	var out []sandbox.FileInfo
	rest := b[1:]
	for i := 1; len(rest) > 0; i++ {
		j := bytes.IndexByte(rest, sep)
		if j < 0 {
			return nil, fmt.Errorf("kubernetes: directory listing entry %d is not terminated", i)
		}
		entry := string(rest[:j])
		rest = rest[j+1:]
		modeSize, name, ok := cutSecondSpace(entry)
		if !ok || name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
			return nil, fmt.Errorf("kubernetes: directory listing entry %d %q: want MODE SIZE NAME", i, entry)
		}
		mode, size, err := parseStat(modeSize)
		if err != nil {
			return nil, fmt.Errorf("kubernetes: directory listing entry %d: %w", i, err)
		}
		out = append(out, sandbox.FileInfo{Name: name, Size: size, Mode: mode, IsDir: mode.IsDir()})
	}
	return out, nil
}

// cutSecondSpace splits "a b rest" into "a b" and "rest".
func cutSecondSpace(s string) (string, string, bool) {
	i := strings.IndexByte(s, ' ')
	if i < 0 {
		return "", "", false
	}
	j := strings.IndexByte(s[i+1:], ' ')
	if j < 0 {
		return "", "", false
	}
	return s[:i+1+j], s[i+2+j:], true
}

// --- the workspace: populate, snapshot, extract ---

// populate creates the workspace with Template and Files in it. They go
// in one tar stream unless the template holds symlinks: Files are then
// written one by one, so that one leading through a template's link out of
// the workspace is refused (ErrEscape) as WriteFile refuses it.
func (b *box) populate(ctx context.Context) error {
	files := b.spec.Files
	links, err := hasSymlinks(b.spec.Template)
	if err != nil {
		return fmt.Errorf("kubernetes: Template: %w", err)
	}
	if links {
		files = nil
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarWorkspace(pw, b.spec.Template, files)) }()
	err = b.extract(ctx, pr, b.ws)
	pr.CloseWithError(err)
	if err != nil {
		return fmt.Errorf("kubernetes: provision: Template and Files: %w", err)
	}
	if links {
		for _, name := range slices.Sorted(maps.Keys(b.spec.Files)) {
			if err := b.WriteFile(ctx, name, b.spec.Files[name], 0o644); err != nil {
				return fmt.Errorf("kubernetes: Files[%q]: %w", name, err)
			}
		}
	}
	return nil
}

func hasSymlinks(dir string) (bool, error) {
	if dir == "" {
		return false, nil
	}
	found := false
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found, err
}

// extract makes dir and extracts the tar stream r into it. busybox's
// tar skips (before 1.33) or defers symlinks to absolute or climbing
// targets unless EXTRACT_UNSAFE_SYMLINKS is set; the workspace may hold
// such links (the file API refuses to follow them).
func (b *box) extract(ctx context.Context, r io.Reader, dir string) error {
	var stderr bytes.Buffer
	err := b.stream(ctx, []string{"sh", "-c", `mkdir -p "$0" && EXTRACT_UNSAFE_SYMLINKS=1 exec tar xf - -C "$0"`, dir}, r, io.Discard, &limited{&stderr, 4096})
	code, err := exitCode(err)
	if err != nil {
		return b.fault(ctx, err)
	}
	if code != 0 {
		return fmt.Errorf("kubernetes: tar x in %s exited %d: %s: %w", dir, code, strings.TrimSpace(stderr.String()), sandbox.ErrUnavailable)
	}
	return nil
}

// snapshotScript tars, from /, the workspace ($1) and those of the other
// paths that exist.
const snapshotScript = `cd / || exit 1
n=$#
ws=$1
shift
for p; do if [ -e "$p" ] || [ -L "$p" ]; then set -- "$@" "$p"; fi; done
shift $((n-1))
exec tar cf - "$ws" "$@"`

// snapshot writes, as a tar stream from /, the workspace and the paths
// of Options.CarryPaths to w.
func (b *box) snapshot(ctx context.Context, w io.Writer) error {
	var stderr bytes.Buffer
	bw := bufio.NewWriterSize(w, 1<<16)
	argv := []string{"sh", "-c", snapshotScript, "proctor", strings.TrimPrefix(path.Clean(b.ws), "/")}
	for _, p := range b.d.opts.CarryPaths {
		argv = append(argv, strings.TrimPrefix(p, "/"))
	}
	err := b.stream(ctx, argv, nil, bw, &limited{&stderr, 4096})
	code, err := exitCode(err)
	if err != nil {
		return b.fault(ctx, err)
	}
	if code != 0 {
		return fmt.Errorf("kubernetes: tar c of %s exited %d: %s: %w", b.ws, code, strings.TrimSpace(stderr.String()), sandbox.ErrUnavailable)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("kubernetes: snapshot: %w", err)
	}
	return nil
}

// tarWorkspace writes a tar stream of the tree at dir (if any), keeping
// symlinks as links, then of files (with their parent directories).
func tarWorkspace(w io.Writer, dir string, files map[string][]byte) error {
	tw := tar.NewWriter(w)
	now := time.Now()
	dirs := map[string]bool{}
	if dir != "" {
		wrote, err := driver.AddTree(tw, dir, "")
		if err != nil {
			return err
		}
		for _, d := range wrote {
			dirs[d] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		parts := strings.Split(name, "/")
		for i := range parts[:len(parts)-1] {
			d := strings.Join(parts[:i+1], "/")
			if !dirs[d] {
				dirs[d] = true
				if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: now}); err != nil {
					return err
				}
			}
		}
		data := files[name]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: now}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}
