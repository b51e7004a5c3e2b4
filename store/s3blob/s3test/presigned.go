package s3test

import (
	"bytes"
	"net/http"
	"testing"
)

// PresignedRequest returns the request a client makes to a presigned URL: method and url with body and the
// signed headers, except Content-Length, which net/http sets from the body.
func PresignedRequest(t testing.TB, method, url string, headers map[string]string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if k != "Content-Length" {
			req.Header.Set(k, v)
		}
	}
	return req
}
