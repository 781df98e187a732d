package queen

import (
	"errors"
	"fmt"
)

// Sentinel errors callers branch on. Store and validation errors wrap one of
// them; use errors.Is.
var (
	// ErrInvalid: the request is malformed or breaks a rule; nothing was written.
	ErrInvalid = errors.New("invalid input")
	// ErrNotFound: the queue, partition, message, lease or dead letter does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a lease is invalid or expired, or the request conflicts with
	// the current state (for example an ack of an undelivered message).
	ErrConflict = errors.New("conflict")
	// ErrQueueFull: the push would take the queue beyond its maxSize.
	ErrQueueFull = errors.New("queue full")
	// ErrUnavailable: the database cannot be reached; the request may be retried.
	ErrUnavailable = errors.New("database unavailable")
	// ErrMaintenance: pushes are paused (maintenance mode); retry later.
	ErrMaintenance = errors.New("paused for maintenance")
	// ErrKeyUnavailable: the queue's payloads are encrypted and this server
	// lacks the key (none configured, or not the one that sealed them); an
	// operator must supply it. Nothing was written or delivered.
	ErrKeyUnavailable = errors.New("encryption key unavailable")
)

// FieldError is an ErrInvalid that names the offending field.
type FieldError struct {
	Field   string
	Message string
}

// Error returns "<field>: <message>".
func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Invalid returns a *FieldError for field.
func Invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// KindError carries a message for one of the sentinel errors, so callers get
// a clear message and can still branch with errors.Is.
type KindError struct {
	Kind    error
	Message string
}

// Error returns the message.
func (e *KindError) Error() string { return e.Message }

// Unwrap returns the sentinel.
func (e *KindError) Unwrap() error { return e.Kind }

// Errorf returns a *KindError of kind with a formatted message.
func Errorf(kind error, format string, args ...any) error {
	return &KindError{Kind: kind, Message: fmt.Sprintf(format, args...)}
}
