package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// NewDatabase creates an empty database named jqtest_<test name>_<random hex> on the
// server at PostgresURL, drops it (WITH (FORCE)) when the test ends, and returns its DSN.
// An unreachable server fails the test.
func NewDatabase(tb testing.TB) string {
	tb.Helper()
	dsn, drop, err := createDatabase(tb.Name())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := drop(); err != nil {
			tb.Errorf("testenv: %v", err)
		}
	})
	return dsn
}

// NewDatabaseForMain is NewDatabase for TestMain, where there is no testing.TB: one
// database per test package. cleanup drops the database (it is safe to call more than
// once) and reports a failure on stderr.
//
//	func TestMain(m *testing.M) {
//		dsn, cleanup, err := testenv.NewDatabaseForMain("store")
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		code := m.Run()
//		cleanup()
//		os.Exit(code)
//	}
func NewDatabaseForMain(name string) (dsn string, cleanup func(), err error) {
	dsn, drop, err := createDatabase(name)
	if err != nil {
		return "", nil, err
	}
	var once sync.Once
	return dsn, func() {
		once.Do(func() {
			if err := drop(); err != nil {
				fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
			}
		})
	}, nil
}

// createDatabase creates a uniquely named database and returns its DSN and a func that
// drops it.
func createDatabase(name string) (dsn string, drop func() error, err error) {
	adminURL := PostgresURL()
	// 7 + 40 + 1 + 12 = 60 characters: under PostgreSQL's 63-byte identifier limit.
	dbName := "jqtest_" + sanitizeName(name, 40) + "_" + randomHex(6)
	ident := pgx.Identifier{dbName}.Sanitize()

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	conn, err := connectAdmin(ctx, adminURL)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// template0 has no connections (datallowconn is false), so concurrent CREATE DATABASEs
	// cannot fail with "source database is being accessed by other users", and objects
	// someone added to template1 do not leak in.
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident+" TEMPLATE template0 ENCODING 'UTF8'"); err != nil {
		return "", nil, fmt.Errorf("testenv: create database %s: %w", dbName, err)
	}
	dsn, err = withDatabase(adminURL, dbName)
	if err != nil {
		return "", nil, err
	}
	drop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		conn, err := connectAdmin(ctx, adminURL)
		if err != nil {
			return fmt.Errorf("drop database %s: %w", dbName, err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", dbName, err)
		}
		return nil
	}
	return dsn, drop, nil
}

// connectAdmin connects to the shared server; its error is the one-line message tests
// show when the server is not there.
func connectAdmin(ctx context.Context, adminURL string) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("testenv: PostgreSQL at %s is unreachable (%w); "+howToRun,
			redactURL(adminURL), oneLine(err), "JQ_TEST_DATABASE_URL")
	}
	return conn, nil
}

// withDatabase returns dsn with its database replaced by db; dsn is a URL or a libpq
// keyword/value string.
func withDatabase(dsn, db string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("testenv: parse JQ_TEST_DATABASE_URL: %w", err)
		}
		u.Path = "/" + db
		u.RawPath = ""
		return u.String(), nil
	}
	// In keyword/value form the last occurrence of a keyword wins.
	return dsn + " dbname=" + db, nil
}

func redactURL(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		return u.Redacted()
	}
	return dsn
}

// oneLine keeps multi-line driver errors from breaking the one-line failure message.
func oneLine(err error) error {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if s == err.Error() {
		return err
	}
	return errors.New(s)
}
