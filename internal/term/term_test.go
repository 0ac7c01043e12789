package term

import (
	"bytes"
	"os"
	"testing"
)

// /dev/null is a character device, not a terminal: output sent there (a daemon's, a script's)
// gets no colour and no status line.
func TestDevNullIsNotATerminal(t *testing.T) {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Fatal("/dev/null reported as a terminal")
	}
	if IsTerminal(&bytes.Buffer{}) || IsTerminal((*os.File)(nil)) {
		t.Fatal("a buffer or a nil file reported as a terminal")
	}
}
