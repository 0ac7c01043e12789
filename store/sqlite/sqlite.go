// Package sqlite is jq's embedded store: store.Store and the hot path's stores over one SQLite
// database file, for a jq whose server runs in one process (`jq --role=all`, or `--role=server`
// with remote workers) and needs nothing installed. It passes the same store/storetest contract as
// the Postgres store.
//
// The driver is modernc.org/sqlite, pure Go: the binary stays static (CGO_ENABLED=0). The database
// is in WAL mode. One connection writes, in one goroutine (writer.go): every write is a function
// run inside a transaction, and the writes that queue up while one commits are committed together,
// each in a savepoint of its own (group commit), so a burst of small writes costs one commit. Reads
// use a pool of read-only connections that see the last commit. A process holds an exclusive lock
// on the database's lock file for as long as the store is open: a second jq process on the same
// file is refused (the store is one process's; several server replicas need Postgres).
//
// Durability: with synchronous=NORMAL (the default) a commit is in the WAL file when the call
// returns, so a crash of the process (kill -9) loses nothing; a power loss may lose the last
// commits. synchronous=FULL (Config.Synchronous) syncs every group commit to the disk as well.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/jq-dev/jq/store"
)

//go:embed schema/*.sql
var schemaFS embed.FS

// Config configures a Store.
type Config struct {
	// Path is the database file; its directory is created when missing.
	Path string
	// Synchronous is SQLite's synchronous setting: "NORMAL" (default: a process crash loses
	// nothing, a power loss may lose the last commits) or "FULL" (every commit reaches the disk).
	Synchronous string
	// Readers is the number of read connections (default 4).
	Readers int
	// Now is the store's clock (default time.Now): every time the store writes comes from it.
	Now func() time.Time
}

// Store is the embedded store. It is safe for concurrent use.
type Store struct {
	path string
	now  func() time.Time
	lock *flock.Flock // the exclusive lock on path+".lock"

	wdb  *sql.DB // the writer's pool: one connection, held by the writer goroutine
	rdb  *sql.DB // read-only connections
	w    *writer
	stmt sync.Map // SQL text → *sql.Stmt on rdb

	// listScanBound bounds a job list with filters that no index serves.
	listScanBound time.Duration

	closeOnce sync.Once
}

var _ store.Store = (*Store)(nil)

// ErrInUse is returned by New when another process holds the database.
var ErrInUse = errors.New("sqlite: the database is in use by another jq process")

// New opens (creating when missing) the database at cfg.Path, applies its schema, and starts the
// writer. It fails when another process holds the database (ErrInUse).
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Path == "" {
		return nil, errors.New("sqlite: path is empty")
	}
	sync := strings.ToUpper(cfg.Synchronous)
	switch sync {
	case "":
		sync = "NORMAL"
	case "NORMAL", "FULL":
	default:
		return nil, fmt.Errorf("sqlite: synchronous %q: want NORMAL or FULL", cfg.Synchronous)
	}
	if cfg.Readers <= 0 {
		cfg.Readers = 4
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	path, err := filepath.Abs(cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	// The database holds payloads and results: only its owner reads it, and nobody else may
	// replace it. SQLite gives the -wal and -shm files the database file's mode.
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, errs.Wrap("create the data directory", err)
	}
	if err := checkOwner(filepath.Dir(path), true); err != nil {
		return nil, err
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := checkOwner(p, false); err != nil {
			return nil, err
		}
	}
	lock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, err
	}
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600); err == nil {
		_ = f.Close()
	}
	s := &Store{path: path, now: cfg.Now, lock: lock, listScanBound: jobListScanBound}
	common := "_pragma=busy_timeout(10000)&_pragma=foreign_keys(0)&_pragma=temp_store(memory)"
	s.wdb, err = sql.Open("sqlite", dsn(path, common+"&_pragma=journal_mode(WAL)&_pragma=synchronous("+sync+")&_pragma=cache_size(-65536)"))
	if err == nil {
		s.rdb, err = sql.Open("sqlite", dsn(path, common+"&_pragma=query_only(1)&_pragma=cache_size(-16384)"))
	}
	if err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.rdb.SetMaxOpenConns(cfg.Readers)
	s.rdb.SetMaxIdleConns(cfg.Readers)
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if err := migrate(ctx, conn); err != nil {
		_ = conn.Close()
		s.closeDBs()
		return nil, err
	}
	s.w = startWriter(conn, s.now)
	if err := s.Ping(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func dsn(path, params string) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + params
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Ping checks that the database answers a read.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.rdb.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return errs.Wrap("ping", err)
	}
	if s.w.stopped() {
		return errors.New("sqlite: ping: the store is closed")
	}
	return nil
}

