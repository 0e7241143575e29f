package db_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"chargeonce/db/dbtest"
)

// Ids travel as binary uuids both ways, NULL included, and compare in SQL
// with what PostgreSQL itself makes of their text.
func TestConnect_GoogleUUIDs_RoundTripAsBinary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	id := uuid.Must(uuid.NewV7())

	var same bool
	var back uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, "SELECT $1::uuid = $2::text::uuid, $1::uuid", id, id.String()).Scan(&same, &back))
	require.True(t, same, "PostgreSQL got the id itself")
	require.Equal(t, id, back)

	var ptr *uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, "SELECT $1::uuid", &id).Scan(&ptr))
	require.Equal(t, &id, ptr)
	var isNull bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT $1::uuid IS NULL, NULL::uuid", (*uuid.UUID)(nil)).Scan(&isNull, &ptr))
	require.True(t, isNull, "a nil *uuid.UUID is NULL")
	require.Nil(t, ptr)

	err := pool.QueryRow(ctx, "SELECT NULL::uuid").Scan(&back)
	require.ErrorContains(t, err, "NULL")

	// The plans are this package's, not pgx's text conversion through
	// database/sql's interfaces.
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	m := conn.Conn().TypeMap()
	require.Equal(t, "db.encodeGoogleUUID", typeName(m.PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id)))
	require.Equal(t, "db.scanGoogleUUID", typeName(m.PlanScan(pgtype.UUIDOID, pgtype.BinaryFormatCode, &back)))
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }
