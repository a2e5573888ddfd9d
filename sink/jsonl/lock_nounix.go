//go:build !unix

package jsonl

import "os"

// noFollow: this platform's open has no O_NOFOLLOW; lock checks the file
// it opened instead (checkLockFile).
const noFollow = 0

func links(os.FileInfo) uint64 { return 1 }
