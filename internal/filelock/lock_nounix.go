//go:build !unix

package filelock

import "os"

// noFollow: this platform's open has no O_NOFOLLOW; Lock checks the file
// it opened instead (checkLockFile).
const noFollow = 0

func links(os.FileInfo) uint64 { return 1 }
