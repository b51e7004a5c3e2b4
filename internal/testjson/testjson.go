// Package testjson is a test helper: JSON encoding that fails the test instead of returning an error.
package testjson

import (
	"encoding/json"
	"testing"
)

// Marshal returns the JSON encoding of v, failing t if v has none.
func Marshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
