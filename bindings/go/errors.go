package kfuse

import (
	"fmt"

	"github.com/kfuse/kfuse/bindings/go/internal/capi"
)

// Status is the kind of a failure: one per kf_status of the C API.
type Status int

const (
	StatusOK Status = iota
	StatusInvalidArgument
	StatusUnsupported
	StatusShapeMismatch
	StatusDTypeMismatch
	StatusDeviceMismatch
	StatusOutOfMemory
	StatusParse
	StatusNoDevice
	StatusBackend
	StatusVersionMismatch
	StatusInternal
)

// String returns the C name, e.g. "KF_ERR_SHAPE_MISMATCH".
func (s Status) String() string { return capi.Kf_status_name(int64(s)) }

// Error is a failed kfuse call: its status and kfuse's message for that
// very call (read inside the same native call, see kfuse.i).
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%v: %s", e.Status, e.Message) }

// Is makes errors.Is(err, kfuse.ErrShapeMismatch) and the like match any
// error of that status.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Status == e.Status
}

// Sentinels for errors.Is.
var (
	ErrInvalidArgument = &Error{Status: StatusInvalidArgument}
	ErrUnsupported     = &Error{Status: StatusUnsupported}
	ErrShapeMismatch   = &Error{Status: StatusShapeMismatch}
	ErrDTypeMismatch   = &Error{Status: StatusDTypeMismatch}
	ErrDeviceMismatch  = &Error{Status: StatusDeviceMismatch}
	ErrOutOfMemory     = &Error{Status: StatusOutOfMemory}
	ErrParse           = &Error{Status: StatusParse}
	ErrNoDevice        = &Error{Status: StatusNoDevice}
	ErrBackend         = &Error{Status: StatusBackend}
	ErrVersionMismatch = &Error{Status: StatusVersionMismatch}
	ErrInternal        = &Error{Status: StatusInternal}
)

// check turns an error handle of the generated layer (0 = success) into an
// error and frees the handle.
func check(handle int64) error {
	if handle == 0 {
		return nil
	}
	defer capi.Kfgo_error_free(handle)
	return &Error{Status: Status(capi.Kfgo_error_code(handle)), Message: capi.Kfgo_error_message(handle)}
}
