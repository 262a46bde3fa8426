// Package simhttp holds the HTTP answers the emulated products share: an error
// with its status code, written as text the way Nomad's and Consul's agents
// write them, and a JSON answer.
package simhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// CodedError is an error with an HTTP status: Nomad's HTTPCodedError
// (command/agent/http.go) and Consul's CodeWithPayloadError (agent/http.go).
type CodedError struct {
	Code int
	Msg  string
}

func (e *CodedError) Error() string { return e.Msg }

// Code returns a CodedError with status code and a formatted message.
func Code(code int, format string, args ...any) error {
	return &CodedError{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// WriteError writes a text/plain error, as the agents' HTTP wrappers do.
func WriteError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(code)
	fmt.Fprint(w, msg)
}

// WriteErr writes err with its code, or 500 for a plain error (an RPC error).
func WriteErr(w http.ResponseWriter, err error) {
	var ce *CodedError
	if errors.As(err, &ce) {
		WriteError(w, ce.Code, ce.Msg)
		return
	}
	WriteError(w, http.StatusInternalServerError, err.Error())
}

// WriteJSON writes v as JSON with the given status.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
