package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// CreateToken implements store.Store.
func (db *DB) CreateToken(ctx context.Context, t *parley.Token) error {
	if err := store.CheckText("the token", t.ID, t.AgentID, t.Name, t.Hash); err != nil {
		return err
	}
	return db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO tokens (id, kind, agent_id, name, hash, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			t.ID, string(t.Kind), t.AgentID, t.Name, t.Hash, formatTime(t.CreatedAt))
		if isUnique(err) {
			return parley.Errorf(parley.EBUSY, "a token with this id or secret exists")
		}
		return err
	})
}

const tokenColumns = `id, kind, agent_id, name, hash, created_at, COALESCE(revoked_at, '')`

func scanToken(row store.Scanner) (*parley.Token, error) {
	return store.ReadToken(row, parseTime)
}

// TokenByHash implements store.Store.
func (db *DB) TokenByHash(ctx context.Context, hash string) (*parley.Token, error) {
	t, err := scanToken(db.r.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM tokens WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, parley.Errorf(parley.ENOTFOUND, "no such token")
	}
	return t, err
}

// ListTokens implements store.Store.
func (db *DB) ListTokens(ctx context.Context) ([]*parley.Token, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+tokenColumns+` FROM tokens ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.Collect(rows, scanToken)
}

// RevokeToken implements store.Store.
func (db *DB) RevokeToken(ctx context.Context, id string, at parley.Time) error {
	return db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE tokens SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, formatTime(at), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return err
			}
			return parley.Errorf(parley.ENOTFOUND, "token %s not found", id)
		}
		return nil
	})
}

// CountTokens implements store.Store.
func (db *DB) CountTokens(ctx context.Context) (int, error) {
	var n int
	err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM tokens WHERE revoked_at IS NULL`).Scan(&n)
	return n, err
}
