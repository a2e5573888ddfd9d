package main

import (
	"errors"
	"flag"
	"io"
)

// Placeholder until the view command lands (owned by its helper).
var viewCommand = &command{
	name:  "view",
	short: "(not built yet)",
	flags: func(fs *flag.FlagSet) func(args []string, stdout, stderr io.Writer) (int, error) {
		return func([]string, io.Writer, io.Writer) (int, error) { return exitError, errors.New("view: not built yet") }
	},
}
