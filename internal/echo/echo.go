// Package echo bounds how much of a caller's value an error message or error detail may repeat: at most
// the first MaxBytes bytes (cut at a UTF-8 boundary), so that a long or hostile value never comes back
// whole in a response or a log line.
package echo

import "unicode/utf8"

// MaxBytes is the most of one caller's value an error repeats.
const MaxBytes = 100

// Clip returns s when it is at most MaxBytes long, else its first MaxBytes bytes (fewer when that would
// cut a UTF-8 sequence) followed by "…".
func Clip(s string) string {
	if len(s) <= MaxBytes {
		return s
	}
	cut := MaxBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
