package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jq-dev/jq/store"
)

// Factory opens the stores the suites run against. A backend's one TestStore passes its own.
type Factory interface {
	// Store returns the store most suites share. It may return the same store to every call (the
	// suites isolate their data by unique queue names and worker ids, never by emptying tables) and
	// closes it itself.
	Store(t testing.TB) store.Store
	// IsolatedStore returns a new store no other test writes to (a database of its own), closed when
	// t ends: for the suites whose statements act on every row of the store (the reaper's, the
	// outbox relay's, retention, constraints) or count all of it (depth, the worker limit).
	IsolatedStore(t testing.TB) store.Store
}

// Lacking is implemented by a Factory whose stores deliberately do not implement some of package
// store's optional interfaces (store.DispatchStore, store.ConstraintStore, …). The suites needing
// one of them are skipped, naming it. Without the declaration they fail: a store that loses a method
// by accident cannot skip a suite, and a declaration the store outgrew fails Exercise too.
type Lacking interface {
	// Lacks returns the interfaces, as reflect.TypeFor[store.ConstraintStore](), say.
	Lacks() []reflect.Type
}

// suite is one entry of the contract: a subtest of Exercise.
type suite struct {
	// name is the subtest's: go test -run 'TestStore/<name>'.
	name string
	// needs lists the interfaces of package store beyond store.Store that the suite uses.
	needs []reflect.Type
	run   func(t *testing.T, f Factory)
}

func iface[I any]() reflect.Type { return reflect.TypeFor[I]() }

var (
	dispatchStore   = iface[store.DispatchStore]()
	recoveryStore   = iface[store.RecoveryStore]()
	operatorStore   = iface[store.OperatorStore]()
	progressStore   = iface[store.ProgressStore]()
	retentionStore  = iface[store.RetentionStore]()
	outboxStore     = iface[store.OutboxStore]()
	eventFeed       = iface[store.EventFeed]()
	scheduleStore   = iface[store.ScheduleStore]()
	adminStore      = iface[store.AdminStore]()
	depthStore      = iface[store.DepthStore]()
	constraintStore = iface[store.ConstraintStore]()
)

// storeSuites is the whole contract, in the order Exercise starts it. Every function of this package
// shaped func(*testing.T, Factory) belongs here (TestExerciseRunsEverySuite).
var storeSuites = []suite{
	{"Ping", nil, pingSuite},
	{"Queue", nil, queueSuite},
	{"JobInsert", nil, jobInsertSuite},
	{"Idempotency", nil, idempotencySuite},
	{"JobQuery", nil, jobQuerySuite},
	{"JobIDPrefix", nil, jobIDPrefixSuite},
	{"JobPages", nil, jobPagesSuite},
	{"JobTransition", nil, jobTransitionSuite},
	{"Worker", nil, workerSuite},
	{"WorkerLimit", nil, workerLimitSuite},
	{"DispatchStore", []reflect.Type{dispatchStore}, dispatchSuite},
	{"RecoveryStore", []reflect.Type{dispatchStore, recoveryStore}, recoverySuite},
	{"OperatorStore", []reflect.Type{dispatchStore, operatorStore, recoveryStore}, operatorSuite},
	{"ProgressStore", []reflect.Type{progressStore}, progressSuite},
	{"ResultStore", []reflect.Type{dispatchStore, operatorStore, retentionStore}, resultSuite},
	{"OutboxStore", []reflect.Type{outboxStore, dispatchStore}, outboxSuite},
	{"RetentionStore", []reflect.Type{outboxStore, retentionStore}, retentionSuite},
	{"EventFeed", []reflect.Type{eventFeed}, eventFeedSuite},
	{"ScheduleStore", []reflect.Type{scheduleStore}, scheduleSuite},
	{"AdminStore", []reflect.Type{adminStore, eventFeed}, adminSuite},
	{"DepthStore", []reflect.Type{depthStore}, depthSuite},
	{"ConstraintStore", []reflect.Type{dispatchStore, recoveryStore, constraintStore}, constraintSuite},
}

// Exercise runs the whole contract of package store against the stores f opens: every suite of
// storeSuites as a parallel subtest named after it. A backend calls it from exactly one test.
func Exercise(t *testing.T, f Factory) {
	t.Helper()
	var lacks []reflect.Type
	if l, ok := f.(Lacking); ok {
		lacks = l.Lacks()
	}
	plan, err := planSuites(storeSuites, reflect.TypeOf(f.Store(t)), lacks)
	if err != nil {
		t.Error(err)
	}
	for _, p := range plan {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			if p.fail != "" {
				t.Fatal(p.fail)
			}
			if p.skip != "" {
				t.Skip(p.skip)
			}
			p.run(t, f)
		})
	}
}

// planned is a suite with what Exercise does with it: run it, skip it or fail it.
type planned struct {
	suite
	skip, fail string
}

// planSuites decides each suite's fate for a store of type typ whose factory declares lacks. The
// error reports declarations that are not true of typ.
func planSuites(suites []suite, typ reflect.Type, lacks []reflect.Type) ([]planned, error) {
	var errs []string
	for _, l := range lacks {
		switch {
		case l == nil || l.Kind() != reflect.Interface:
			errs = append(errs, fmt.Sprintf("storetest: Lacks returned %v, not an interface", l))
		case typ.Implements(l):
			errs = append(errs, fmt.Sprintf("storetest: the factory declares that %v lacks %v, which it implements", typ, l))
		}
	}
	plan := make([]planned, 0, len(suites))
	for _, s := range suites {
		p := planned{suite: s}
		var missing, undeclared []string
		for _, n := range s.needs {
			if typ.Implements(n) {
				continue
			}
			missing = append(missing, n.String())
			if !slices.Contains(lacks, n) {
				undeclared = append(undeclared, n.String())
			}
		}
		switch {
		case len(undeclared) > 0:
			p.fail = fmt.Sprintf("storetest: %v does not implement %s, which suite %s needs; a store that lacks it "+
				"on purpose declares so in its factory (storetest.Lacking)", typ, strings.Join(undeclared, ", "), s.name)
		case len(missing) > 0:
			p.skip = fmt.Sprintf("%v does not implement %s (declared by its factory)", typ, strings.Join(missing, ", "))
		}
		plan = append(plan, p)
	}
	if len(errs) > 0 {
		return plan, errors.New(strings.Join(errs, "; "))
	}
	return plan, nil
}

// sharedStore and isolatedStore are f's constructors in the shape the suites' helpers take.
func sharedStore(f Factory) NewStoreFunc {
	return func(t *testing.T) store.Store { return f.Store(t) }
}

func isolatedStore(f Factory) NewStoreFunc {
	return func(t *testing.T) store.Store { return f.IsolatedStore(t) }
}
