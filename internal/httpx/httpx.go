// Package httpx holds the small pieces every HTTP handler of Waypost shares: a response recorder (the status
// for the request log, whether anything was written, a last word on the header) and the JSON writer of the
// RFC §5.2 envelope.
package httpx

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Recorder wraps a ResponseWriter and records the status written (200 until one is) and whether anything
// was written. It passes Flush through (long polls) and unwraps for http.ResponseController.
type Recorder struct {
	http.ResponseWriter
	// Status is the status written, 200 when none was.
	Status int
	// Wrote reports whether the header went out.
	Wrote bool
	// BeforeHeader, when set, runs once just before the header goes out (to add Connection: close, say).
	BeforeHeader func(h http.Header)
}

// NewRecorder wraps w.
func NewRecorder(w http.ResponseWriter) *Recorder {
	return &Recorder{ResponseWriter: w, Status: http.StatusOK}
}

// WriteHeader records the status and writes the header.
func (r *Recorder) WriteHeader(code int) {
	if !r.Wrote {
		r.Wrote = true
		if r.BeforeHeader != nil {
			r.BeforeHeader(r.Header())
		}
	}
	r.Status = code
	r.ResponseWriter.WriteHeader(code)
}

// Write writes the body, the header first if the handler did not.
func (r *Recorder) Write(b []byte) (int, error) {
	if !r.Wrote {
		r.WriteHeader(http.StatusOK)
	}
	return r.ResponseWriter.Write(b)
}

// Flush lets streamed answers through.
func (r *Recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer.
func (r *Recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// ContentTypeJSON is the Content-Type of a JSON answer.
const ContentTypeJSON = "application/json; charset=utf-8"

// WriteJSON answers status with v as JSON (HTML characters unescaped: message text stays readable).
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", ContentTypeJSON)
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// WriteJSONBytes answers status with b, JSON already encoded as WriteJSON encodes, and its Content-Length.
func WriteJSONBytes(w http.ResponseWriter, status int, b []byte) error {
	h := w.Header()
	h.Set("Content-Type", ContentTypeJSON)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, err := w.Write(b)
	return err
}
