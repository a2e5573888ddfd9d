package main

import (
	"errors"
	"flag"
	"io"
)

// Placeholder until the merge command lands (owned by its helper).
var mergeCommand = &command{
	name:  "merge",
	short: "(not built yet)",
	flags: func(fs *flag.FlagSet) func(args []string, stdout, stderr io.Writer) (int, error) {
		return func([]string, io.Writer, io.Writer) (int, error) { return exitError, errors.New("merge: not built yet") }
	},
}
