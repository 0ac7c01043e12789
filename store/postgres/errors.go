package postgres

import (
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jq-dev/jq/store/internal/sqlstore"
)

// SQLSTATE codes the store translates.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
	codeCheckViolation      = "23514"
	codeInvalidText         = "22P02"
	codeQueryCanceled       = "57014" // statement_timeout, or a cancel request
)

// pgError returns the server error inside err, if any.
func pgError(err error) *pgconn.PgError {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

func isCode(err error, code string) bool {
	pe := pgError(err)
	return pe != nil && pe.Code == code
}

// errs words the store's errors ("postgres: …"; a missing row is pgx.ErrNoRows).
var errs = sqlstore.Errors{Backend: "postgres", NoRows: pgx.ErrNoRows}
