package queue

import (
	"strconv"
	"unicode/utf8"
)

// MaxExcerpt is the most bytes of a client's input that an error message quotes: a refusal names
// what it refused without echoing a 400 KB label back, into logs or onto a terminal.
const MaxExcerpt = 48

// Excerpt quotes s for an error message: Go-quoted (control characters and invalid UTF-8 escaped,
// so the message stays one printable line) and cut to its first MaxExcerpt bytes, marked with "…".
func Excerpt(s string) string {
	cut := s
	if len(cut) > MaxExcerpt {
		n := MaxExcerpt
		for n > 0 && !utf8.RuneStart(cut[n]) {
			n--
		}
		cut = cut[:n]
	}
	q := strconv.Quote(cut)
	// Escapes grow the quoted form up to ten-fold (\U0010ffff); shorten until it fits too.
	for len(q) > MaxExcerpt+2 {
		_, size := utf8.DecodeLastRuneInString(cut)
		cut = cut[:len(cut)-size]
		q = strconv.Quote(cut)
	}
	if len(cut) < len(s) {
		return q + "…"
	}
	return q
}
