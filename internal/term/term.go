// Package term answers one question for the command-line parts of jq: is this output a terminal
// (progress bars, colour, a summary of binary bytes instead of the bytes)?
package term

import (
	"io"
	"os"

	"golang.org/x/term"
)

// IsTerminal reports whether w is a terminal: a file whose descriptor the terminal driver answers
// for (golang.org/x/term asks it with an ioctl). Any character device is not one: /dev/null, a
// daemon's output, is not.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && f != nil && term.IsTerminal(int(f.Fd()))
}
