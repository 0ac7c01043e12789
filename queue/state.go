package queue

import (
	"fmt"
	"strings"
)

// State is the lifecycle state of a job. Its string form is the upper-case name used in the database,
// the API and the logs.
type State string

// The six job states of FR-009.
const (
	StatePending      State = "PENDING"
	StateAssigned     State = "ASSIGNED"
	StateRunning      State = "RUNNING"
	StateDone         State = "DONE"
	StateFailed       State = "FAILED"
	StateDeadLettered State = "DEAD_LETTERED"
)

// States returns every job state, in lifecycle order.
func States() []State {
	return []State{StatePending, StateAssigned, StateRunning, StateDone, StateFailed, StateDeadLettered}
}

// ParseState parses a state name in any letter case ("pending", "DEAD_LETTERED", "Dead_Lettered").
// Anything else is an error wrapping ErrInvalidArgument.
func ParseState(s string) (State, error) {
	st := State(strings.ToUpper(strings.TrimSpace(s)))
	if !st.Valid() {
		return "", fmt.Errorf("%w: unknown job state %s", ErrInvalidArgument, Excerpt(s))
	}
	return st, nil
}

// String returns the upper-case state name.
func (s State) String() string { return string(s) }

// Valid reports whether s is one of the six states.
func (s State) Valid() bool {
	switch s {
	case StatePending, StateAssigned, StateRunning, StateDone, StateFailed, StateDeadLettered:
		return true
	}
	return false
}

// Terminal reports whether s is an end state (DONE, DEAD_LETTERED) that no automatic process leaves.
func (s State) Terminal() bool {
	return s == StateDone || s == StateDeadLettered
}

// transitions is THE transition table (see the package documentation): FR-010, plus cancel of an
// assigned job (FR-012) and manual retry of a dead-lettered one (FR-013).
var transitions = map[State][]State{
	StatePending:      {StateAssigned, StateDeadLettered},
	StateAssigned:     {StateRunning, StateFailed, StateDeadLettered},
	StateRunning:      {StateDone, StateFailed},
	StateFailed:       {StatePending, StateDeadLettered},
	StateDeadLettered: {StatePending},
}

// CanTransition reports whether a job may move from one state to another.
func CanTransition(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// CheckTransition returns nil when from→to is legal, and otherwise a *TransitionError that matches
// ErrIllegalTransition with errors.Is.
func CheckTransition(from, to State) error {
	if CanTransition(from, to) {
		return nil
	}
	return &TransitionError{From: from, To: to}
}

// TransitionError reports a refused state change.
type TransitionError struct {
	From, To State
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("illegal job state transition %s -> %s", stateName(e.From), stateName(e.To))
}

// Unwrap makes errors.Is(err, ErrIllegalTransition) hold.
func (e *TransitionError) Unwrap() error { return ErrIllegalTransition }

func stateName(s State) string {
	if s == "" {
		return "<none>"
	}
	return string(s)
}
