// Package permanent is the one implementation of the permanent-error
// contract that eval.Permanent and judge.Permanent export: an error with a
// method Permanent() bool that returns true is not worth trying again.
package permanent

import "errors"

// Wrap marks err as permanent; Wrap(nil) is nil.
func Wrap(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() error   { return e.err }
func (e *permanentError) Permanent() bool { return true }

// Is reports whether err, or an error it wraps, says it is permanent.
func Is(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}
