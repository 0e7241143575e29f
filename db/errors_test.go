package db_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"chargeonce/db"
	"chargeonce/db/dbtest"
)

// The kinds of what a real PostgreSQL answers, each from a statement that
// provokes it on chargeonce's schema.
func TestClassify_WhatPostgreSQLAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	merchant := uuid.New()
	_, err := pool.Exec(ctx, "INSERT INTO merchants (id, name) VALUES ($1, 'classify')", merchant)
	require.NoError(t, err)

	var name string
	err = pool.QueryRow(ctx, "SELECT name FROM merchants WHERE id = $1", uuid.New()).Scan(&name)
	kind, _ := db.Classify(err)
	require.Equal(t, db.NotFound, kind, "%v", err)

	_, err = pool.Exec(ctx, "INSERT INTO merchants (id, name) VALUES ($1, 'classify')", uuid.New())
	kind, constraint := db.Classify(err)
	require.Equal(t, db.UniqueViolation, kind, "%v", err)
	require.NotEmpty(t, constraint)

	_, err = pool.Exec(ctx, "INSERT INTO api_keys (id, merchant_id, key_hash, key_prefix) VALUES ($1, $2, '\\x00', 'x')", uuid.New(), uuid.New())
	kind, constraint = db.Classify(err)
	require.Equal(t, db.ForeignKeyViolation, kind, "%v", err)
	require.NotEmpty(t, constraint)

	_, err = pool.Exec(ctx, "SELECT * FROM no_such_table")
	kind, _ = db.Classify(err)
	require.Equal(t, db.Other, kind, "a statement the database refuses is no outage: %v", err)

	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	_, err = pool.Exec(short, "SELECT pg_sleep(1)")
	require.True(t, db.IsUnavailable(err), "a database too slow for the caller's deadline: %v", err)
}

func TestClassify_Outages(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		&pgconn.PgError{Code: "57P01"}, // admin_shutdown
		&pgconn.PgError{Code: "08006"}, // connection_failure
		&pgconn.PgError{Code: "25006"}, // read-only: a standby
		&pgconn.PgError{Code: "53300"}, // too_many_connections
		fmt.Errorf("claim: %w", io.ErrUnexpectedEOF),
		fmt.Errorf("%w: %w", db.ErrNotSent, context.DeadlineExceeded),
	} {
		require.True(t, db.IsUnavailable(err), "%v", err)
	}
	for _, err := range []error{nil, errors.New("a bug"), &pgconn.PgError{Code: "22P02"}, pgx.ErrTxClosed} {
		require.False(t, db.IsUnavailable(err), "%v", err)
	}
}

func TestMayHaveRun_OnlyWhatWasSent(t *testing.T) {
	t.Parallel()
	require.False(t, db.MayHaveRun(fmt.Errorf("%w: %w", db.ErrNotSent, context.DeadlineExceeded)), "no connection: never sent")
	require.False(t, db.MayHaveRun(&pgconn.ConnectError{}), "never connected")
	require.True(t, db.MayHaveRun(io.ErrUnexpectedEOF), "the connection broke after the statement went out")
}
