package sqlite

import (
	"context"
	"database/sql"

	"github.com/parleyhq/parley"
	"github.com/parleyhq/parley/internal/store"
)

// RenewImport implements store.Store.
func (db *DB) RenewImport(ctx context.Context, p store.RenewImportParams) error {
	return db.updateImport(ctx, p.ConversationID, `import_expires = ?`, formatTime(p.Lease.Expires), p.Lease.Owner)
}

// FinishImport implements store.Store.
func (db *DB) FinishImport(ctx context.Context, conversationID, owner string) error {
	return db.updateImport(ctx, conversationID, `import_owner = NULL, import_expires = NULL`, nil, owner)
}

// updateImport sets the columns of set (with its one argument, if not nil)
// on the import in progress of owner, or returns ErrImportLost.
func (db *DB) updateImport(ctx context.Context, id, set string, arg any, owner string) error {
	if owner == "" {
		return store.ErrImportLost(id)
	}
	args := []any{id, owner}
	if arg != nil {
		args = append([]any{arg}, args...)
	}
	return db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE conversations SET `+set+` WHERE id = ? AND import_owner = ?`, args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return err
			}
			return store.ErrImportLost(id)
		}
		return nil
	})
}

// AbortImport implements store.Store.
func (db *DB) AbortImport(ctx context.Context, conversationID, owner string) error {
	return db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		n, err := deleteConversation(ctx, tx, conversationID, ` AND import_owner = ?`, owner)
		if err == nil && n == 0 {
			err = parley.Errorf(parley.ENOTFOUND, "conversation %s is not being imported by this server", conversationID)
		}
		return err
	})
}

// deadImport is the condition on a conversations row for an import whose
// importer is gone: one process owns an SQLite file, so an import of any
// other owner is dead (its process stopped), and so is one whose lease
// ended. Its arguments are the sweeper's owner and the time now.
const deadImport = ` AND import_owner IS NOT NULL AND (import_owner <> ? OR import_expires <= ?)`

// SweepImports implements store.Store: each import is removed in its own
// transaction, so that the writer is never held for long, after checking
// again that it is dead.
func (db *DB) SweepImports(ctx context.Context, p store.SweepImportsParams) ([]string, error) {
	now := formatTime(p.Now)
	q := `SELECT id FROM conversations WHERE true` + deadImport
	args := []any{p.Owner, now}
	if p.ConversationID != "" {
		q += ` AND id = ?`
		args = append(args, p.ConversationID)
	}
	rows, err := db.r.QueryContext(ctx, q+` LIMIT ?`, append(args, p.Bound())...)
	if err != nil {
		return nil, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return store.RemoveEach(ids, func(id string) (bool, error) {
		var n int64
		err := db.write(ctx, func(ctx context.Context, tx *sql.Tx) (err error) {
			n, err = deleteConversation(ctx, tx, id, deadImport, p.Owner, now)
			return err
		})
		return n > 0, err
	})
}
