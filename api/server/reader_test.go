package apiserver_test

import (
	"reflect"
	"regexp"
	"testing"

	"github.com/jq-dev/jq/api/server"
)

// TestReaderHasNoWrites: the handlers' view of the store only reads. Every change of state is an
// engine command; a write method added to Reader fails here.
func TestReaderHasNoWrites(t *testing.T) {
	// ConstraintSet is the constraints in force with their generation, read together.
	reads := regexp.MustCompile(`^(Ping|ConstraintSet|([A-Z][a-z]+)+(Get|List|Read|Stats|Events|Peek|Count[A-Za-z]*|Counts|ListPage|Snapshot|Usage))$`)
	rt := reflect.TypeFor[apiserver.Reader]()
	for i := range rt.NumMethod() {
		if name := rt.Method(i).Name; !reads.MatchString(name) {
			t.Errorf("apiserver.Reader.%s is not a read; changes go through the engine's commands", name)
		}
	}
	if rt.NumMethod() == 0 {
		t.Fatal("no methods seen")
	}
}
