// Package storetest is the executable contract of package store: every behaviour a caller may rely
// on — results, errors, atomicity, races — is checked here rather than in a backend's own tests.
//
// A backend runs the whole contract through one test and one entry point, as River's drivers do
// through riverdrivertest.Exercise:
//
//	func TestStore(t *testing.T) {
//		t.Parallel()
//		storetest.Exercise(t, factory{})
//	}
//
// Exercise runs every suite as a subtest named after it (Queue, JobInsert, DispatchStore,
// RecoveryStore, …; the list is the table in exercise.go), in parallel. The suites are not exported,
// so a backend cannot choose among them: a new suite runs against every backend the day it is added.
// A suite that needs an optional interface of package store (store.DispatchStore,
// store.ConstraintStore, …) runs when the factory's store implements it; a store that lacks one
// must say so in its factory (Lacking), or the suite fails. Today the Postgres and the embedded
// store implement every interface and run every suite. Dispatchers (Redis, in-process) run their
// own contract through ExerciseDispatcher.
//
// To run one suite, or one test of it, select it by its subtest path (anchored: -run matches each
// element anywhere in a name, and TestStore would also select the backend's TestStoreRefuses…):
//
//	go test -race ./store/postgres -run '^TestStore$/^DispatchStore$'
//	go test -race ./store/sqlite -run '^TestStore$/^RecoveryStore$/^JobOverdue$'
//	go test -race ./store/memory -run '^TestDispatcher$/^Counts$'
//
// The shared benchmarks have one entry too, Benchmark, which a backend's BenchmarkStore calls:
//
//	go test -run '^$' -bench 'BenchmarkStore/Statements$' -benchtime 100x ./store/postgres
//
// TestExerciseRunsEverySuite (this package) fails when a suite function is not in Exercise's table
// or a suite is exported; TestEveryBackendExercised fails when a package of store/ implements
// store.Store or store.Dispatcher and does not call Exercise or ExerciseDispatcher exactly once.
package storetest