// Close stops the writer after the writes queued before it, closes the database and releases
// the lock. The Store must not be used afterwards.
func (s *Store) Close() {
	s.closeOnce.Do(func() {
		if s.w != nil {
			s.w.stop()
		}
		s.stmt.Range(func(_, v any) bool { _ = v.(*sql.Stmt).Close(); return true })
		s.closeDBs()
	})
}

func (s *Store) closeDBs() {
	if s.rdb != nil {
		_ = s.rdb.Close()
	}
	if s.wdb != nil {
		_ = s.wdb.Close()
	}
	if s.lock != nil {
		unlockFile(s.lock)
		s.lock = nil
	}
}

// rstmt returns the prepared read statement of q (prepared once, on each read connection as it
// is first used there).
func (s *Store) rstmt(ctx context.Context, q string) (*sql.Stmt, error) {
	if st, ok := s.stmt.Load(q); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.rdb.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.stmt.LoadOrStore(q, st); loaded {
		_ = st.Close() //nolint:sqlclosecheck // the loser of a race: the cached one is used
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

// query runs a read statement on the read pool.
func (s *Store) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, err := s.rstmt(ctx, q) //nolint:sqlclosecheck // cached for the store's life, closed by Close
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// queryRow runs a read statement that returns at most one row.
func (s *Store) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	st, err := s.rstmt(ctx, q) //nolint:sqlclosecheck // cached for the store's life, closed by Close
	if err != nil {
		// sql.Row cannot be built with an error from outside database/sql: run it unprepared,
		// which reports the same error from Scan.
		return s.rdb.QueryRowContext(ctx, q, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// migrate applies the schema files newer than the database's user_version, each in a transaction
// of its own that also sets the new version. Not golang-migrate (which applies the Postgres schema):
// its SQLite driver records the version in a table of its own, marked dirty before a migration and
// clean after it in separate statements, so a crash between them leaves a database that needs
// `migrate force` by hand. Here the schema change and its version commit together or not at all.
func migrate(ctx context.Context, conn *sql.Conn) error {
	var version int
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return errs.Wrap("read the schema version", err)
	}
	files, err := fs.Glob(schemaFS, "schema/*.sql")
	if err != nil {
		return errs.Wrap("schema", err)
	}
	sort.Strings(files)
	if len(files) < version {
		return fmt.Errorf("sqlite: the database's schema version %d is newer than this jq's (%d): use a newer jq", version, len(files))
	}
	for i, f := range files[version:] {
		n := version + i + 1
		if want := fmt.Sprintf("schema/%04d_", n); !strings.HasPrefix(f, want) {
			return fmt.Errorf("sqlite: schema file %s out of sequence (want %s…)", f, want)
		}
		body, err := schemaFS.ReadFile(f)
		if err != nil {
			return errs.Wrap("schema", err)
		}
		if err := execTx(ctx, conn, string(body)+"\nPRAGMA user_version = "+strconv.Itoa(n)+";"); err != nil {
			return fmt.Errorf("sqlite: apply %s: %w", f, err)
		}
	}
	return nil
}

// execTx runs script in one IMMEDIATE transaction on conn.
func execTx(ctx context.Context, conn *sql.Conn, script string) error {
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, script); err != nil {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		return err
	}
	_, err := conn.ExecContext(ctx, "COMMIT")
	return err
}

// jobListScanBound is how long a job list whose filters no index serves (labels, type, completion
// time) may search for its page, as in Postgres.
const jobListScanBound = 150 * time.Millisecond
