package postgres

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// RenewImport implements store.Store.
func (db *DB) RenewImport(ctx context.Context, p store.RenewImportParams) error {
	return db.updateImport(ctx, p.ConversationID, `import_expires = $3`, p.Lease.Owner, p.Lease.Expires.Time)
}

// FinishImport implements store.Store.
func (db *DB) FinishImport(ctx context.Context, conversationID, owner string) error {
	return db.updateImport(ctx, conversationID, `import_owner = NULL, import_expires = NULL`, owner)
}

// updateImport sets the columns of set (whose arguments are $3, …) on the
// import in progress of owner, or returns ErrImportLost.
func (db *DB) updateImport(ctx context.Context, id, set, owner string, args ...any) error {
	return db.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE conversations SET `+set+` WHERE id = $1 AND import_owner = $2`, append([]any{id, owner}, args...)...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.ErrImportLost(id)
		}
		return nil
	})
}

// AbortImport implements store.Store.
func (db *DB) AbortImport(ctx context.Context, conversationID, owner string) error {
	return db.tx(ctx, func(tx pgx.Tx) error {
		n, err := deleteConversation(ctx, tx, conversationID, ` AND import_owner = $2`, owner)
		if err == nil && n == 0 {
			err = parley.Errorf(parley.ENOTFOUND, "conversation %s is not being imported by this server", conversationID)
		}
		return err
	})
}

// deadImport is the condition on a conversations row for an import whose
// importer is gone. Several nodes may share a PostgreSQL database, and one
// cannot tell whether another's import is alive but by its lease: an import
// is dead once its lease ended, whoever owns it. Its argument ($2) is the
// time now.
const deadImport = ` AND import_owner IS NOT NULL AND import_expires <= $2`

// SweepImports implements store.Store: each import is removed in its own
// transaction, after checking again (under the row's lock) that its lease
// ended.
func (db *DB) SweepImports(ctx context.Context, p store.SweepImportsParams) ([]string, error) {
	q := `SELECT id FROM conversations WHERE import_owner IS NOT NULL AND import_expires <= $1`
	args := []any{p.Now.Time}
	if p.ConversationID != "" {
		q += ` AND id = $2`
		args = append(args, p.ConversationID)
	}
	rows, err := db.pool.Query(ctx, q+` LIMIT `+strconv.Itoa(p.Bound()), args...)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	return store.RemoveEach(ids, func(id string) (bool, error) {
		var n int64
		err := db.tx(ctx, func(tx pgx.Tx) (err error) {
			n, err = deleteConversation(ctx, tx, id, deadImport, p.Now.Time)
			return err
		})
		return n > 0, err
	})
}
