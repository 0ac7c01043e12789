// Package term answers one question for the command-line parts of jq: is this output a terminal
// (progress bars, colour, a summary of binary bytes instead of the bytes)?
package term

import (
	"io"
	"os"
)

// IsTerminal reports whether w is a terminal (a character device).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
